package source

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"enrichd/enrich"
)

// PDLKeyEnv is where the People Data Labs API key is read from.
const PDLKeyEnv = "PDL_API_KEY"

// pdlMatchCredits is People Data Labs' published price of a company or person matched,
// and of each record a search returns, in its credits; a 404 costs nothing.
const pdlMatchCredits = 1

// PDL is the `pdl` source: the People Data Labs API, whose records carry the
// network's URLs. It answers companies by website or page, people by profile or by
// work address, and searches staff by the current employer's website and names.
//
// Upstream cost: one credit per company or person matched (a 404 is free); a staff
// search is billed per record returned, so it asks for no more than the caller's limit.
type PDL struct {
	api  *vendorAPI
	norm normalizer
}

var (
	_ enrich.Source        = (*PDL)(nil)
	_ enrich.StaffSearcher = (*PDL)(nil)
	_ enrich.Metered       = (*PDL)(nil)
	_ enrich.StaffPager    = (*PDL)(nil)
	_ enrich.EmailMatcher  = (*PDL)(nil)
	_ enrich.Priced        = (*PDL)(nil)
)

// NewPDL builds the adapter. Defaults: https://api.peopledatalabs.com, 1 request a
// second with bursts of 5, 4 in flight, 30 s a request.
func NewPDL(cfg VendorConfig) (*PDL, error) {
	api, err := newVendorAPI("pdl", PDLKeyEnv, cfg, PDLDefaults, func(r *http.Request, key string) { r.Header.Set("X-Api-Key", key) })
	if err != nil {
		return nil, err
	}
	return &PDL{api: api, norm: newNormalizer(cfg.NetworkHost)}, nil
}

// KeyEnv names where the installation's key is read from (enrich.Keyed).
func (p *PDL) KeyEnv() string { return PDLKeyEnv }

func (p *PDL) Name() string              { return "pdl" }
func (p *PDL) Stats() enrich.SourceStats { return p.api.meter.stats(p.Name()) }

type pdlLocation struct {
	Name          *string `json:"name"`
	Locality      *string `json:"locality"`
	Region        *string `json:"region"`
	Country       *string `json:"country"`
	PostalCode    *string `json:"postal_code"`
	StreetAddress *string `json:"street_address"`
}

type pdlCompany struct {
	Name                  *string      `json:"name"`
	DisplayName           *string      `json:"display_name"`
	Website               *string      `json:"website"`
	LinkedinURL           *string      `json:"linkedin_url"`
	LinkedinID            *string      `json:"linkedin_id"`
	LinkedinFollowerCount *int64       `json:"linkedin_follower_count"`
	Size                  *string      `json:"size"`
	EmployeeCount         *int64       `json:"employee_count"`
	Industry              *string      `json:"industry"`
	Founded               *int         `json:"founded"`
	Type                  *string      `json:"type"`
	Headline              *string      `json:"headline"`
	Summary               *string      `json:"summary"`
	Location              *pdlLocation `json:"location"`
}

type pdlExperience struct {
	Company *struct {
		Name        *string `json:"name"`
		LinkedinURL *string `json:"linkedin_url"`
	} `json:"company"`
	Title *struct {
		Name *string `json:"name"`
	} `json:"title"`
	LocationNames []string `json:"location_names"`
	StartDate     *string  `json:"start_date"`
	EndDate       *string  `json:"end_date"`
}

type pdlPerson struct {
	FullName            *string         `json:"full_name"`
	FirstName           *string         `json:"first_name"`
	LastName            *string         `json:"last_name"`
	LinkedinURL         *string         `json:"linkedin_url"`
	Headline            *string         `json:"headline"`
	Summary             *string         `json:"summary"`
	LocationLocality    *string         `json:"location_locality"`
	LinkedinConnections *int64          `json:"linkedin_connections"`
	Experience          []pdlExperience `json:"experience"`
}

// CompanyByDomain enriches by website: GET /v5/company/enrich?website=. A record whose
// website is another domain gives an unconfirmed redirect to it.
func (p *PDL) CompanyByDomain(ctx context.Context, domain string) (*enrich.Company, error) {
	c, err := p.companyEnrich(ctx, url.Values{"website": {domain}}, domain)
	if err != nil {
		return nil, err
	}
	domainRedirect(c, domain)
	return c, nil
}

// CompanyByURL enriches by the network page: GET /v5/company/enrich?profile=.
func (p *PDL) CompanyByURL(ctx context.Context, networkURL string) (*enrich.Company, error) {
	c, err := p.companyEnrich(ctx, url.Values{"profile": {networkURL}}, networkURL)
	if err != nil {
		return nil, err
	}
	if c.NetworkURL == nil {
		c.NetworkURL = enrich.Ptr(networkURL)
	}
	return c, nil
}

