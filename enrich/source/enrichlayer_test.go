package source_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"enrichd/enrich"
	"enrichd/enrich/source"
)

const elKey = "el-test-key-5f1c2a"

func newEnrichLayer(t *testing.T, routes map[string][]reply) (*source.EnrichLayer, *fakeVendor, *bytes.Buffer) {
	t.Helper()
	f := newFakeVendor(t, routes)
	logs := &bytes.Buffer{}
	el, err := source.NewEnrichLayer(vendorConfig(f, elKey, logs))
	if err != nil {
		t.Fatal(err)
	}
	return el, f, logs
}

func TestEnrichLayerNeedsKey(t *testing.T) {
	is := is.New(t)
	_, err := source.NewEnrichLayer(source.VendorConfig{})
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), "ENRICHLAYER_API_KEY"))
}

func TestEnrichLayerCompanyFull(t *testing.T) {
	is := is.New(t)
	el, f, _ := newEnrichLayer(t, map[string][]reply{"/api/v2/company": {{status: 200, fixture: "enrichlayer/company_full.json"}}})
	c, err := el.CompanyByURL(context.Background(), nil, "https://www.linkedin.com/company/acme")
	is.NoErr(err)
	want := &enrich.Company{
		Name:             "Acme Corporation",
		EnrichmentStatus: "enriched",
		Domain:           strp("acme-corp.com"),
		NetworkURL:       strp("https://www.linkedin.com/company/acme"),
		NetworkID:        strp("1441"),
		NetworkFollowers: enrich.Ptr(int64(12034)),
		EmployeeCount:    enrich.Ptr(int64(342)),
		EmployeeRange:    strp("201-500"),
		PrimaryIndustry:  strp("Machinery Manufacturing"),
		OrganizationType: strp("Privately Held"),
		YearFounded:      enrich.Ptr(1949),
		About:            strp("Acme builds anvils and the rockets that carry them."),
		Slogan:           strp("Everything for the road runner hunter"),
		Headquarters:     map[string]any{"city": "Phoenix", "country": "US", "state": "AZ", "postal_code": "85001", "line_1": "1 Desert Road"},
	}
	is.Equal(asJSON(t, c), asJSON(t, want))

	reqs := f.requests()
	is.Equal(len(reqs), 1)
	is.Equal(reqs[0].Header.Get("Authorization"), "Bearer "+elKey) // the key is sent as a bearer token
	is.Equal(reqs[0].URL.Query().Get("url"), "https://www.linkedin.com/company/acme")
	is.True(strings.HasPrefix(reqs[0].Header.Get("User-Agent"), "enrichd/"))
}

func TestEnrichLayerCompanySparse(t *testing.T) {
	is := is.New(t)
	el, _, _ := newEnrichLayer(t, map[string][]reply{"/api/v2/company": {{status: 200, fixture: "enrichlayer/company_sparse.json"}}})
	c, err := el.CompanyByURL(context.Background(), nil, "https://www.linkedin.com/company/tinyco")
	is.NoErr(err)
	want := &enrich.Company{
		Name:             "Tiny Co",
		EnrichmentStatus: "enriched",
		NetworkURL:       strp("https://www.linkedin.com/company/tinyco"),
		NetworkID:        strp("90210"),
		EmployeeRange:    strp("10001+"), // an open top bucket
	}
	is.Equal(asJSON(t, c), asJSON(t, want)) // what the vendor does not report stays null
}

func TestEnrichLayerCompanyByDomain(t *testing.T) {
	is := is.New(t)
	el, f, _ := newEnrichLayer(t, map[string][]reply{
		"/api/v2/company/resolve": {{status: 200, fixture: "enrichlayer/resolve.json"}},
		"/api/v2/company":         {{status: 200, fixture: "enrichlayer/company_full.json"}},
	})
	c, err := el.CompanyByDomain(context.Background(), nil, "acme.com")
	is.NoErr(err)
	is.Equal(*c.NetworkURL, "https://www.linkedin.com/company/acme") // the resolved page, normalized
	is.Equal(*c.Domain, "acme-corp.com")                             // the website the page lists
	is.Equal(*c.Redirect, enrich.Redirect{From: "acme.com", To: "acme-corp.com", Confirmed: false})
	reqs := f.requests()
	is.Equal(len(reqs), 2)
	is.Equal(reqs[0].URL.Query().Get("company_domain"), "acme.com")
	is.Equal(reqs[1].URL.Query().Get("url"), "https://www.linkedin.com/company/acme")
}

