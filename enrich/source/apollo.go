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

// ApolloKeyEnv is where the Apollo API key is read from.
const ApolloKeyEnv = "APOLLO_API_KEY"

// apolloEnrichCredits is Apollo's published price of an organization or person
// enriched, in its credits; an answer that matched nothing costs nothing.
const apolloEnrichCredits = 1

// Apollo is the `apollo` source: the Apollo.io REST API. It answers companies by
// domain (organization enrichment) and people by profile (people enrichment, which
// Apollo calls a match); PersonByEmail matches a work address the same way, which
// makes it a direct match of email lookups (enrich.EmailMatcher).
//
// What Apollo's API does not offer, the adapter does not pretend to: organization
// enrichment takes a domain only, so a company asked for by its network page is a miss
// here; and its people search (POST /api/v1/mixed_people/api_search) shows a first name
// and an obfuscated last name but no name and no profile URL, so it cannot give email
// lookups the leads a staff search must (enrich.StaffSearcher is not implemented).
//
// Upstream cost, in Apollo credits: one per organization or person enriched; a match
// that finds nothing costs nothing. Personal emails and phone numbers, which cost
// more, are never asked for.
type Apollo struct {
	api  *vendorAPI
	norm normalizer
}

var (
	_ enrich.Source       = (*Apollo)(nil)
	_ enrich.Metered      = (*Apollo)(nil)
	_ enrich.EmailMatcher = (*Apollo)(nil)
	_ enrich.Priced       = (*Apollo)(nil)
)

// NewApollo builds the adapter. Defaults: https://api.apollo.io, 0.8 requests a second
// (48 a minute) with bursts of 5, 4 in flight, 30 s a request.
func NewApollo(cfg VendorConfig) (*Apollo, error) {
	api, err := newVendorAPI("apollo", ApolloKeyEnv, cfg, ApolloDefaults, func(r *http.Request, key string) {
		r.Header.Set("X-Api-Key", key)
		r.Header.Set("Cache-Control", "no-cache") // as Apollo's reference sends every call
	})
	if err != nil {
		return nil, err
	}
	api.quotaSpent = apolloQuotaSpent
	return &Apollo{api: api, norm: newNormalizer(cfg.NetworkHost)}, nil
}

// KeyEnv names where the installation's key is read from (enrich.Keyed).
func (a *Apollo) KeyEnv() string { return ApolloKeyEnv }

func (a *Apollo) Name() string              { return "apollo" }
func (a *Apollo) Stats() enrich.SourceStats { return a.api.meter.stats(a.Name()) }

// apolloQuotaSpent reads the usage headers Apollo sends with its answers: a 429 whose
// hourly or daily requests left are 0 will not pass before the window ends, which no
// task's lifetime outlasts, so it is not tried again. The minute's window is retried.
func apolloQuotaSpent(h http.Header) string {
	for _, w := range []struct{ left, limit, window string }{
		{"X-Daily-Requests-Left", "X-Rate-Limit-Daily", "daily"},
		{"X-Hourly-Requests-Left", "X-Rate-Limit-Hourly", "hourly"},
	} {
		left, err := strconv.Atoi(strings.TrimSpace(h.Get(w.left)))
		if err != nil || left > 0 {
			continue
		}
		limit := strings.TrimSpace(h.Get(w.limit))
		if _, err := strconv.Atoi(limit); err != nil {
			limit = "its"
		}
		return fmt.Sprintf("the key in %s has used up %s %s requests; calls to Apollo fail until the window ends", ApolloKeyEnv, limit, w.window)
	}
	return ""
}

type apolloOrganization struct {
	ID                    *string `json:"id"`
	Name                  *string `json:"name"`
	WebsiteURL            *string `json:"website_url"`
	PrimaryDomain         *string `json:"primary_domain"`
	LinkedinURL           *string `json:"linkedin_url"`
	LinkedinUID           *string `json:"linkedin_uid"`
	FoundedYear           *int    `json:"founded_year"`
	Industry              *string `json:"industry"`
	EstimatedNumEmployees *int64  `json:"estimated_num_employees"`
	ShortDescription      *string `json:"short_description"`
	StreetAddress         *string `json:"street_address"`
	City                  *string `json:"city"`
	State                 *string `json:"state"`
	PostalCode            *string `json:"postal_code"`
	Country               *string `json:"country"`
}

