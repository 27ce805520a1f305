package source_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/matryer/is"

	"enrichd/enrich"
	"enrichd/enrich/source"
)

const apolloKey = "apollo-test-key-4d2e90"

func newApollo(t *testing.T, routes map[string][]reply) (*source.Apollo, *fakeVendor, *bytes.Buffer) {
	t.Helper()
	f := newFakeVendor(t, routes)
	logs := &bytes.Buffer{}
	a, err := source.NewApollo(vendorConfig(f, apolloKey, logs))
	if err != nil {
		t.Fatal(err)
	}
	return a, f, logs
}

const (
	apolloOrgPath   = "/api/v1/organizations/enrich"
	apolloMatchPath = "/api/v1/people/match"
)

func TestApolloNeedsKey(t *testing.T) {
	is := is.New(t)
	_, err := source.NewApollo(source.VendorConfig{APIKey: " "})
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), "APOLLO_API_KEY"))
}

func TestApolloCompanyByDomain(t *testing.T) {
	is := is.New(t)
	a, f, _ := newApollo(t, map[string][]reply{apolloOrgPath: {{status: 200, fixture: "apollo/organization_full.json"}}})
	c, err := a.CompanyByDomain(context.Background(), nil, "acme.com")
	is.NoErr(err)
	want := &enrich.Company{
		Name:             "Acme Corporation",
		EnrichmentStatus: "enriched",
		Domain:           strp("acme.com"),
		NetworkURL:       strp("https://www.linkedin.com/company/acme"), // Apollo's http URL, normalized
		NetworkID:        strp("1441"),
		EmployeeCount:    enrich.Ptr(int64(318)),
		PrimaryIndustry:  strp("machinery"),
		YearFounded:      enrich.Ptr(1949),
		About:            strp("Acme builds anvils and the rockets that carry them."),
		Headquarters:     map[string]any{"city": "Phoenix", "state": "Arizona", "country": "United States", "postal_code": "85001", "street_address": "1 Desert Road"},
	}
	is.Equal(asJSON(t, c), asJSON(t, want)) // the domain matches: no redirect
	r := f.requests()[0]
	is.Equal(r.Method, "GET")
	is.Equal(r.Header.Get("X-Api-Key"), apolloKey)
	is.Equal(r.URL.Query().Get("domain"), "acme.com")
	is.Equal(r.URL.Query().Get("api_key"), "") // the key travels in the header only
	is.Equal(*a.Stats().Calls, int64(1))
}

func TestApolloCompanySparse(t *testing.T) {
	is := is.New(t)
	a, _, _ := newApollo(t, map[string][]reply{apolloOrgPath: {{status: 200, fixture: "apollo/organization_sparse.json"}}})
	c, err := a.CompanyByDomain(context.Background(), nil, "tinyco.io")
	is.NoErr(err)
	want := &enrich.Company{Name: "Tiny Co", EnrichmentStatus: "enriched", Domain: strp("tinyco.io")}
	is.Equal(asJSON(t, c), asJSON(t, want)) // what Apollo does not report, or reports blank, stays null
}

func TestApolloCompanyOtherDomainIsUnconfirmedRedirect(t *testing.T) {
	is := is.New(t)
	a, _, _ := newApollo(t, map[string][]reply{apolloOrgPath: {{status: 200, fixture: "apollo/organization_full.json"}}})
	c, err := a.CompanyByDomain(context.Background(), nil, "acme-corp.com")
	is.NoErr(err)
	is.Equal(*c.Domain, "acme.com")
	is.Equal(*c.Redirect, enrich.Redirect{From: "acme-corp.com", To: "acme.com", Confirmed: false})
}

// Apollo answers a domain it does not know with 200 and no organization, or with 404:
// both are misses, not errors of the source.
func TestApolloCompanyNotFound(t *testing.T) {
	for _, rep := range []reply{{status: 200, fixture: "apollo/organization_none.json"}, {status: 404, fixture: "apollo/error_404.json"}} {
		is := is.New(t)
		a, _, _ := newApollo(t, map[string][]reply{apolloOrgPath: {rep}})
		_, err := a.CompanyByDomain(context.Background(), nil, "nobody.example")
		is.True(errors.Is(err, enrich.ErrNotFound))
		is.Equal(*a.Stats().Errors, int64(0))
	}
}

// Organization enrichment takes a domain only: a company page is a miss, asked of nobody.
func TestApolloCompanyByURLAsksNothing(t *testing.T) {
	is := is.New(t)
	a, f, _ := newApollo(t, nil)
	_, err := a.CompanyByURL(context.Background(), nil, "https://www.linkedin.com/company/acme")
	is.True(errors.Is(err, enrich.ErrNotFound))
	is.Equal(len(f.requests()), 0)
	is.Equal(*a.Stats().Calls, int64(0))
}