func (p *PDL) companyEnrich(ctx context.Context, q url.Values, asked string) (*enrich.Company, error) {
	var c pdlCompany
	if err := p.api.get(ctx, "/v5/company/enrich", q, pdlMatchCredits, &c); err != nil {
		return nil, err
	}
	charge(ctx, pdlMatchCredits)
	name := orDefault(text(c.DisplayName), text(c.Name))
	if name == nil {
		return nil, fmt.Errorf("pdl: the record for %s has no name: %w", asked, enrich.ErrNotFound)
	}
	out := &enrich.Company{
		Name:             *name,
		EnrichmentStatus: enrich.StatusEnriched,
		Domain:           p.norm.domainOf(c.Website),
		NetworkURL:       p.norm.companyURLOf(c.LinkedinURL),
		NetworkID:        text(c.LinkedinID),
		NetworkFollowers: c.LinkedinFollowerCount,
		EmployeeCount:    c.EmployeeCount,
		EmployeeRange:    text(c.Size),
		PrimaryIndustry:  text(c.Industry),
		OrganizationType: organizationType(c.Type),
		YearFounded:      c.Founded,
		About:            text(c.Summary),
		Slogan:           text(c.Headline),
	}
	if l := c.Location; l != nil {
		out.Headquarters = headquarters(map[string]*string{
			"city": l.Locality, "region": l.Region, "country": l.Country, "postal_code": l.PostalCode, "street_address": l.StreetAddress,
		})
	}
	return out, nil
}

// PersonByURL enriches by profile: GET /v5/person/enrich?profile=.
func (p *PDL) PersonByURL(ctx context.Context, networkURL string) (*enrich.Person, error) {
	out, err := p.personEnrich(ctx, url.Values{"profile": {networkURL}})
	if err != nil {
		return nil, err
	}
	if out.NetworkURL == nil {
		out.NetworkURL = enrich.Ptr(networkURL)
	}
	return out, nil
}

// PersonByEmail enriches by a work address: GET /v5/person/enrich?email=, which PDL
// answers with the record it matches to the address above its default likelihood
// (2 of 10), or 404. That is PDL's best match, not a proof: an email lookup confirms
// the person's current position and name before it answers with them.
func (p *PDL) PersonByEmail(ctx context.Context, address string) (*enrich.Person, error) {
	return p.personEnrich(ctx, url.Values{"email": {address}})
}

// Prices: PDL bills one credit a person or company matched, nothing for a 404, and
// its search one credit a record returned.
func (p *PDL) Prices() enrich.Prices {
	return enrich.Prices{EmailMatch: pdlCreditsPerMatch, StaffSearch: pdlCreditsPerRecord}
}

const (
	pdlCreditsPerMatch  = 1
	pdlCreditsPerRecord = 1
)

func (p *PDL) personEnrich(ctx context.Context, q url.Values) (*enrich.Person, error) {
	var r struct {
		Data *pdlPerson `json:"data"`
	}
	if err := p.api.get(ctx, "/v5/person/enrich", q, pdlMatchCredits, &r); err != nil {
		return nil, err
	}
	charge(ctx, pdlMatchCredits)
	if r.Data == nil {
		return nil, fmt.Errorf("pdl: no person record matched: %w", enrich.ErrNotFound)
	}
	d := r.Data
	out := &enrich.Person{
		NetworkURL: p.norm.personURLOf(d.LinkedinURL),
		FullName:   text(d.FullName),
		FirstName:  text(d.FirstName),
		LastName:   text(d.LastName),
		Headline:   text(d.Headline),
		About:      text(d.Summary),
		City:       text(d.LocationLocality),
		// PDL names countries in words ("united states"), not codes: left unknown.
		NetworkConnections: d.LinkedinConnections,
		EnrichmentStatus:   enrich.StatusEnriched,
		Positions:          []enrich.Position{},
	}
	for _, x := range d.Experience {
		pos := enrich.Position{IsCurrent: x.EndDate == nil}
		if x.Title != nil {
			pos.Title = text(x.Title.Name)
		}
		if x.Company != nil {
			pos.CompanyName = text(x.Company.Name)
			pos.CompanyNetworkURL = p.norm.companyURLOf(x.Company.LinkedinURL)
		}
		if len(x.LocationNames) > 0 {
			pos.Location = text(&x.LocationNames[0])
		}
		if x.StartDate != nil {
			pos.StartDate, pos.StartDatePrecision = isoPartialDate(*x.StartDate)
		}
		if x.EndDate != nil {
			pos.EndDate, pos.EndDatePrecision = isoPartialDate(*x.EndDate)
		}
		out.Positions = append(out.Positions, pos)
	}
	out.Positions = currentFirst(out.Positions)
	return out, nil
}

// SearchStaff runs POST /v5/person/search for one page: SearchStaffPage from the start.
func (p *PDL) SearchStaff(ctx context.Context, q enrich.StaffQuery) ([]enrich.StaffMember, error) {
	members, _, err := p.SearchStaffPage(ctx, q, "")
	return members, err
}