type apolloEmployment struct {
	OrganizationID   *string `json:"organization_id"`
	OrganizationName *string `json:"organization_name"`
	Title            *string `json:"title"`
	StartDate        *string `json:"start_date"`
	EndDate          *string `json:"end_date"`
	Current          *bool   `json:"current"`
}

type apolloPerson struct {
	ID                *string             `json:"id"`
	FirstName         *string             `json:"first_name"`
	LastName          *string             `json:"last_name"`
	Name              *string             `json:"name"`
	LinkedinURL       *string             `json:"linkedin_url"`
	Headline          *string             `json:"headline"`
	PhotoURL          *string             `json:"photo_url"`
	City              *string             `json:"city"`
	OrganizationID    *string             `json:"organization_id"`
	Organization      *apolloOrganization `json:"organization"`
	EmploymentHistory []apolloEmployment  `json:"employment_history"`
}

// CompanyByDomain enriches by domain: GET /api/v1/organizations/enrich?domain=. Apollo
// answers a domain it does not know with 200 and no organization, or 404. A record
// whose primary domain is another gives an unconfirmed redirect to it.
func (a *Apollo) CompanyByDomain(ctx context.Context, tally *enrich.Tally, domain string) (*enrich.Company, error) {
	var r struct {
		Organization *apolloOrganization `json:"organization"`
	}
	if err := a.api.get(ctx, tally, "/api/v1/organizations/enrich", url.Values{"domain": {domain}}, apolloEnrichCredits, &r); err != nil {
		return nil, err
	}
	o := r.Organization
	if o == nil || text(o.Name) == nil {
		return nil, fmt.Errorf("apollo: no organization for %s: %w", domain, enrich.ErrNotFound)
	}
	charge(tally, apolloEnrichCredits)
	c := &enrich.Company{
		Name:             *text(o.Name),
		EnrichmentStatus: enrich.StatusEnriched,
		Domain:           orDefault(a.norm.domainOf(o.PrimaryDomain), a.norm.domainOf(o.WebsiteURL)),
		NetworkURL:       a.norm.companyURLOf(o.LinkedinURL),
		NetworkID:        text(o.LinkedinUID),
		EmployeeCount:    o.EstimatedNumEmployees,
		PrimaryIndustry:  text(o.Industry),
		YearFounded:      o.FoundedYear,
		About:            text(o.ShortDescription),
		Headquarters: headquarters(map[string]*string{
			"city": o.City, "state": o.State, "country": o.Country, "postal_code": o.PostalCode, "street_address": o.StreetAddress,
		}),
	}
	domainRedirect(c, domain)
	return c, nil
}

// Supports: organizations are enriched by domain only; people by profile (and by
// email, in an email lookup).
func (a *Apollo) Supports(l enrich.Lookup) bool { return l != enrich.LookupCompanyURL }

// CompanyByURL is always a miss, and costs nothing: Apollo's organization enrichment
// takes a domain only.
func (a *Apollo) CompanyByURL(ctx context.Context, tally *enrich.Tally, networkURL string) (*enrich.Company, error) {
	return nil, fmt.Errorf("apollo: organizations are enriched by domain only: %w", enrich.ErrNotFound)
}

// PersonByURL matches by profile: POST /api/v1/people/match with linkedin_url.
func (a *Apollo) PersonByURL(ctx context.Context, tally *enrich.Tally, networkURL string) (*enrich.Person, error) {
	p, err := a.match(ctx, tally, "linkedin_url", networkURL)
	if err != nil {
		return nil, err
	}
	if p.NetworkURL == nil {
		p.NetworkURL = enrich.Ptr(networkURL)
	}
	return p, nil
}