func wantApolloWile() *enrich.Person {
	return &enrich.Person{
		NetworkURL:       strp("https://www.linkedin.com/in/wile-e-coyote"),
		FullName:         strp("Wile E. Coyote"),
		FirstName:        strp("Wile"),
		LastName:         strp("Coyote"),
		Headline:         strp("Head of Procurement at Acme Corporation"),
		AvatarURL:        strp("https://media.licdn.com/dms/image/wile/profile-displayphoto"),
		City:             strp("Phoenix"),
		EnrichmentStatus: "enriched",
		Positions: []enrich.Position{
			{
				// the person's organization: its page is known
				Title: strp("Head of Procurement"), CompanyName: strp("Acme Corporation"),
				CompanyNetworkURL: strp("https://www.linkedin.com/company/acme"),
				StartDate:         strp("2016-03-01"), StartDatePrecision: strp("month"), IsCurrent: true,
			},
			{CompanyName: strp("Acme Rockets"), IsCurrent: true}, // nothing known but the employer
			{
				Title: strp("Trap Engineer"), CompanyName: strp("Roadrunner Traps"),
				StartDate: strp("2012-01-01"), StartDatePrecision: strp("month"),
				EndDate: strp("2016-01-01"), EndDatePrecision: strp("month"),
			},
		},
	}
}

func TestApolloPersonByURL(t *testing.T) {
	is := is.New(t)
	a, f, _ := newApollo(t, map[string][]reply{apolloMatchPath: {{status: 200, fixture: "apollo/person.json"}}})
	got, err := a.PersonByURL(context.Background(), nil, "https://www.linkedin.com/in/wile-e-coyote")
	is.NoErr(err)
	is.Equal(asJSON(t, got), asJSON(t, wantApolloWile()))
	r := f.requests()[0]
	is.Equal(r.Method, "POST")
	is.Equal(r.Header.Get("X-Api-Key"), apolloKey)
	is.Equal(r.Header.Get("Content-Type"), "application/json")
	is.Equal(r.URL.RawQuery, "") // the profile travels in the body, not the URL
	var body map[string]any
	is.NoErr(json.Unmarshal([]byte(f.bodies[0]), &body))
	is.Equal(body, map[string]any{"linkedin_url": "https://www.linkedin.com/in/wile-e-coyote", "reveal_personal_emails": false, "reveal_phone_number": false})
}

func TestApolloPersonByEmail(t *testing.T) {
	is := is.New(t)
	a, f, _ := newApollo(t, map[string][]reply{apolloMatchPath: {{status: 200, fixture: "apollo/person.json"}}})
	got, err := a.PersonByEmail(context.Background(), nil, "wile@acme.com")
	is.NoErr(err)
	is.Equal(asJSON(t, got), asJSON(t, wantApolloWile()))
	is.Equal(f.requests()[0].URL.RawQuery, "") // the address is not in the URL
	var body map[string]any
	is.NoErr(json.Unmarshal([]byte(f.bodies[0]), &body))
	is.Equal(body, map[string]any{"email": "wile@acme.com", "reveal_personal_emails": false, "reveal_phone_number": false})
}

// Nothing matched: Apollo's 200 without a person, or a 404, is a miss.
func TestApolloPersonNoMatch(t *testing.T) {
	for _, rep := range []reply{{status: 200, fixture: "apollo/person_none.json"}, {status: 404, fixture: "apollo/error_404.json"}} {
		is := is.New(t)
		a, _, _ := newApollo(t, map[string][]reply{apolloMatchPath: {rep}})
		_, err := a.PersonByURL(context.Background(), nil, "https://www.linkedin.com/in/nobody")
		is.True(errors.Is(err, enrich.ErrNotFound))
		_, err = a.PersonByEmail(context.Background(), nil, "nobody@acme.com")
		is.True(errors.Is(err, enrich.ErrNotFound))
		is.Equal(*a.Stats().Errors, int64(0))
	}
}

// A 429 of the minute's window and 5xx are tried again, then the source is unavailable.
func TestApolloRateLimitedThenDown(t *testing.T) {
	is := is.New(t)
	minute := map[string]string{"X-Minute-Requests-Left": "0", "X-Rate-Limit-Minute": "50", "X-Hourly-Requests-Left": "120", "X-Daily-Requests-Left": "1800"}
	a, f, logs := newApollo(t, map[string][]reply{apolloOrgPath: {
		{status: 429, fixture: "apollo/error_429.json", header: minute},
		{status: 503, fixture: "apollo/error_503.json"},
		{status: 503, fixture: "apollo/error_503.json"},
	}})
	_, err := a.CompanyByDomain(context.Background(), nil, "acme.com")
	is.True(errors.Is(err, enrich.ErrUnavailable))
	is.Equal(f.count(apolloOrgPath), 3) // 429, then two 503s: retried, then given up
	is.True(strings.Contains(err.Error(), "Something went wrong"))
	st := a.Stats()
	is.Equal(*st.Calls, int64(3))
	is.Equal(*st.Errors, int64(3))
	noKey(t, apolloKey, logs.String(), err.Error(), *st.LastError)
}

