package source

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"enrichd/enrich"
)

// EnrichLayerKeyEnv is where the Enrich Layer API key is read from.
const EnrichLayerKeyEnv = "ENRICHLAYER_API_KEY"

// Enrich Layer's published price of each call that answered, in its credits.
const (
	enrichLayerCompanyCredits = 1
	enrichLayerResolveCredits = 2
	enrichLayerProfileCredits = 1
	enrichLayerSearchCredits  = 10
)

// EnrichLayer is the `enrichlayer` source: the Enrich Layer API (formerly sold as
// Proxycurl), which serves the network's company pages and profiles.
//
// Upstream cost per lookup, in Enrich Layer credits: company by page 1, company by
// domain 3 (resolve 2, then the page 1), person 1, staff search 10. A failed call
// (an error or a 404) costs nothing.
type EnrichLayer struct {
	api  *vendorAPI
	norm normalizer
}

var (
	_ enrich.Source              = (*EnrichLayer)(nil)
	_ enrich.StaffSearcher       = (*EnrichLayer)(nil)
	_ enrich.SearchBilledPerCall = (*EnrichLayer)(nil)
	_ enrich.Metered             = (*EnrichLayer)(nil)
	_ enrich.Priced              = (*EnrichLayer)(nil)
)

// NewEnrichLayer builds the adapter. Defaults: https://enrichlayer.com, 5 requests a
// second (the vendor's 300 a minute), 4 in flight, 60 s a request (the vendor's advice).
func NewEnrichLayer(cfg VendorConfig) (*EnrichLayer, error) {
	api, err := newVendorAPI("enrichlayer", EnrichLayerKeyEnv, cfg, EnrichLayerDefaults, func(r *http.Request, key string) { r.Header.Set("Authorization", "Bearer "+key) })
	if err != nil {
		return nil, err
	}
	return &EnrichLayer{api: api, norm: newNormalizer(cfg.NetworkHost)}, nil
}

// KeyEnv names where the installation's key is read from (enrich.Keyed).
func (e *EnrichLayer) KeyEnv() string { return EnrichLayerKeyEnv }

func (e *EnrichLayer) Name() string              { return "enrichlayer" }
func (e *EnrichLayer) Stats() enrich.SourceStats { return e.api.meter.stats(e.Name()) }

// elDate is the vendor's date: day and month may be null.
type elDate struct {
	Day   *int `json:"day"`
	Month *int `json:"month"`
	Year  *int `json:"year"`
}

func (d *elDate) result() (date, precision *string) {
	if d == nil || d.Year == nil {
		return nil, nil
	}
	deref := func(p *int) int {
		if p == nil {
			return 0
		}
		return *p
	}
	return partialDate(*d.Year, deref(d.Month), deref(d.Day))
}

type elLocation struct {
	Country    *string `json:"country"`
	City       *string `json:"city"`
	State      *string `json:"state"`
	PostalCode *string `json:"postal_code"`
	Line1      *string `json:"line_1"`
	IsHQ       bool    `json:"is_hq"`
}

type elCompany struct {
	LinkedinInternalID    *string     `json:"linkedin_internal_id"`
	Description           *string     `json:"description"`
	Website               *string     `json:"website"`
	Industry              *string     `json:"industry"`
	CompanySize           []*int64    `json:"company_size"`
	CompanySizeOnLinkedin *int64      `json:"company_size_on_linkedin"`
	HQ                    *elLocation `json:"hq"`
	CompanyType           *string     `json:"company_type"`
	FoundedYear           *int        `json:"founded_year"`
	Name                  *string     `json:"name"`
	Tagline               *string     `json:"tagline"`
	UniversalNameID       *string     `json:"universal_name_id"`
	FollowerCount         *int64      `json:"follower_count"`
}

type elExperience struct {
	StartsAt                  *elDate `json:"starts_at"`
	EndsAt                    *elDate `json:"ends_at"`
	Company                   *string `json:"company"`
	CompanyLinkedinProfileURL *string `json:"company_linkedin_profile_url"`
	Title                     *string `json:"title"`
	Location                  *string `json:"location"`
}

type elProfile struct {
	PublicIdentifier *string        `json:"public_identifier"`
	ProfilePicURL    *string        `json:"profile_pic_url"`
	FirstName        *string        `json:"first_name"`
	LastName         *string        `json:"last_name"`
	FullName         *string        `json:"full_name"`
	FollowerCount    *int64         `json:"follower_count"`
	Occupation       *string        `json:"occupation"`
	Headline         *string        `json:"headline"`
	Summary          *string        `json:"summary"`
	Country          *string        `json:"country"`
	City             *string        `json:"city"`
	Experiences      []elExperience `json:"experiences"`
	Connections      *int64         `json:"connections"`
}

