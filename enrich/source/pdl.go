package source

import (
	"context"
	"errors"
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
	_ enrich.RecordMatcher = (*PDL)(nil)
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
	MiddleName          *string         `json:"middle_name"`
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
func (p *PDL) CompanyByDomain(ctx context.Context, tally *enrich.Tally, domain string) (*enrich.Company, error) {
	c, err := p.companyEnrich(ctx, tally, url.Values{"website": {domain}}, domain)
	if err != nil {
		return nil, err
	}
	domainRedirect(c, domain)
	return c, nil
}

// CompanyByURL enriches by the network page: GET /v5/company/enrich?profile=.
func (p *PDL) CompanyByURL(ctx context.Context, tally *enrich.Tally, networkURL string) (*enrich.Company, error) {
	c, err := p.companyEnrich(ctx, tally, url.Values{"profile": {networkURL}}, networkURL)
	if err != nil {
		return nil, err
	}
	if c.NetworkURL == nil {
		c.NetworkURL = enrich.Ptr(networkURL)
	}
	return c, nil
}

func (p *PDL) companyEnrich(ctx context.Context, tally *enrich.Tally, q url.Values, asked string) (*enrich.Company, error) {
	var c pdlCompany
	if err := p.api.get(ctx, tally, "/v5/company/enrich", q, pdlMatchCredits, &c); err != nil {
		return nil, err
	}
	charge(tally, pdlMatchCredits)
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
func (p *PDL) PersonByURL(ctx context.Context, tally *enrich.Tally, networkURL string) (*enrich.Person, error) {
	out, err := p.personEnrich(ctx, tally, url.Values{"profile": {networkURL}})
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
func (p *PDL) PersonByEmail(ctx context.Context, tally *enrich.Tally, address string) (*enrich.Person, error) {
	return p.personEnrich(ctx, tally, url.Values{"email": {address}})
}

// MatchesAddressOnRecord: PDL's person enrich by email matches the address among the
// emails its records hold (its reference: email, an email the person has used), so
// a confirmed answer is the person it has the address on record for (enrich.RecordMatcher).
func (p *PDL) MatchesAddressOnRecord() {}

// Prices: PDL bills one credit a person or company matched, nothing for a 404, and
// its search one credit a record returned.
func (p *PDL) Prices() enrich.Prices {
	return enrich.Prices{EmailMatch: pdlCreditsPerMatch, StaffSearch: pdlCreditsPerRecord}
}

const (
	pdlCreditsPerMatch  = 1
	pdlCreditsPerRecord = 1
)

func (p *PDL) personEnrich(ctx context.Context, tally *enrich.Tally, q url.Values) (*enrich.Person, error) {
	var r struct {
		Data *pdlPerson `json:"data"`
	}
	if err := p.api.get(ctx, tally, "/v5/person/enrich", q, pdlMatchCredits, &r); err != nil {
		return nil, err
	}
	charge(tally, pdlMatchCredits)
	if r.Data == nil {
		return nil, fmt.Errorf("pdl: no person record matched: %w", enrich.ErrNotFound)
	}
	return p.person(r.Data), nil
}

// person maps PDL's person record, as person enrich and person search return it.
func (p *PDL) person(d *pdlPerson) *enrich.Person {
	out := &enrich.Person{
		NetworkURL: p.norm.personURLOf(d.LinkedinURL),
		FullName:   pdlFullName(d.FullName, d.FirstName, d.MiddleName, d.LastName),
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
	return out
}

// pdlFullName is the person's whole name: PDL's full_name is its first and last names
// alone (its schema says so), and a middle name it keeps apart (middle_name: the
// second given name of a Kim Ly Trần, a Sean Fong Thorne's Fong) is put back between
// them, where a name's readings find it (enrich.NamesOf).
func pdlFullName(full, first, middle, last *string) *string {
	m := text(middle)
	f, l := text(first), text(last)
	if m == nil || f == nil || l == nil {
		return text(full)
	}
	whole := *f + " " + *m + " " + *l
	if full := text(full); full != nil && strings.Contains(" "+*full+" ", " "+*m+" ") {
		return full // the middle name is in it already
	}
	return &whole
}

// SearchStaff runs POST /v5/person/search for one page: SearchStaffPage from the start.
func (p *PDL) SearchStaff(ctx context.Context, tally *enrich.Tally, q enrich.StaffQuery) ([]enrich.StaffMember, error) {
	members, _, err := p.SearchStaffPage(ctx, tally, q, "")
	return members, err
}

// SearchStaffPage runs POST /v5/person/search: people whose current employer is the
// company (by website, else by its network page) and whom the address may stand for,
// in one query within PDL's published limits (at most 100 elements an array, 20
// wildcards a query):
//   - their first, middle or last name is one of the names, or one of the sides of a
//     split of the local part (q.Splits: annalopez asks anna and lopez among the
//     others), so a joined address is searched for without a list of given names;
//   - their last name holds one the address spells (pdlSurnamePattern): lee lists
//     Berners-Lee, bernerslee lists it too, since PDL's names are whole keywords and a
//     nickname stands for a first name, not a part of a surname;
//   - their full name has the shape of a reading of the local part written with
//     diacritics (pdlShapes): PDL keeps a name's diacritics and searches its data as
//     the query writes it, so josé núñez is no term "jose" or "nunez", and both forms
//     are asked for, the plain one as terms and this one as a pattern.
//
// after is the scroll_token a previous page ended with; PDL bills per record
// returned, and a page goes on from there instead of asking for the same records
// again. What does not fit in the query is not asked for: the hits come with
// enrich.ErrSearchIncomplete, so nobody held is taken for the only fit, and no
// plain-named person for the only one where a namesake written with diacritics may
// have gone unlisted.
func (p *PDL) SearchStaffPage(ctx context.Context, tally *enrich.Tally, q enrich.StaffQuery, after string) ([]enrich.StaffMember, string, error) {
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
	names, complete := pdlNamesQuery(q)
	if names == nil {
		return nil, "", nil
	}
	q.Limit = min(max(q.Limit, 1), enrich.StaffSearchMax)
	body := map[string]any{
		"query": map[string]any{"bool": map[string]any{"must": []any{
			employer,
			names,
		}}},
		"size": q.Limit,
	}
	if after != "" {
		body["scroll_token"] = after
	}
	var r struct {
		Data        []pdlPerson `json:"data"`
		ScrollToken *string     `json:"scroll_token"`
		Total       int         `json:"total"` // the records the query matches, all pages
	}
	// A credit a record returned: at most size.
	err := p.api.post(ctx, tally, "/v5/person/search", body, int64(q.Limit)*pdlMatchCredits, &r)
	if isNotFound(err) { // PDL answers 404 when no record matches
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	charge(tally, int64(len(r.Data))*pdlMatchCredits)
	var next string
	if r.ScrollToken != nil && len(r.Data) >= q.Limit {
		next = *r.ScrollToken
	}
	var out []enrich.StaffMember
	for i := range r.Data {
		d := &r.Data[i]
		u := p.norm.personURLOf(d.LinkedinURL)
		if u == nil {
			continue
		}
		// The hit is the record person enrich returns, paid for once: it is read as the
		// profile (its given names and surname as PDL keeps them apart, its middle name
		// among the given names), and is the profile when the lookup retrieves it.
		m := enrich.StaffMember{NetworkURL: *u, Profile: p.person(d)}
		if full := m.Profile.FullName; full != nil {
			m.FullName = *full
		}
		if f, l := text(d.FirstName), text(d.LastName); f != nil && l != nil {
			m.First, m.Last = *f, *l
		}
		out = append(out, m)
		if len(out) == q.Limit {
			break
		}
	}
	var errs []error
	if !complete {
		errs = append(errs, fmt.Errorf("pdl: %d names do not fit in one query: %w", len(q.Names), enrich.ErrSearchIncomplete))
	}
	if after == "" && r.Total >= enrich.StaffSearchMax {
		// The rest of a whole page would be billed record by record and still not
		// show everyone: it is not asked for.
		errs = append(errs, fmt.Errorf("pdl: %d records match: %w", r.Total, enrich.ErrSearchBeyondPage))
	}
	return out, next, errors.Join(errs...)
}

// pdlNamesQuery is the part of the staff search that asks for the names: nil when
// there is none to ask for; complete says every reading of the local part is in it.
func pdlNamesQuery(q enrich.StaffQuery) (map[string]any, bool) {
	var names []string
	seen := map[string]bool{}
	addName := func(n string) {
		if n = strings.ToLower(strings.TrimSpace(n)); n != "" && !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	for _, n := range q.Names {
		addName(n)
	}
	if len(names) == 0 {
		return nil, false
	}
	for _, s := range q.Splits {
		addName(s[0])
		addName(s[1])
	}
	complete := len(names) <= pdlMaxTerms
	names = names[:min(len(names), pdlMaxTerms)]
	should := []any{
		map[string]any{"terms": map[string]any{"first_name": names}},
		map[string]any{"terms": map[string]any{"middle_name": names}},
		map[string]any{"terms": map[string]any{"last_name": names}},
	}
	clauses, fit := pdlNameClauses(q.Local)
	complete = complete && fit
	should = append(should, clauses...)
	return map[string]any{"bool": map[string]any{"should": should}}, complete
}

// pdlNameClauses are the wildcard clauses that list, with diacritics and all, the
// people the local part may be written for, within PDL's 20 wildcards a query; fit
// says every reading is in them. They are pdlShapes, on the full name, and the
// readings whose first name, or its initial, may be a person's second given name
// (which PDL keeps in middle_name, or after a hyphen in first_name: Citlali Xóchitl,
// Héloïse-Clémence), by pdlOtherGiven.
func pdlNameClauses(local string) (clauses []any, fit bool) {
	var given []any
	used := 0
	for _, o := range pdlOtherGiven(local) {
		// A second given name known only by its first letter is asked by PDL's
		// middle_initial, every form of the letter a term: no wildcard, and none that
		// stands for every letter a diacritic may sit on.
		middle := map[string]any{"wildcard": map[string]any{"middle_name": o.middle}}
		if o.initial != 0 {
			var forms []string
			for _, r := range pdlInitials(o.initial) {
				forms = append(forms, string(r))
			}
			middle = map[string]any{"terms": map[string]any{"middle_initial": forms}}
		} else {
			used++
		}
		clause := map[string]any{"bool": map[string]any{"should": []any{
			middle,
			map[string]any{"wildcard": map[string]any{"first_name": "*-" + strings.TrimPrefix(o.middle, "*")}},
		}}}
		used++
		switch {
		case o.last != "":
			used++
			clause = map[string]any{"bool": map[string]any{"must": []any{clause,
				map[string]any{"wildcard": map[string]any{"last_name": o.last}}}}}
		case o.surnameInitial != 0:
			// The surname is written first: it begins with that letter in one of its
			// forms (PDL's last_initial), or is a word after the first of a surname of
			// several (a space or a hyphen before it); or the second given name follows
			// a first one in the address (Thái Minh Nguyễn's thaiminhnguyen), so it
			// begins with one of the address's letters (middle_initial).
			var forms []string
			for _, r := range pdlInitials(o.surnameInitial) {
				forms = append(forms, string(r))
			}
			word := pdlSkeleton(string(o.surnameInitial)) + "*"
			used += 2
			surname := []any{
				map[string]any{"terms": map[string]any{"last_initial": forms}},
				map[string]any{"wildcard": map[string]any{"last_name": "* " + word}},
				map[string]any{"wildcard": map[string]any{"last_name": "*-" + word}},
			}
			var letters []string
			seen := map[rune]bool{}
			for _, r := range o.rest {
				for _, f := range pdlInitials(r) {
					if !seen[f] {
						seen[f] = true
						letters = append(letters, string(f))
					}
				}
			}
			if len(letters) > pdlMaxTerms {
				letters = letters[:0] // more than one array holds: any middle name
				surname = append(surname, map[string]any{"wildcard": map[string]any{"middle_name": "*"}})
				used++
			}
			if len(letters) > 0 {
				surname = append(surname, map[string]any{"terms": map[string]any{"middle_initial": letters}})
			}
			clause = map[string]any{"bool": map[string]any{"must": []any{clause, map[string]any{"bool": map[string]any{"should": surname}}}}}
		}
		given = append(given, clause)
	}
	shapes, fit := pdlShapes(local, pdlMaxWildcards-used)
	for _, shape := range shapes {
		clauses = append(clauses, map[string]any{"wildcard": map[string]any{"full_name": shape}})
	}
	return append(clauses, given...), fit
}

// pdlGiven is a reading of a local part as a second given name, as a wildcard of
// middle_name, with the surname it goes with, a wildcard of last_name ("" for any).
// initial, when not 0, says the second given name is known by its first letter alone
// (middle is then that letter's skeleton and a *); surnameInitial, when not 0 and last
// is "", is the letter the address begins with, the surname written first.
type pdlGiven struct {
	middle, last            string
	initial, surnameInitial rune
	rest                    string // with surnameInitial, the address after its first letter
}

// pdlOtherGiven are the readings of the local part as a second given name (or its
// initial) and a surname. A local part with separators gives its first and last
// pieces in either order, an initial standing for a given name that begins with it
// (a.saez: a middle name beginning with a, or á, and a surname holding s???); a
// joined one gives a second given name that begins with its first letter (a name or
// an initial written first: firstlast, flast, firstl) and one holding its last letter
// (written last: lastfirst, lastf), whatever the surname.
func pdlOtherGiven(local string) []pdlGiven {
	if len(local) > enrich.MaxLocalPart {
		return nil
	}
	pieces := strings.FieldsFunc(enrich.CleanLocalPart(local), func(r rune) bool { return r == '.' || r == '_' || r == '-' })
	given := func(s, last string) pdlGiven {
		if r, _ := utf8.DecodeRuneInString(s); utf8.RuneCountInString(s) == 1 {
			return pdlGiven{middle: pdlSkeleton(s) + "*", last: last, initial: r}
		}
		return pdlGiven{middle: "*" + pdlSkeleton(s) + "*", last: last}
	}
	var out []pdlGiven
	switch {
	case len(pieces) >= 2:
		first, last := pieces[0], pieces[len(pieces)-1]
		if utf8.RuneCountInString(last) > 1 {
			out = append(out, given(first, "*"+pdlSkeleton(last)+"*")) // first.last, f.last
		}
		if utf8.RuneCountInString(first) > 1 {
			if utf8.RuneCountInString(last) == 1 {
				out = append(out, given(first, "*"+pdlSkeleton(last)+"*")) // first.l
			} else {
				out = append(out, given(last, "*"+pdlSkeleton(first)+"*")) // last.first
			}
		}
	case len(pieces) == 1:
		w := []rune(pieces[0])
		if len(w) < 3 {
			break
		}
		out = append(out, given(string(w[:1]), ""))                                                                                   // written first
		out = append(out, pdlGiven{middle: "*" + pdlSkeleton(string(w[len(w)-1:])) + "*", surnameInitial: w[0], rest: string(w[1:])}) // written last
	}
	return out
}

// pdlShapes are the full names (the first name, a space and the last name, as PDL's
// full_name is) the local part may be written from, diacritics and all, at most max
// of them; fit says every reading is in one. In a shape each letter a diacritic may
// sit on is PDL's one-character wildcard, the others are kept, the first name may go
// on (Jean-Luc for jean), and other words (a first surname, a second) may come before
// and after the surname's. One shape a reading: a local part with separators is its
// first and last pieces, in either order unless one is an initial (jose.nunez:
// j???* *?????*, which lists josé núñez, jose nunez and josé garcía núñez, and
// ?????* *j???*); a joined one is its initial and the rest (flast), the rest and its
// last letter (firstl, lastf), then every split into two names of two letters or
// more, in either order. An initial stands for a first name of any length. A shape is
// also what lists a surname written joined (k.bernerslee: k* *b?????????*, ken
// berners-lee) or by one of its parts (ken.lee).
//
// Where the splits of a joined local part are more than fit, neighbouring ones share a
// shape, a little looser: annalopez's anna|lopez and annal|opez are ????* *????* and
// ?????* *???*, and together ????* *???*. Where every shape fits with room to spare,
// the first letter, the first name's, is written out with each diacritic it may carry,
// one shape each (l????* *???????* and ł????* *???????*): a shape that begins with a
// wildcard lists every name of its length.
func pdlShapes(local string, max int) (shapes []string, fit bool) {
	if len(local) > enrich.MaxLocalPart || max < 1 {
		return nil, max >= 1
	}
	clean := enrich.CleanLocalPart(local)
	pieces := strings.FieldsFunc(clean, func(r rune) bool { return r == '.' || r == '_' || r == '-' })
	// A reading is the full name's shape after its first letter: the first name's
	// rest, then the surname's.
	type reading struct {
		first rune
		rest  string
	}
	var readings []reading
	seen := map[reading]bool{}
	add := func(firstName, surname string) {
		r, size := utf8.DecodeRuneInString(firstName)
		rd := reading{first: r, rest: firstName[size:] + "* *" + surname + "*"}
		rd.rest = strings.ReplaceAll(rd.rest, "**", "*")
		if !seen[rd] {
			seen[rd] = true
			readings = append(readings, rd)
		}
	}
	switch {
	case len(pieces) >= 2:
		first, last := pieces[0], pieces[len(pieces)-1]
		add(pdlSkeletonAfterFirst(first), pdlSkeleton(last)) // first.last, f.last, first.l
		if utf8.RuneCountInString(first) > 1 && utf8.RuneCountInString(last) > 1 {
			add(pdlSkeletonAfterFirst(last), pdlSkeleton(first)) // last.first
		}
	case len(pieces) == 1:
		w := []rune(pieces[0])
		n := len(w)
		if n < 3 {
			break
		}
		sk := func(from, to int) string { return pdlSkeleton(string(w[from:to])) }
		add(string(w[:1]), sk(1, n))                            // flast
		add(pdlSkeletonAfterFirst(string(w[:n-1])), sk(n-1, n)) // firstl
		add(string(w[n-1:]), sk(0, n-1))                        // lastf
		// The splits, both orders, in as many shapes as leave room for the three above:
		// a run of neighbouring splits k..m shares one.
		splits := n - 3
		groups := min(splits, (max-len(readings))/2)
		if groups < 1 {
			return nil, false
		}
		for g := range groups {
			k, m := 2+g*splits/groups, 2+(g+1)*splits/groups-1
			// firstlast: a first name that begins with w[:k], a surname holding w[m:].
			add(pdlSkeletonAfterFirst(string(w[:k])), sk(m, n))
			// lastfirst: a first name that is w[k:] or a tail of it (one of w[m:] at
			// least), then a surname that begins with w[:k].
			if m > k {
				rd := reading{first: '*', rest: sk(m, n) + " *" + sk(0, k) + "*"}
				if !seen[rd] {
					seen[rd] = true
					readings = append(readings, rd)
				}
			} else {
				add(pdlSkeletonAfterFirst(string(w[k:])), sk(0, k))
			}
		}
	}
	narrow := 0
	for _, rd := range readings {
		narrow += len(pdlInitials(rd.first))
	}
	for _, rd := range readings {
		if len(shapes) == max {
			return shapes, false
		}
		if narrow <= max {
			for _, v := range pdlInitials(rd.first) {
				shapes = append(shapes, string(v)+rd.rest)
			}
			continue
		}
		shapes = append(shapes, pdlSkeleton(string(rd.first))+rd.rest)
	}
	return shapes, true
}

// pdlSkeletonAfterFirst is pdlSkeleton of a name but its first letter, which is kept
// for pdlShapes to write out with each diacritic it may carry.
func pdlSkeletonAfterFirst(name string) string {
	r, size := utf8.DecodeRuneInString(name)
	return string(r) + pdlSkeleton(name[size:])
}

// pdlAccented are the letters a folded letter stands for in Latin-script names, itself
// first: what a name PDL keeps with its diacritics may begin with where an address
// writes the plain letter.
var pdlAccented = map[rune]string{
	'a': "aáàâäãåāąă", 'c': "cçčć", 'd': "dđď", 'e': "eéèêëēėęě", 'g': "gğģ", 'i': "iíìîïīįı",
	'l': "lłľĺļ", 'n': "nñńňņ", 'o': "oóòôöõøōő", 'r': "rřŕ", 's': "sšśşș", 't': "tťțţþ",
	'u': "uúùûüūůűư", 'y': "yýÿ", 'z': "zžżź",
}

// pdlInitials are the letters a name written with r may begin with.
func pdlInitials(r rune) []rune {
	if r == '*' {
		return []rune{r}
	}
	if v, ok := pdlAccented[r]; ok {
		return []rune(v)
	}
	return []rune{r}
}

// pdlSkeleton writes a folded name for PDL's wildcard: each letter a diacritic may sit
// on is `?`, one character, as an accented letter is one in PDL's data; a letter none
// sits on is kept, after a `*` but at the start, since the name may be two words there
// (medeirossiqueira: m?????????*q?????, medeiros siqueira).
func pdlSkeleton(name string) string {
	var b strings.Builder
	for i, r := range name {
		switch _, accented := pdlAccented[r]; {
		case accented:
			b.WriteByte('?')
		case i > 0 && r != '*':
			b.WriteByte('*')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// pdlMaxTerms is the most elements PDL accepts in one array of a query: it rejects a
// query with a longer terms array.
const pdlMaxTerms = 100

// pdlMaxWildcards is the most wildcard clauses one query may hold (PDL's Person Search
// FAQ: a hard limit of 20). Shapes past it are left unasked, the search saying so.
const pdlMaxWildcards = 20
