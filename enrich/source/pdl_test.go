package source_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/matryer/is"

	"enrichd/enrich"
	"enrichd/enrich/source"
)

const pdlKey = "pdl-test-key-93be71"

func newPDL(t *testing.T, routes map[string][]reply) (*source.PDL, *fakeVendor, *bytes.Buffer) {
	t.Helper()
	f := newFakeVendor(t, routes)
	logs := &bytes.Buffer{}
	p, err := source.NewPDL(vendorConfig(f, pdlKey, logs))
	if err != nil {
		t.Fatal(err)
	}
	return p, f, logs
}

func TestPDLNeedsKey(t *testing.T) {
	is := is.New(t)
	_, err := source.NewPDL(source.VendorConfig{APIKey: "  "})
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), "PDL_API_KEY"))
}

func TestPDLCompanyByDomain(t *testing.T) {
	is := is.New(t)
	p, f, _ := newPDL(t, map[string][]reply{"/v5/company/enrich": {{status: 200, fixture: "pdl/company_full.json"}}})
	c, err := p.CompanyByDomain(context.Background(), nil, "acme.com")
	is.NoErr(err)
	want := &enrich.Company{
		Name:             "Acme Corporation",
		EnrichmentStatus: "enriched",
		Domain:           strp("acme.com"),
		NetworkURL:       strp("https://www.linkedin.com/company/acme"), // PDL's scheme-less URL, normalized
		NetworkID:        strp("1441"),
		NetworkFollowers: enrich.Ptr(int64(12034)),
		EmployeeCount:    enrich.Ptr(int64(318)),
		EmployeeRange:    strp("201-500"),
		PrimaryIndustry:  strp("machinery"),
		OrganizationType: strp("Privately Held"),
		YearFounded:      enrich.Ptr(1949),
		About:            strp("acme builds anvils and the rockets that carry them."),
		Slogan:           strp("everything for the road runner hunter"),
		Headquarters:     map[string]any{"city": "phoenix", "region": "arizona", "country": "united states", "postal_code": "85001", "street_address": "1 desert road"},
	}
	is.Equal(asJSON(t, c), asJSON(t, want)) // the domain matches: no redirect
	r := f.requests()[0]
	is.Equal(r.Header.Get("X-Api-Key"), pdlKey)
	is.Equal(r.URL.Query().Get("website"), "acme.com")
}

func TestPDLCompanySparseByURL(t *testing.T) {
	is := is.New(t)
	p, f, _ := newPDL(t, map[string][]reply{"/v5/company/enrich": {{status: 200, fixture: "pdl/company_sparse.json"}}})
	c, err := p.CompanyByURL(context.Background(), nil, "https://www.linkedin.com/company/tinyco")
	is.NoErr(err)
	want := &enrich.Company{
		Name:             "tiny co",
		EnrichmentStatus: "enriched",
		Domain:           strp("tinyco.io"),
		NetworkURL:       strp("https://www.linkedin.com/company/tinyco"),
	}
	is.Equal(asJSON(t, c), asJSON(t, want))
	is.Equal(f.requests()[0].URL.Query().Get("profile"), "https://www.linkedin.com/company/tinyco")
}

func TestPDLCompanyOtherWebsiteIsUnconfirmedRedirect(t *testing.T) {
	is := is.New(t)
	p, _, _ := newPDL(t, map[string][]reply{"/v5/company/enrich": {{status: 200, fixture: "pdl/company_full.json"}}})
	c, err := p.CompanyByDomain(context.Background(), nil, "acme-corp.com") // an alternative domain
	is.NoErr(err)
	is.Equal(*c.Domain, "acme.com")
	is.Equal(*c.Redirect, enrich.Redirect{From: "acme-corp.com", To: "acme.com", Confirmed: false})
}