// CompanyByURL reads the company page: GET /api/v2/company?url=.
func (e *EnrichLayer) CompanyByURL(ctx context.Context, tally *enrich.Tally, networkURL string) (*enrich.Company, error) {
	var c elCompany
	if err := e.api.get(ctx, tally, "/api/v2/company", url.Values{"url": {networkURL}}, enrichLayerCompanyCredits, &c); err != nil {
		return nil, err
	}
	charge(tally, enrichLayerCompanyCredits)
	return e.company(&c, networkURL)
}

// CompanyByDomain finds the domain's company page (GET /api/v2/company/resolve), then
// reads it. A page that lists another website gives an unconfirmed redirect to it.
func (e *EnrichLayer) CompanyByDomain(ctx context.Context, tally *enrich.Tally, domain string) (*enrich.Company, error) {
	page, err := e.resolve(ctx, tally, domain)
	if err != nil {
		return nil, err
	}
	c, err := e.CompanyByURL(ctx, tally, page)
	if err != nil {
		return nil, err
	}
	domainRedirect(c, domain)
	return c, nil
}

func (e *EnrichLayer) resolve(ctx context.Context, tally *enrich.Tally, domain string) (string, error) {
	var r struct {
		URL *string `json:"url"`
	}
	if err := e.api.get(ctx, tally, "/api/v2/company/resolve", url.Values{"company_domain": {domain}}, enrichLayerResolveCredits, &r); err != nil {
		return "", err
	}
	charge(tally, enrichLayerResolveCredits)
	page := e.norm.companyURLOf(r.URL)
	if page == nil {
		return "", fmt.Errorf("enrichlayer: no company page for %s: %w", domain, enrich.ErrNotFound)
	}
	return *page, nil
}

func (e *EnrichLayer) company(c *elCompany, networkURL string) (*enrich.Company, error) {
	name := text(c.Name)
	if name == nil {
		return nil, fmt.Errorf("enrichlayer: %s has no name: %w", networkURL, enrich.ErrNotFound)
	}
	out := &enrich.Company{
		Name:             *name,
		EnrichmentStatus: enrich.StatusEnriched,
		Domain:           e.norm.domainOf(c.Website),
		NetworkURL:       enrich.Ptr(networkURL),
		NetworkID:        text(c.LinkedinInternalID),
		NetworkFollowers: c.FollowerCount,
		EmployeeCount:    c.CompanySizeOnLinkedin,
		PrimaryIndustry:  text(c.Industry),
		OrganizationType: organizationType(c.CompanyType),
		YearFounded:      c.FoundedYear,
		About:            text(c.Description),
		Slogan:           text(c.Tagline),
	}
	if len(c.CompanySize) == 2 {
		out.EmployeeRange = sizeRange(c.CompanySize[0], c.CompanySize[1])
	}
	if hq := c.HQ; hq != nil {
		out.Headquarters = headquarters(map[string]*string{
			"city": hq.City, "country": hq.Country, "state": hq.State, "postal_code": hq.PostalCode, "line_1": hq.Line1,
		})
	}
	return out, nil
}

