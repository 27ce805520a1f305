package hubspot

import (
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"enrichd/enrich"
)

// field is one value of a result a HubSpot property may take, and the top-level field
// of the result whose provenance it has.
type field struct {
	of   string // the result's top-level field, for provenance
	read func(r enrich.Result, email string) string
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return strings.TrimSpace(*p)
}

func hq(c *enrich.Company, key string) string {
	if c == nil {
		return ""
	}
	v, _ := c.Headquarters[key].(string)
	return strings.TrimSpace(v)
}

// currentRole is the person's current position, or nil.
func currentRole(p *enrich.Person) *enrich.Position {
	if p == nil {
		return nil
	}
	for i := range p.Positions {
		if p.Positions[i].IsCurrent {
			return &p.Positions[i]
		}
	}
	return nil
}

// CompanyFields are the fields of a company result a mapping may name.
var CompanyFields = map[string]field{
	"name":   {"name", func(r enrich.Result, _ string) string { return strings.TrimSpace(r.Company.Name) }},
	"domain": {"domain", func(r enrich.Result, _ string) string { return str(r.Company.Domain) }},
	"employee_count": {"employee_count", func(r enrich.Result, _ string) string {
		if r.Company.EmployeeCount == nil {
			return ""
		}
		return strconv.FormatInt(*r.Company.EmployeeCount, 10)
	}},
	"about": {"about", func(r enrich.Result, _ string) string { return str(r.Company.About) }},
	"year_founded": {"year_founded", func(r enrich.Result, _ string) string {
		if r.Company.YearFounded == nil {
			return ""
		}
		return strconv.Itoa(*r.Company.YearFounded)
	}},
	"industry":    {"primary_industry", func(r enrich.Result, _ string) string { return IndustryOption(str(r.Company.PrimaryIndustry)) }},
	"city":        {"headquarters", func(r enrich.Result, _ string) string { return hq(r.Company, "city") }},
	"country":     {"headquarters", func(r enrich.Result, _ string) string { return hq(r.Company, "country") }},
	"network_url": {"network_url", func(r enrich.Result, _ string) string { return str(r.Company.NetworkURL) }},
}

// PersonFields are the fields of a person result a mapping may name.
var PersonFields = map[string]field{
	"email":      {"email", func(_ enrich.Result, email string) string { return email }},
	"first_name": {"first_name", func(r enrich.Result, _ string) string { return str(r.Person.FirstName) }},
	"last_name":  {"last_name", func(r enrich.Result, _ string) string { return str(r.Person.LastName) }},
	"title": {"positions", func(r enrich.Result, _ string) string {
		if p := currentRole(r.Person); p != nil {
			return str(p.Title)
		}
		return ""
	}},
	"company": {"positions", func(r enrich.Result, _ string) string {
		if p := currentRole(r.Person); p != nil {
			if name := str(p.CompanyName); name != "" {
				return name
			}
			if p.Company != nil {
				return str(p.Company.Name)
			}
		}
		return ""
	}},
	"headline":    {"headline", func(r enrich.Result, _ string) string { return str(r.Person.Headline) }},
	"city":        {"city", func(r enrich.Result, _ string) string { return str(r.Person.City) }},
	"country":     {"country_code", func(r enrich.Result, _ string) string { return str(r.Person.CountryCode) }},
	"network_url": {"network_url", func(r enrich.Result, _ string) string { return str(r.Person.NetworkURL) }},
}

// DefaultCompanyMapping and DefaultPersonMapping are HubSpot property to enrichd field.
var (
	DefaultCompanyMapping = map[string]string{
		"name": "name", "domain": "domain", "numberofemployees": "employee_count", "description": "about",
		"founded_year": "year_founded", "industry": "industry", "city": "city", "country": "country",
		"linkedin_company_page": "network_url",
	}
	DefaultPersonMapping = map[string]string{
		"email": "email", "firstname": "first_name", "lastname": "last_name", "jobtitle": "title", "company": "company",
		"city": "city", "country": "country", "hs_linkedin_url": "network_url",
	}
)

// Fields are the fields of objectType's results a mapping may name.
func Fields(objectType string) map[string]field {
	if objectType == enrich.ObjectPerson {
		return PersonFields
	}
	return CompanyFields
}

// FieldNames lists them, sorted, for an error that names them.
func FieldNames(objectType string) []string {
	return slices.Sorted(maps.Keys(Fields(objectType)))
}