// SearchStaffPage runs POST /v5/person/search: people whose current employer is the
// company (by website, else by its network page) and whose first or last name is one
// of the names, or whose last name holds one the address spells (pdlSurnamePattern),
// so that lee lists Berners-Lee and bernerslee lists it too: PDL's names are whole
// keywords, and a nickname stands for a first name, not a part of a surname. after
// is the scroll_token a previous page ended with; PDL bills per record returned, and
// a page goes on from there instead of asking for the same records again. Names past
// what one query may hold (100 terms, pdlMaxWildcards patterns) are not asked for: the
// hits come with enrich.ErrSearchIncomplete, so nobody held is taken for the only fit.
func (p *PDL) SearchStaffPage(ctx context.Context, q enrich.StaffQuery, after string) ([]enrich.StaffMember, string, error) {
	if q.Company == nil || len(q.Names) == 0 {
		return nil, "", nil
	}
	var employer map[string]any
	switch {
	case q.Company.Domain != nil:
		employer = map[string]any{"term": map[string]any{"job_company_website": *q.Company.Domain}}
	case q.Company.NetworkURL != nil:
		// PDL keeps the network's URLs without scheme or www.
		page := strings.TrimPrefix(strings.TrimPrefix(*q.Company.NetworkURL, "https://"), "www.")
		employer = map[string]any{"term": map[string]any{"job_company_linkedin_url": page}}
	default:
		return nil, "", nil
	}
	names := make([]string, 0, len(q.Names))
	for _, n := range q.Names {
		if n = strings.ToLower(strings.TrimSpace(n)); n != "" {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil, "", nil
	}
	complete := len(names) <= pdlMaxTerms
	names = names[:min(len(names), pdlMaxTerms)]
	should := []any{
		map[string]any{"terms": map[string]any{"first_name": names}},
		map[string]any{"terms": map[string]any{"last_name": names}},
	}
	parts := names
	if len(q.Spelled) > 0 {
		parts = nil
		for _, n := range q.Spelled {
			if n = strings.ToLower(strings.TrimSpace(n)); n != "" {
				parts = append(parts, n)
			}
		}
	}
	wildcards := 0
	for _, n := range parts {
		if strings.ContainsAny(n, `*?\`) {
			continue // no name: nothing a pattern should hold
		}
		if wildcards == pdlMaxWildcards {
			complete = false
			break
		}
		wildcards++
		should = append(should, map[string]any{"wildcard": map[string]any{"last_name": pdlSurnamePattern(n)}})
	}
	q.Limit = min(max(q.Limit, 1), enrich.StaffSearchMax)
	body := map[string]any{
		"query": map[string]any{"bool": map[string]any{"must": []any{
			employer,
			map[string]any{"bool": map[string]any{"should": should}},
		}}},
		"size": q.Limit,
	}
	if after != "" {
		body["scroll_token"] = after
	}
	var r struct {
		Data []struct {
			FullName    *string `json:"full_name"`
			LinkedinURL *string `json:"linkedin_url"`
		} `json:"data"`
		ScrollToken *string `json:"scroll_token"`
	}
	// A credit a record returned: at most size.
	err := p.api.post(ctx, "/v5/person/search", body, int64(q.Limit)*pdlMatchCredits, &r)
	if isNotFound(err) { // PDL answers 404 when no record matches
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	charge(ctx, int64(len(r.Data))*pdlMatchCredits)
	var next string
	if r.ScrollToken != nil && len(r.Data) >= q.Limit {
		next = *r.ScrollToken
	}
	var out []enrich.StaffMember
	for _, d := range r.Data {
		u := p.norm.personURLOf(d.LinkedinURL)
		if u == nil {
			continue
		}
		m := enrich.StaffMember{NetworkURL: *u}
		if d.FullName != nil {
			m.FullName = strings.TrimSpace(*d.FullName)
		}
		out = append(out, m)
		if len(out) == q.Limit {
			break
		}
	}
	if !complete {
		return out, next, fmt.Errorf("pdl: %d names do not fit in one query: %w", len(q.Names), enrich.ErrSearchIncomplete)
	}
	return out, next, nil
}

// pdlSurnamePattern is the wildcard that finds the last names a name form may be
// written for in an address: the surnames that contain it (lee: berners-lee, van der
// lee) and, for a form of five letters or more, those that spell it with separators
// between its letters (bernerslee: berners-lee, obrien: o'brien, mccarthy: mc carthy).
// Short forms are kept whole: spread out, they would list, and bill, most surnames.
func pdlSurnamePattern(name string) string {
	letters := strings.Split(name, "")
	if utf8.RuneCountInString(name) < 5 {
		return "*" + name + "*"
	}
	return "*" + strings.Join(letters, "*") + "*"
}

// pdlMaxTerms is the most elements PDL accepts in one array of a query: it rejects a
// query with a longer terms array.
const pdlMaxTerms = 100

// pdlMaxWildcards is the most wildcard clauses one staff search sends. PDL limits the
// wildcards a query may hold, and each leading wildcard is a costly scan of its index;
// names past it are left unasked, and the search says so.
const pdlMaxWildcards = 10