// headquarters keeps the address parts a source gave; nil when it gave none.
func headquarters(parts map[string]*string) map[string]any {
	out := map[string]any{}
	for k, v := range parts {
		if t := text(v); t != nil {
			out[k] = *t
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// PersonByURL reads the profile: GET /api/v2/profile?profile_url=.
func (e *EnrichLayer) PersonByURL(ctx context.Context, tally *enrich.Tally, networkURL string) (*enrich.Person, error) {
	var p elProfile
	if err := e.api.get(ctx, tally, "/api/v2/profile", url.Values{"profile_url": {networkURL}}, enrichLayerProfileCredits, &p); err != nil {
		return nil, err
	}
	charge(tally, enrichLayerProfileCredits)
	out := &enrich.Person{
		NetworkURL:         enrich.Ptr(networkURL),
		FullName:           text(p.FullName),
		FirstName:          text(p.FirstName),
		LastName:           text(p.LastName),
		Headline:           orDefault(text(p.Headline), text(p.Occupation)),
		About:              text(p.Summary),
		AvatarURL:          text(p.ProfilePicURL),
		City:               text(p.City),
		CountryCode:        countryCode(p.Country),
		NetworkFollowers:   p.FollowerCount,
		NetworkConnections: p.Connections,
		EnrichmentStatus:   enrich.StatusEnriched,
		Positions:          []enrich.Position{},
	}
	for _, x := range p.Experiences {
		pos := enrich.Position{
			Title:             text(x.Title),
			CompanyName:       text(x.Company),
			CompanyNetworkURL: e.norm.companyURLOf(x.CompanyLinkedinProfileURL),
			Location:          text(x.Location),
			IsCurrent:         x.EndsAt == nil,
		}
		pos.StartDate, pos.StartDatePrecision = x.StartsAt.result()
		pos.EndDate, pos.EndDatePrecision = x.EndsAt.result()
		out.Positions = append(out.Positions, pos)
	}
	out.Positions = currentFirst(out.Positions)
	return out, nil
}

// countryCode keeps a two-letter country code, upper-cased; anything else is unknown.
func countryCode(s *string) *string {
	t := text(s)
	if t == nil || len(*t) != 2 {
		return nil
	}
	return enrich.Ptr(strings.ToUpper(*t))
}

// SearchBilledPerCall: the employee search costs 10 credits a call, whatever its
// page_size, so email lookups ask for a whole page at once.
func (e *EnrichLayer) SearchBilledPerCall() {}

// Prices: the employee search costs 10 credits a call; this adapter matches no
// address directly.
func (e *EnrichLayer) Prices() enrich.Prices {
	return enrich.Prices{StaffSearch: enrichLayerCreditsPerSearch}
}

const enrichLayerCreditsPerSearch = 10

// SearchStaff asks the employee search (GET /api/v2/company/employee/search/) for the
// company's page, with the names as a boolean keyword ("smith OR john"). The hits are
// leads: the caller reads each profile and confirms it. Names that do not fit in the
// vendor's 255 characters are not asked for: the hits come with
// enrich.ErrSearchIncomplete, so nobody held is taken for the only fit.
func (e *EnrichLayer) SearchStaff(ctx context.Context, tally *enrich.Tally, q enrich.StaffQuery) ([]enrich.StaffMember, error) {
	keyword, complete := booleanOr(q.Names, 255)
	if q.Company == nil || keyword == "" {
		return nil, nil
	}
	var page string
	switch {
	case q.Company.NetworkURL != nil:
		page = *q.Company.NetworkURL
	case q.Company.Domain != nil:
		var err error
		if page, err = e.resolve(ctx, tally, *q.Company.Domain); err != nil {
			return nil, err
		}
	default:
		return nil, nil
	}
	var r struct {
		Employees []struct {
			ProfileURL *string `json:"profile_url"`
			Profile    *struct {
				FullName *string `json:"full_name"`
			} `json:"profile"`
		} `json:"employees"`
	}
	q.Limit = min(max(q.Limit, 1), enrich.StaffSearchMax)
	err := e.api.get(ctx, tally, "/api/v2/company/employee/search/", url.Values{
		"company_profile_url": {page},
		"keyword_boolean":     {keyword},
		"page_size":           {strconv.Itoa(q.Limit)},
	}, enrichLayerSearchCredits, &r)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	charge(tally, enrichLayerSearchCredits)
	var out []enrich.StaffMember
	for _, emp := range r.Employees {
		u := e.norm.personURLOf(emp.ProfileURL)
		if u == nil {
			continue
		}
		m := enrich.StaffMember{NetworkURL: *u}
		if emp.Profile != nil && emp.Profile.FullName != nil {
			m.FullName = strings.TrimSpace(*emp.Profile.FullName)
		}
		out = append(out, m)
		if len(out) == q.Limit {
			break
		}
	}
	if !complete {
		return out, fmt.Errorf("enrichlayer: %d names do not fit in one keyword: %w", len(q.Names), enrich.ErrSearchIncomplete)
	}
	return out, nil
}

// booleanOr joins words as "a OR b", quoting none (the names are folded words), and
// stops before the vendor's length limit; complete says every word is in it.
func booleanOr(words []string, limit int) (keyword string, complete bool) {
	complete = true
	var b strings.Builder
	for _, w := range words {
		w = strings.TrimSpace(w)
		if w == "" || strings.ContainsAny(w, `"()`) {
			continue
		}
		next := w
		if b.Len() > 0 {
			next = " OR " + w
		}
		if b.Len()+len(next) > limit {
			return b.String(), false
		}
		b.WriteString(next)
	}
	return b.String(), complete
}
