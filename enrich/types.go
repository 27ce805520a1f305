// Package enrich owns what enrichd enriches, apart from how it is fetched: the inputs
// and their normalization (domains, network URLs, emails), the Company and Person
// results and which of their fields a waterfall can fill, the one error type and the
// task error codes, names and nicknames, matching a local part to a name, email
// resolution, and the pipeline that asks the sources as a waterfall (Lookup: the first
// that knows the subject gives the record, the next fill the wanted fields it lacks)
// and says which source gave each field and what each was asked (Trace). What a
// lookup depends on is passed down to it, never read from its context: the Task (whose
// it is, what it fills, where what it asked is recorded) to the pipeline, and each
// ask's Tally (where what it sends upstream is counted and booked) to the source. The
// Source interface (and StaffSearcher, EmailMatcher, Priced, LookupSupporter, Metered)
// is what the pipeline needs from the outside world; the adapters that implement it
// over HTTP live in enrich/source, the `dataset` source in store. It knows no SQL, no
// HTTP client and no HTTP server.
package enrich

import "time"

// Object types of a task.
const (
	ObjectCompany = "company"
	ObjectPerson  = "person"
)

// Lookup is what the input of a task names.
type Lookup string

const (
	LookupDomain     Lookup = "domain"      // company by domain
	LookupCompanyURL Lookup = "company_url" // company by network page
	LookupPersonURL  Lookup = "person_url"  // person by network profile
	LookupEmail      Lookup = "email"       // person by work email
)

// ObjectType is the task object type a lookup produces.
func (l Lookup) ObjectType() string {
	if l == LookupDomain || l == LookupCompanyURL {
		return ObjectCompany
	}
	return ObjectPerson
}

// Cost is the credit cost of a lookup.
func (l Lookup) Cost() int64 {
	if l == LookupEmail {
		return 3
	}
	return 1
}

// Enrichment statuses of a result.
const (
	StatusEnriched = "enriched"
	StatusPending  = "pending"
)

// Company is the Company result of the API.
type Company struct {
	Name             string         `json:"name"`
	EnrichmentStatus string         `json:"enrichment_status"`
	Domain           *string        `json:"domain"`
	NetworkURL       *string        `json:"network_url"`
	NetworkID        *string        `json:"network_id"`
	NetworkFollowers *int64         `json:"network_followers"`
	EmployeeCount    *int64         `json:"employee_count"`
	EmployeeRange    *string        `json:"employee_range"`
	PrimaryIndustry  *string        `json:"primary_industry"`
	OrganizationType *string        `json:"organization_type"`
	YearFounded      *int           `json:"year_founded"`
	About            *string        `json:"about"`
	Slogan           *string        `json:"slogan"`
	Headquarters     map[string]any `json:"headquarters"`
	CreatedAt        *time.Time     `json:"created_at"`
	UpdatedAt        *time.Time     `json:"updated_at"`
	Redirect         *Redirect      `json:"redirect,omitempty"`
}

// Redirect says that the domain sent stands for another, canonical one.
type Redirect struct {
	From      string `json:"from"`
	To        string `json:"to"`
	Confirmed bool   `json:"confirmed"`
}

// Person is the Person result of the API.
type Person struct {
	NetworkURL         *string     `json:"network_url"`
	FullName           *string     `json:"full_name"`
	FirstName          *string     `json:"first_name"`
	LastName           *string     `json:"last_name"`
	Headline           *string     `json:"headline"`
	About              *string     `json:"about"`
	AvatarURL          *string     `json:"avatar_url"`
	City               *string     `json:"city"`
	CountryCode        *string     `json:"country_code"`
	NetworkFollowers   *int64      `json:"network_followers"`
	NetworkConnections *int64      `json:"network_connections"`
	Memorialized       *bool       `json:"memorialized"`
	EnrichmentStatus   string      `json:"enrichment_status"`
	LastEnrichedAt     *time.Time  `json:"last_enriched_at"`
	Positions          []Position  `json:"positions"`
	EmailMatch         *EmailMatch `json:"email_match,omitempty"`
}

// Position is one role in a person's employment history.
type Position struct {
	Title              *string          `json:"title"`
	CompanyName        *string          `json:"company_name"`
	Company            *PositionCompany `json:"company"`
	CompanyNetworkURL  *string          `json:"company_network_url"`
	EmploymentType     *string          `json:"employment_type"`
	Location           *string          `json:"location"`
	StartDate          *string          `json:"start_date"`
	StartDatePrecision *string          `json:"start_date_precision"`
	EndDate            *string          `json:"end_date"`
	EndDatePrecision   *string          `json:"end_date_precision"`
	IsCurrent          bool             `json:"is_current"`
}

// PositionCompany is the company record a position was matched to.
type PositionCompany struct {
	Name   *string `json:"name"`
	Domain *string `json:"domain"`
}

// EmailMatch tells how an email lookup found its person.
type EmailMatch struct {
	Method  string  `json:"method"`
	Email   string  `json:"email"`
	Pattern *string `json:"pattern"`
	// Source names the source that found the person for this lookup: the one whose
	// direct match answered, or whose staff search listed them. nil when what is held
	// answered (exact, inferred): the store does not say which source gave a record.
	Source *string `json:"source"`
	// MatchedBy names the vendor whose own match by the address answered (a direct
	// match, DirectMatcher): the answer rests on the vendor's record of the address,
	// the name only confirming it, so it stands where the address fits several current
	// employees by name alone. nil when the address was resolved by the name.
	MatchedBy *string `json:"matched_by"`
}

// Ptr returns a pointer to v, for the many optional fields of the results.
func Ptr[T any](v T) *T { return &v }