func TestPDLPerson(t *testing.T) {
	is := is.New(t)
	p, f, _ := newPDL(t, map[string][]reply{"/v5/person/enrich": {{status: 200, fixture: "pdl/person.json"}}})
	got, err := p.PersonByURL(context.Background(), nil, "https://www.linkedin.com/in/wile-e-coyote")
	is.NoErr(err)
	is.Equal(f.requests()[0].URL.Query().Get("profile"), "https://www.linkedin.com/in/wile-e-coyote")
	want := &enrich.Person{
		NetworkURL:         strp("https://www.linkedin.com/in/wile-e-coyote"),
		FullName:           strp("wile coyote"),
		FirstName:          strp("wile"),
		LastName:           strp("coyote"),
		Headline:           strp("head of procurement at acme"),
		About:              strp("buys anvils."),
		City:               strp("phoenix"),
		NetworkConnections: enrich.Ptr(int64(512)),
		EnrichmentStatus:   "enriched",
		Positions: []enrich.Position{
			{
				Title: strp("head of procurement"), CompanyName: strp("acme corporation"),
				CompanyNetworkURL: strp("https://www.linkedin.com/company/acme"), Location: strp("phoenix, arizona, united states"),
				StartDate: strp("2016-03-01"), StartDatePrecision: strp("month"), IsCurrent: true,
			},
			{ // current, with nothing known but the employer
				CompanyName: strp("acme rockets"), IsCurrent: true,
			},
			{
				Title: strp("trap engineer"), CompanyName: strp("roadrunner traps"),
				CompanyNetworkURL: strp("https://www.linkedin.com/company/roadrunner-traps"),
				StartDate:         strp("2012-01-01"), StartDatePrecision: strp("year"),
				EndDate: strp("2016-01-01"), EndDatePrecision: strp("year"),
			},
			{
				Title:     strp("freelancer"),
				StartDate: strp("2010-06-15"), StartDatePrecision: strp("day"),
				EndDate: strp("2011-12-31"), EndDatePrecision: strp("day"),
			},
		},
	}
	is.Equal(asJSON(t, got), asJSON(t, want))
}

func TestPDLErrors(t *testing.T) {
	is := is.New(t)
	p, f, logs := newPDL(t, map[string][]reply{
		"/v5/person/enrich":  {{status: 404, fixture: "pdl/error_404.json"}},
		"/v5/company/enrich": {{status: 429, fixture: "pdl/error_429.json"}, {status: 503, fixture: "pdl/error_503.json"}, {status: 503, fixture: "pdl/error_503.json"}},
	})
	_, err := p.PersonByURL(context.Background(), nil, "https://www.linkedin.com/in/nobody")
	is.True(errors.Is(err, enrich.ErrNotFound))
	_, err = p.CompanyByDomain(context.Background(), nil, "acme.com")
	is.True(errors.Is(err, enrich.ErrUnavailable))
	is.Equal(f.count("/v5/company/enrich"), 3) // 429, then two 503s: retried, then given up
	is.True(strings.Contains(err.Error(), "temporarily unavailable"))
	st := p.Stats()
	is.Equal(*st.Calls, int64(4))
	is.Equal(*st.Errors, int64(3))
	noKey(t, pdlKey, logs.String(), err.Error(), *st.LastError)
}

func TestPDLOutOfCreditsAndBadKey(t *testing.T) {
	for _, c := range []struct {
		status  int
		fixture string
	}{{402, "pdl/error_402.json"}, {401, "pdl/error_401.json"}} {
		is := is.New(t)
		p, f, logs := newPDL(t, map[string][]reply{"/v5/person/enrich": {{status: c.status, fixture: c.fixture}}})
		_, err := p.PersonByURL(context.Background(), nil, "https://www.linkedin.com/in/wile-e-coyote")
		is.True(errors.Is(err, enrich.ErrUnavailable))
		is.True(strings.Contains(err.Error(), "PDL_API_KEY"))
		is.Equal(f.count("/v5/person/enrich"), 1) // not retried
		is.True(strings.Contains(logs.String(), "level=ERROR"))
		noKey(t, pdlKey, logs.String(), err.Error())
	}
}