// A 429 after the minute's window passes is answered at the next try.
func TestApolloRateLimitedThenAnswers(t *testing.T) {
	is := is.New(t)
	a, f, _ := newApollo(t, map[string][]reply{apolloOrgPath: {
		{status: 429, fixture: "apollo/error_429.json", header: map[string]string{"X-Minute-Requests-Left": "0"}},
		{status: 200, fixture: "apollo/organization_full.json"},
	}})
	c, err := a.CompanyByDomain(context.Background(), nil, "acme.com")
	is.NoErr(err)
	is.Equal(c.Name, "Acme Corporation")
	is.Equal(f.count(apolloOrgPath), 2)
}

// A 429 whose hourly or daily requests left are 0 cannot pass within a task's
// lifetime: it is not tried again, and the message and an ERROR line say which quota.
func TestApolloQuotaUsedUpIsNotRetried(t *testing.T) {
	for _, c := range []struct {
		header map[string]string
		want   string
	}{
		{map[string]string{"X-Daily-Requests-Left": "0", "X-Rate-Limit-Daily": "600", "X-Hourly-Requests-Left": "0"}, "600 daily requests"},
		{map[string]string{"X-Hourly-Requests-Left": "0", "X-Rate-Limit-Hourly": "200", "X-Daily-Requests-Left": "150"}, "200 hourly requests"},
	} {
		is := is.New(t)
		a, f, logs := newApollo(t, map[string][]reply{apolloMatchPath: {{status: 429, fixture: "apollo/error_429.json", header: c.header}}})
		_, err := a.PersonByURL(context.Background(), nil, "https://www.linkedin.com/in/wile-e-coyote")
		is.True(errors.Is(err, enrich.ErrUnavailable))
		is.Equal(f.count(apolloMatchPath), 1) // not retried
		is.True(strings.Contains(err.Error(), c.want))
		is.True(strings.Contains(err.Error(), "APOLLO_API_KEY"))
		is.True(strings.Contains(logs.String(), "level=ERROR"))
		noKey(t, apolloKey, logs.String(), err.Error())
	}
}

// A refused key (401) and a key without access to the endpoint or out of credits
// (403) are not retried; both name the variable to fix, and neither leaks the key.
func TestApolloRefusedKey(t *testing.T) {
	for _, c := range []struct {
		status  int
		fixture string
	}{{401, "apollo/error_401.json"}, {403, "apollo/error_403.json"}} {
		is := is.New(t)
		a, f, logs := newApollo(t, map[string][]reply{apolloMatchPath: {{status: c.status, fixture: c.fixture}}})
		_, err := a.PersonByEmail(context.Background(), nil, "wile@acme.com")
		is.True(errors.Is(err, enrich.ErrUnavailable))
		is.True(strings.Contains(err.Error(), "APOLLO_API_KEY"))
		is.Equal(f.count(apolloMatchPath), 1) // not retried
		is.True(strings.Contains(logs.String(), "level=ERROR"))
		is.Equal(*a.Stats().Errors, int64(1))
		noKey(t, apolloKey, logs.String(), err.Error())
	}
}

// A 422 is Apollo refusing what was asked: not retried, and its words are kept.
func TestApolloUnprocessable(t *testing.T) {
	is := is.New(t)
	a, f, _ := newApollo(t, map[string][]reply{apolloOrgPath: {{status: 422, fixture: "apollo/error_422.json"}}})
	_, err := a.CompanyByDomain(context.Background(), nil, "acme.com")
	is.True(errors.Is(err, enrich.ErrUnavailable))
	is.True(!errors.Is(err, enrich.ErrNotFound))
	is.Equal(f.count(apolloOrgPath), 1)
	is.True(strings.Contains(err.Error(), "(422): The value of domain is not a valid domain")) // {"error": "..."} read as Apollo's words
}

// Apollo's match by email is its closest match, a guess: what it returns carries what
// an email lookup confirms a candidate with (a current position whose company page is
// the domain's company's, and a name the address fits), and fails that confirmation
// for another company's address or a name the address does not fit.
func TestApolloEmailMatchIsConfirmedOnlyAtTheDomainsCompany(t *testing.T) {
	is := is.New(t)
	a, _, _ := newApollo(t, map[string][]reply{apolloMatchPath: {{status: 200, fixture: "apollo/person.json"}}})
	acme := &enrich.Company{Name: "Acme", Domain: strp("acme.com"), NetworkURL: strp("https://www.linkedin.com/company/acme")}
	globex := &enrich.Company{Name: "Globex", Domain: strp("globex.com"), NetworkURL: strp("https://www.linkedin.com/company/globex")}
	for _, c := range []struct {
		address string
		company *enrich.Company
		ok      bool
	}{
		{"wile.coyote@acme.com", acme, true},
		{"wile.coyote@globex.com", globex, false}, // Apollo's match works at Acme, not Globex
		{"hank@acme.com", acme, false},            // the address does not fit the name
	} {
		p, err := a.PersonByEmail(context.Background(), nil, c.address)
		is.NoErr(err)
		local, domain, _ := enrich.SplitAddress(c.address)
		_, ok := enrich.EmployerOf(c.company, domain).Confirm(p, local, enrich.MatchResolved)
		is.Equal(ok, c.ok) // confirmed only by a current position at the domain's company under a fitting name
	}
}