func TestEnrichLayerPerson(t *testing.T) {
	is := is.New(t)
	el, f, _ := newEnrichLayer(t, map[string][]reply{"/api/v2/profile": {{status: 200, fixture: "enrichlayer/profile.json"}}})
	p, err := el.PersonByURL(context.Background(), nil, "https://www.linkedin.com/in/wile-e-coyote")
	is.NoErr(err)
	is.Equal(f.requests()[0].URL.Query().Get("profile_url"), "https://www.linkedin.com/in/wile-e-coyote")
	want := &enrich.Person{
		NetworkURL:         strp("https://www.linkedin.com/in/wile-e-coyote"),
		FullName:           strp("Wile E. Coyote"),
		FirstName:          strp("Wile"),
		LastName:           strp("Coyote"),
		Headline:           strp("Head of Procurement at Acme Corporation"),
		About:              strp("Buys anvils."),
		AvatarURL:          strp("https://assets.enrichlayer.com/pp/profilepic/wile"),
		City:               strp("Phoenix"),
		CountryCode:        strp("US"),
		NetworkFollowers:   enrich.Ptr(int64(1200)),
		NetworkConnections: enrich.Ptr(int64(500)),
		EnrichmentStatus:   "enriched",
		Positions: []enrich.Position{
			{ // current roles first
				Title: strp("Head of Procurement"), CompanyName: strp("Acme Corporation"),
				CompanyNetworkURL: strp("https://www.linkedin.com/company/acme"), Location: strp("Phoenix, Arizona"),
				StartDate: strp("2016-03-15"), StartDatePrecision: strp("day"), IsCurrent: true,
			},
			{ // year-only dates are January 1 with precision year
				Title: strp("Trap Engineer"), CompanyName: strp("Roadrunner Traps Ltd"),
				CompanyNetworkURL: strp("https://www.linkedin.com/company/roadrunner-traps"),
				StartDate:         strp("2012-01-01"), StartDatePrecision: strp("year"),
				EndDate: strp("2016-01-01"), EndDatePrecision: strp("year"),
			},
			{ // a month without a day is the 1st with precision month; no title stays null
				CompanyName: strp("Desert Freelance"),
				StartDate:   strp("2010-06-01"), StartDatePrecision: strp("month"),
				EndDate: strp("2011-12-31"), EndDatePrecision: strp("day"),
			},
		},
	}
	is.Equal(asJSON(t, p), asJSON(t, want))
	for _, pos := range p.Positions {
		is.True(pos.Company == nil) // never matched to a company record by an adapter
	}
}

func TestEnrichLayerMisses(t *testing.T) {
	for _, status := range []int{http.StatusNotFound, http.StatusGone} {
		is := is.New(t)
		el, f, _ := newEnrichLayer(t, map[string][]reply{"/api/v2/profile": {{status: status, fixture: "enrichlayer/error_404.json"}}})
		_, err := el.PersonByURL(context.Background(), nil, "https://www.linkedin.com/in/nobody")
		is.True(errors.Is(err, enrich.ErrNotFound))
		is.Equal(f.count("/api/v2/profile"), 1) // a miss is not retried
		st := el.Stats()
		is.Equal(*st.Calls, int64(1))
		is.Equal(*st.Errors, int64(0)) // a miss is an answer, not an error
	}
}

func TestEnrichLayerRetriesTransientFailures(t *testing.T) {
	is := is.New(t)
	el, f, logs := newEnrichLayer(t, map[string][]reply{"/api/v2/company": {
		{status: 429, fixture: "enrichlayer/error_429.json"},
		{status: 503, fixture: "enrichlayer/error_503.json"},
		{status: 200, fixture: "enrichlayer/company_full.json"},
	}})
	c, err := el.CompanyByURL(context.Background(), nil, "https://www.linkedin.com/company/acme")
	is.NoErr(err)
	is.Equal(c.Name, "Acme Corporation")
	is.Equal(f.count("/api/v2/company"), 3) // 429 and 503 were retried
	st := el.Stats()
	is.Equal(*st.Calls, int64(3))
	is.Equal(*st.Errors, int64(2))
	is.True(strings.Contains(*st.LastError, "503"))
	noKey(t, elKey, logs.String(), *st.LastError)
}