func TestPDLSearchStaff(t *testing.T) {
	is := is.New(t)
	p, f, _ := newPDL(t, map[string][]reply{"/v5/person/search": {{status: 200, fixture: "pdl/search.json"}}})
	hits, err := p.SearchStaff(context.Background(), nil, enrich.StaffQuery{
		Company: &enrich.Company{Name: "Acme", Domain: strp("acme.com")},
		Names:   []string{"Wile", "coyote"},
		Splits:  [][2]string{{"wi", "le"}},
		Limit:   3,
	})
	is.NoErr(err)
	// A hit without a profile is no lead; a hit's names are read as its profile's, and
	// the record is the profile person enrich would return.
	is.Equal(len(hits), 1)
	is.Equal(*hits[0].Profile.NetworkURL, "https://www.linkedin.com/in/wile-e-coyote")
	hits[0].Profile = nil
	is.Equal(hits, []enrich.StaffMember{{NetworkURL: "https://www.linkedin.com/in/wile-e-coyote", FullName: "wile coyote", First: "wile", Last: "coyote"}})
	r := f.requests()[0]
	is.Equal(r.Method, "POST")
	is.Equal(r.Header.Get("Content-Type"), "application/json")
	var body map[string]any
	is.NoErr(json.Unmarshal([]byte(f.bodies[0]), &body))
	is.Equal(body["size"], float64(3))
	// The names, then both sides of each split, as whole keywords of any of the names.
	names := `["wile","coyote","wi","le"]`
	want := `{"bool":{"must":[{"term":{"job_company_website":"acme.com"}},{"bool":{"should":[{"terms":{"first_name":` + names + `}},` +
		`{"terms":{"middle_name":` + names + `}},{"terms":{"last_name":` + names + `}}]}}]}}`
	got, _ := json.Marshal(body["query"])
	is.Equal(string(got), want)
}

// A page ends with a scroll_token when it is full; the next page sends it back and
// asks only for what is left, so no record is returned, and billed, twice.
func TestPDLSearchStaffPages(t *testing.T) {
	is := is.New(t)
	p, f, _ := newPDL(t, map[string][]reply{"/v5/person/search": {{status: 200, fixture: "pdl/search.json"}, {status: 200, fixture: "pdl/search.json"}}})
	q := enrich.StaffQuery{Company: &enrich.Company{Name: "Acme", Domain: strp("acme.com")}, Names: []string{"wile"}, Limit: 2}
	_, next, err := p.SearchStaffPage(context.Background(), nil, q, "")
	is.NoErr(err)
	is.Equal(next, "1234_abcd") // a full page: there may be more after it
	is.True(!strings.Contains(f.bodies[0], "scroll_token"))
	q.Limit = 5
	_, next, err = p.SearchStaffPage(context.Background(), nil, q, "1234_abcd")
	is.NoErr(err)
	is.Equal(next, "") // a page short of its size is the last
	is.True(strings.Contains(f.bodies[1], `"scroll_token":"1234_abcd"`))
	is.True(strings.Contains(f.bodies[1], `"size":5`))
}

// A first page whose total says more records match than a whole page holds comes with
// ErrSearchBeyondPage, so the lookup buys no more of them; its records are still
// returned, and a later page never says so.
func TestPDLSearchStaffSaysWhenMoreMatchThanAPage(t *testing.T) {
	is := is.New(t)
	p, _, _ := newPDL(t, map[string][]reply{"/v5/person/search": {{status: 200, fixture: "pdl/search_beyond_page.json"}}})
	q := enrich.StaffQuery{Company: &enrich.Company{Name: "Acme", Domain: strp("acme.com")}, Names: []string{"wile"}, Limit: 2}
	hits, next, err := p.SearchStaffPage(context.Background(), nil, q, "")
	is.True(errors.Is(err, enrich.ErrSearchBeyondPage))
	is.True(!errors.Is(err, enrich.ErrSearchIncomplete))
	is.Equal(len(hits), 1) // the hit without a profile is no lead
	is.Equal(next, "1234_abcd")
	_, _, err = p.SearchStaffPage(context.Background(), nil, q, next)
	is.NoErr(err)
}