// PersonByEmail matches a work address: POST /api/v1/people/match with email. Apollo
// answers with its closest match (a random one among equals, its documentation says),
// so the person is a candidate, not an answer: an email lookup confirms that they
// hold a current position at the company behind the address's domain and that the
// address fits their name before it answers with them.
func (a *Apollo) PersonByEmail(ctx context.Context, tally *enrich.Tally, address string) (*enrich.Person, error) {
	return a.match(ctx, tally, "email", address)
}

// Prices: a match costs one credit (nothing when it finds nobody); Apollo gives
// email lookups no staff search.
func (a *Apollo) Prices() enrich.Prices {
	return enrich.Prices{EmailMatch: apolloCreditsPerMatch}
}

const apolloCreditsPerMatch = 1

// match asks people enrichment for one person by one identifier, in the JSON body so
// that the address or profile stays out of URLs. Personal emails and phone numbers
// are not revealed: they cost credits of their own and the Person has no field for
// them.
func (a *Apollo) match(ctx context.Context, tally *enrich.Tally, field, value string) (*enrich.Person, error) {
	var r struct {
		Person *apolloPerson `json:"person"`
	}
	body := map[string]any{field: value, "reveal_personal_emails": false, "reveal_phone_number": false}
	if err := a.api.post(ctx, tally, "/api/v1/people/match", body, apolloEnrichCredits, &r); err != nil {
		return nil, err
	}
	d := r.Person
	if d == nil || (text(d.Name) == nil && text(d.FirstName) == nil && text(d.LastName) == nil) {
		// Apollo answers 200 with no person when nothing matched: no credit is spent.
		return nil, fmt.Errorf("apollo: no person matched by %s: %w", field, enrich.ErrNotFound)
	}
	charge(tally, apolloEnrichCredits)
	out := &enrich.Person{
		NetworkURL: a.norm.personURLOf(d.LinkedinURL),
		FullName:   text(d.Name),
		FirstName:  text(d.FirstName),
		LastName:   text(d.LastName),
		Headline:   text(d.Headline),
		AvatarURL:  text(d.PhotoURL),
		City:       text(d.City),
		// Apollo names countries in words ("United States"), not codes: left unknown.
		EnrichmentStatus: enrich.StatusEnriched,
		Positions:        []enrich.Position{},
	}
	// The current employer's page is on the person's organization; a role at that
	// organization (same id) carries it.
	var employerID string
	var employerPage *string
	if o := d.Organization; o != nil {
		employerPage = a.norm.companyURLOf(o.LinkedinURL)
		if id := text(o.ID); id != nil {
			employerID = *id
		}
	}
	if id := text(d.OrganizationID); employerID == "" && id != nil {
		employerID = *id
	}
	for _, x := range d.EmploymentHistory {
		current := x.EndDate == nil || text(x.EndDate) == nil
		if x.Current != nil {
			current = *x.Current && current
		}
		pos := enrich.Position{
			Title:       text(x.Title),
			CompanyName: text(x.OrganizationName),
			IsCurrent:   current,
		}
		if id := text(x.OrganizationID); id != nil && *id == employerID {
			pos.CompanyNetworkURL = employerPage
		}
		pos.StartDate, pos.StartDatePrecision = apolloDate(x.StartDate)
		if !current {
			pos.EndDate, pos.EndDatePrecision = apolloDate(x.EndDate)
		}
		out.Positions = append(out.Positions, pos)
	}
	out.Positions = currentFirst(out.Positions)
	return out, nil
}

// apolloDate reads Apollo's "YYYY-MM-DD". Apollo writes the 1st of the month for
// every date of a role, the network showing months only, so the day is not taken
// as known: the date keeps the month, with precision "month".
func apolloDate(s *string) (date, precision *string) {
	t := text(s)
	if t == nil {
		return nil, nil
	}
	parts := strings.Split(*t, "-")
	if len(parts) > 2 {
		parts = parts[:2]
	}
	return isoPartialDate(strings.Join(parts, "-"))
}