func TestEnrichLayerGivesUpAsUnavailable(t *testing.T) {
	is := is.New(t)
	el, f, logs := newEnrichLayer(t, map[string][]reply{"/api/v2/company": {{status: 503, fixture: "enrichlayer/error_503.json"}}})
	_, err := el.CompanyByURL(context.Background(), nil, "https://www.linkedin.com/company/acme")
	is.True(errors.Is(err, enrich.ErrUnavailable))
	is.Equal(f.count("/api/v2/company"), 3) // the default of three attempts
	is.True(strings.Contains(err.Error(), "Enrichment failed, please retry."))
	noKey(t, elKey, logs.String(), err.Error())
}

func TestEnrichLayerStopsRetryingAtTheDeadline(t *testing.T) {
	is := is.New(t)
	f := newFakeVendor(t, map[string][]reply{"/api/v2/company": {{status: 429, header: map[string]string{"Retry-After": "30"}}}})
	logs := &bytes.Buffer{}
	cfg := vendorConfig(f, elKey, logs)
	el, err := source.NewEnrichLayer(cfg)
	is.NoErr(err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = el.CompanyByURL(ctx, nil, "https://www.linkedin.com/company/acme")
	is.True(errors.Is(err, enrich.ErrUnavailable))
	is.Equal(f.count("/api/v2/company"), 1) // waiting 30 s would outlast the deadline: no retry
}

func TestEnrichLayerRefusedKey(t *testing.T) {
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		is := is.New(t)
		el, f, logs := newEnrichLayer(t, map[string][]reply{"/api/v2/profile": {{status: status, fixture: "enrichlayer/error_401.json"}}})
		_, err := el.PersonByURL(context.Background(), nil, "https://www.linkedin.com/in/wile-e-coyote")
		is.True(errors.Is(err, enrich.ErrUnavailable))
		is.True(strings.Contains(err.Error(), "ENRICHLAYER_API_KEY")) // names where the key comes from
		is.Equal(f.count("/api/v2/profile"), 1)                       // a refused key is not retried
		is.True(strings.Contains(logs.String(), "level=ERROR"))       // and is logged loudly
		is.True(strings.Contains(logs.String(), "ENRICHLAYER_API_KEY"))
		st := el.Stats()
		is.Equal(*st.Errors, int64(1))
		noKey(t, elKey, logs.String(), err.Error(), *st.LastError)
	}
}