// propertyName is what HubSpot accepts as a property's internal name.
var propertyName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,99}$`)

// MaxMapping bounds a Loop's mapping.
const MaxMapping = 50

// CheckMapping checks a Loop's override of the mapping: HubSpot property names, each
// an enrichd field of the object type or "" (leave a default property unwritten). The
// property the object is found by (domain, email) keeps its field.
func CheckMapping(objectType string, m map[string]string) error {
	if len(m) > MaxMapping {
		return enrich.Errorf(enrich.KindInvalid, "destination.mapping: at most %d properties", MaxMapping)
	}
	fields := Fields(objectType)
	for prop, f := range m {
		if !propertyName.MatchString(prop) {
			return enrich.Errorf(enrich.KindInvalid, "destination.mapping: %q is not a HubSpot property name (lower case letters, digits and _, starting with a letter)", prop)
		}
		if prop == ProvenanceProperty || prop == keyProperty(objectType) {
			return enrich.Errorf(enrich.KindInvalid, "destination.mapping: %s is enrichd's own, it cannot be mapped", prop)
		}
		if _, ok := fields[f]; f != "" && !ok {
			return enrich.Errorf(enrich.KindInvalid, "destination.mapping: %q is not a field of a %s result; use one of %s, or \"\" to leave the property unwritten",
				f, objectType, strings.Join(FieldNames(objectType), ", "))
		}
	}
	return nil
}

// keyProperty is the property an object is found by: a company's domain, a contact's
// email.
func keyProperty(objectType string) string {
	if objectType == enrich.ObjectPerson {
		return "email"
	}
	return "domain"
}

// Mapping is the Loop's mapping: the default with its override applied.
func Mapping(objectType string, override map[string]string) map[string]string {
	m := maps.Clone(DefaultCompanyMapping)
	if objectType == enrich.ObjectPerson {
		m = maps.Clone(DefaultPersonMapping)
	}
	for prop, f := range override {
		if f == "" {
			delete(m, prop)
		} else {
			m[prop] = f
		}
	}
	return m
}

// Properties are the values of result under the mapping, by HubSpot property, the
// blank ones left out, and the top-level field each came from.
func Properties(objectType string, mapping map[string]string, r enrich.Result, email string) (values, from map[string]string) {
	fields := Fields(objectType)
	values, from = map[string]string{}, map[string]string{}
	if (objectType == enrich.ObjectPerson && r.Person == nil) || (objectType != enrich.ObjectPerson && r.Company == nil) {
		return values, from
	}
	for prop, name := range mapping {
		f, ok := fields[name]
		if !ok {
			continue
		}
		if v := f.read(r, email); v != "" {
			values[prop], from[prop] = truncate(v, 65000), f.of
		}
	}
	return values, from
}

// industryOptions are the values of HubSpot's company property industry (its
// enumeration's internal values) a label is written as; a label that is not one of
// them is left out rather than written as a value HubSpot refuses.
var industryOptions = map[string]bool{}

func init() {
	for _, o := range strings.Fields(`ACCOUNTING AIRLINES_AVIATION ALTERNATIVE_MEDICINE APPAREL_FASHION ARCHITECTURE_PLANNING
		AUTOMOTIVE BANKING BIOTECHNOLOGY BROADCAST_MEDIA BUILDING_MATERIALS BUSINESS_SUPPLIES_AND_EQUIPMENT CHEMICALS
		CIVIL_ENGINEERING COMPUTER_GAMES COMPUTER_HARDWARE COMPUTER_NETWORK_SECURITY COMPUTER_NETWORKING COMPUTER_SOFTWARE
		CONSTRUCTION CONSUMER_ELECTRONICS CONSUMER_GOODS CONSUMER_SERVICES DEFENSE_SPACE DESIGN E_LEARNING EDUCATION_MANAGEMENT
		ELECTRICAL_ELECTRONIC_MANUFACTURING ENTERTAINMENT ENVIRONMENTAL_SERVICES FINANCIAL_SERVICES FOOD_BEVERAGES
		GOVERNMENT_ADMINISTRATION HEALTH_WELLNESS_AND_FITNESS HIGHER_EDUCATION HOSPITAL_HEALTH_CARE HOSPITALITY HUMAN_RESOURCES
		INFORMATION_SERVICES INFORMATION_TECHNOLOGY_AND_SERVICES INSURANCE INTERNET INVESTMENT_BANKING INVESTMENT_MANAGEMENT
		LAW_PRACTICE LEGAL_SERVICES LOGISTICS_AND_SUPPLY_CHAIN MACHINERY MANAGEMENT_CONSULTING MARKETING_AND_ADVERTISING
		MECHANICAL_OR_INDUSTRIAL_ENGINEERING MEDIA_PRODUCTION MEDICAL_DEVICES MINING_METALS NONPROFIT_ORGANIZATION_MANAGEMENT
		OIL_ENERGY PHARMACEUTICALS PUBLISHING REAL_ESTATE RENEWABLES_ENVIRONMENT RESEARCH RETAIL SECURITY_AND_INVESTIGATIONS
		STAFFING_AND_RECRUITING TELECOMMUNICATIONS TRANSPORTATION_TRUCKING_RAILROAD VENTURE_CAPITAL_PRIVATE_EQUITY WHOLESALE`) {
		industryOptions[o] = true
	}
}

var notOptionChars = regexp.MustCompile(`[^A-Z0-9]+`)

// IndustryOption is HubSpot's industry option of an industry label ("Computer
// Software": COMPUTER_SOFTWARE, "Food & Beverages": FOOD_BEVERAGES), or "" when the
// label is not one of its options.
func IndustryOption(label string) string {
	up := strings.ToUpper(strings.TrimSpace(label))
	up = strings.ReplaceAll(up, "&", " ")
	o := strings.Trim(notOptionChars.ReplaceAllString(up, "_"), "_")
	if industryOptions[o] {
		return o
	}
	// "Information Technology & Services" is written with AND in HubSpot's option.
	o = strings.Trim(notOptionChars.ReplaceAllString(strings.ToUpper(strings.ReplaceAll(label, "&", " and ")), "_"), "_")
	if industryOptions[o] {
		return o
	}
	return ""
}