// A query holds at most 20 wildcards, PDL's limit, however long the local part.
func TestPDLSearchStaffWildcardBound(t *testing.T) {
	for _, local := range []string{"jose.nunez", "aitanasaezgarcia", strings.Repeat("ab", 32)} {
		is := is.New(t)
		p, f, _ := newPDL(t, map[string][]reply{"/v5/person/search": {{status: 200, fixture: "pdl/search.json"}}})
		_, err := p.SearchStaff(context.Background(), nil, enrich.StaffQuery{Company: &enrich.Company{Name: "Acme", Domain: strp("acme.com")},
			Names: enrich.LocalPartNames(local), Local: local, Splits: enrich.LocalPartSplits(local), Limit: 3})
		is.NoErr(err)
		is.True(strings.Count(f.bodies[0], `"wildcard"`) <= 20)
		is.True(strings.Contains(f.bodies[0], `{"wildcard":{"full_name":`))
	}
}

func TestPDLSearchStaffNoMatch(t *testing.T) {
	is := is.New(t)
	p, f, _ := newPDL(t, map[string][]reply{"/v5/person/search": {{status: 404, fixture: "pdl/error_404.json"}}})
	hits, err := p.SearchStaff(context.Background(), nil, enrich.StaffQuery{
		Company: &enrich.Company{Name: "Acme", NetworkURL: strp("https://www.linkedin.com/company/acme")},
		Names:   []string{"nobody"}, Limit: 3,
	})
	is.NoErr(err) // PDL's 404 means no record matched: no hits
	is.Equal(len(hits), 0)
	is.True(strings.Contains(f.bodies[0], `{"term":{"job_company_linkedin_url":"linkedin.com/company/acme"}}`)) // PDL's form of the page
}

// PDL rejects a query whose terms array holds more than 100 elements: names past that
// are not sent, and the hits then say the search could not ask for every name.
func TestPDLSearchStaffTermsBound(t *testing.T) {
	is := is.New(t)
	p, f, _ := newPDL(t, map[string][]reply{"/v5/person/search": {{status: 200, fixture: "pdl/search.json"}}})
	var many []string
	for i := range 150 {
		many = append(many, fmt.Sprintf("name%03d", i))
	}
	hits, err := p.SearchStaff(context.Background(), nil, enrich.StaffQuery{
		Company: &enrich.Company{Name: "Acme", Domain: strp("acme.com")}, Names: many, Limit: 3,
	})
	is.True(errors.Is(err, enrich.ErrSearchIncomplete)) // not every name was asked for
	is.Equal(len(hits), 1)                              // the hits are still leads
	var body struct {
		Query struct {
			Bool struct {
				Must []struct {
					Bool struct {
						Should []struct {
							Terms map[string][]string `json:"terms"`
						} `json:"should"`
					} `json:"bool"`
				} `json:"must"`
			} `json:"bool"`
		} `json:"query"`
	}
	is.NoErr(json.Unmarshal([]byte(f.bodies[0]), &body))
	should := body.Query.Bool.Must[1].Bool.Should
	is.Equal(len(should), 3) // the three terms arrays
	for _, s := range should {
		for _, names := range s.Terms {
			is.Equal(len(names), 100)
		}
	}
}

// Person enrich by a work address: the same record as by profile, asked with email;
// a 404 is nobody (and free).
func TestPDLPersonByEmail(t *testing.T) {
	is := is.New(t)
	p, f, _ := newPDL(t, map[string][]reply{"/v5/person/enrich": {{status: 200, fixture: "pdl/person.json"}, {status: 404, fixture: "pdl/error_404.json"}}})
	got, err := p.PersonByEmail(context.Background(), nil, "wile@acme.com")
	is.NoErr(err)
	q := f.requests()[0].URL.Query()
	is.Equal(q.Get("email"), "wile@acme.com")
	is.Equal(q.Get("profile"), "")
	is.Equal(*got.NetworkURL, "https://www.linkedin.com/in/wile-e-coyote") // the record's own profile
	is.Equal(*got.FullName, "wile coyote")
	is.Equal(len(got.Positions), 4)
	_, err = p.PersonByEmail(context.Background(), nil, "nobody@acme.com")
	is.True(errors.Is(err, enrich.ErrNotFound))
	is.Equal(p.Prices(), enrich.Prices{EmailMatch: 1, StaffSearch: 1})
	var _ enrich.EmailMatcher = p
}