// A vendor that echoes the key in an error body does not get it into logs or errors.
func TestEnrichLayerRedactsEchoedKey(t *testing.T) {
	is := is.New(t)
	f := newFakeVendor(t, nil)
	f.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"description": "bad header: ` + r.Header.Get("Authorization") + `"}`))
	})
	logs := &bytes.Buffer{}
	el, err := source.NewEnrichLayer(vendorConfig(f, elKey, logs))
	is.NoErr(err)
	_, err = el.CompanyByURL(context.Background(), nil, "https://www.linkedin.com/company/acme")
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), "[redacted]"))
	noKey(t, elKey, logs.String(), err.Error(), *el.Stats().LastError)
}

func TestEnrichLayerSearchStaff(t *testing.T) {
	is := is.New(t)
	el, f, _ := newEnrichLayer(t, map[string][]reply{"/api/v2/company/employee/search/": {{status: 200, fixture: "enrichlayer/employee_search.json"}}})
	var s enrich.StaffSearcher = el
	hits, err := s.SearchStaff(context.Background(), nil, enrich.StaffQuery{
		Company: &enrich.Company{Name: "Acme", NetworkURL: strp("https://www.linkedin.com/company/acme")},
		Names:   []string{"wile", "coyote"},
		Limit:   5,
	})
	is.NoErr(err)
	is.Equal(hits, []enrich.StaffMember{
		{NetworkURL: "https://www.linkedin.com/in/wile-e-coyote", FullName: "Wile E. Coyote"},
		{NetworkURL: "https://www.linkedin.com/in/ralph-wolf"}, // no name shown; the URL not a profile is dropped
	})
	q := f.requests()[0].URL.Query()
	is.Equal(q.Get("company_profile_url"), "https://www.linkedin.com/company/acme")
	is.Equal(q.Get("keyword_boolean"), "wile OR coyote")
	is.Equal(q.Get("page_size"), "5")
}

func TestEnrichLayerSearchStaffByDomain(t *testing.T) {
	is := is.New(t)
	el, f, _ := newEnrichLayer(t, map[string][]reply{
		"/api/v2/company/resolve":          {{status: 200, fixture: "enrichlayer/resolve.json"}},
		"/api/v2/company/employee/search/": {{status: 404, fixture: "enrichlayer/error_404.json"}},
	})
	hits, err := el.SearchStaff(context.Background(), nil, enrich.StaffQuery{Company: &enrich.Company{Name: "Acme", Domain: strp("acme.com")}, Names: []string{"wile"}, Limit: 3})
	is.NoErr(err) // no employees found is no hits, not a failure
	is.Equal(len(hits), 0)
	is.Equal(f.requests()[1].URL.Query().Get("company_profile_url"), "https://www.linkedin.com/company/acme")
}

// The rate limit is the adapter's own: requests beyond the burst wait for tokens, and
// a wait that would outlast the deadline sends nothing.
func TestVendorRateLimit(t *testing.T) {
	is := is.New(t)
	f := newFakeVendor(t, map[string][]reply{"/api/v2/company": {{status: 200, fixture: "enrichlayer/company_full.json"}}})
	cfg := vendorConfig(f, elKey, &bytes.Buffer{})
	cfg.Rate, cfg.Burst = 1.0/3600, 2 // two now, the next in an hour
	el, err := source.NewEnrichLayer(cfg)
	is.NoErr(err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 2 {
		_, err := el.CompanyByURL(ctx, nil, "https://www.linkedin.com/company/acme")
		is.NoErr(err)
	}
	_, err = el.CompanyByURL(ctx, nil, "https://www.linkedin.com/company/acme")
	is.True(errors.Is(err, enrich.ErrUnavailable))
	is.Equal(f.count("/api/v2/company"), 2) // the third request was never sent
	is.Equal(*el.Stats().Calls, int64(2))
}

// No more requests are in flight at once than the concurrency cap.
func TestVendorConcurrencyCap(t *testing.T) {
	is := is.New(t)
	var inFlight, most, arrived atomic.Int64
	release := make(chan struct{})
	f := newFakeVendor(t, nil)
	f.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		arrived.Add(1)
		<-release
		inFlight.Add(-1)
		w.WriteHeader(http.StatusNotFound)
	})
	cfg := vendorConfig(f, elKey, &bytes.Buffer{})
	cfg.Concurrency = 2
	el, err := source.NewEnrichLayer(cfg)
	is.NoErr(err)
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			el.PersonByURL(context.Background(), nil, "https://www.linkedin.com/in/someone")
		}()
	}
	for arrived.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // room for requests beyond the cap to arrive, were they sent
	is.Equal(arrived.Load(), int64(2))
	close(release)
	wg.Wait()
	is.Equal(arrived.Load(), int64(6))
	is.Equal(most.Load(), int64(2))
}

// The keyword asks for the names a local part describes, never fragments of it; names
// past the vendor's 255 characters are not sent, and the hits then say so.
func TestEnrichLayerSearchStaffKeyword(t *testing.T) {
	is := is.New(t)
	el, f, _ := newEnrichLayer(t, map[string][]reply{"/api/v2/company/employee/search/": {{status: 200, fixture: "enrichlayer/employee_search.json"}}})
	acme := &enrich.Company{Name: "Acme", NetworkURL: strp("https://www.linkedin.com/company/acme")}
	_, err := el.SearchStaff(context.Background(), nil, enrich.StaffQuery{Company: acme, Names: enrich.LocalPartNames("rjones"), Limit: 11})
	is.NoErr(err)
	is.Equal(f.requests()[0].URL.Query().Get("keyword_boolean"), "rjones OR jones OR rjone")

	var many []string
	for i := range 40 {
		many = append(many, fmt.Sprintf("name%02d", i))
	}
	hits, err := el.SearchStaff(context.Background(), nil, enrich.StaffQuery{Company: acme, Names: many, Limit: 11})
	is.True(errors.Is(err, enrich.ErrSearchIncomplete)) // not every name was asked for
	is.Equal(len(hits), 2)                              // the hits are still leads
	is.True(len(f.requests()[1].URL.Query().Get("keyword_boolean")) <= 255)
}
