package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/enrich/source"
	"enrichd/server"
	"enrichd/server/servertest"
	"enrichd/store"

	"github.com/matryer/is"
)

// vendorFake serves one vendor's company lookups in its published shape, read from
// the adapters' test data with the fields a test sets, and counts the requests it is
// sent by path.
type vendorFake struct {
	srv      *httptest.Server
	down     atomic.Bool // answers 503 to everything
	mu       sync.Mutex
	requests map[string]int
	keys     map[string]int // requests by the API key they carried (PDL's X-Api-Key)
	answer   func(r *http.Request) (status int, body any)
}

func newVendorFake(t *testing.T, answer func(r *http.Request) (int, any)) *vendorFake {
	f := &vendorFake{requests: map[string]int{}, keys: map[string]int{}, answer: answer}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests[r.URL.Path]++
		f.keys[r.Header.Get("X-Api-Key")]++
		f.mu.Unlock()
		status, body := f.answer(r)
		if f.down.Load() {
			status, body = http.StatusServiceUnavailable, map[string]any{"status": 503, "error": map[string]any{"type": "server_error", "message": "down"}}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// callsWith counts the requests sent with key.
func (f *vendorFake) callsWith(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.keys[key]
}

func (f *vendorFake) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.requests {
		n += c
	}
	return n
}

// vendorShape is a published answer of the adapters' test data (enrich/source/testdata),
// with set: a value to write in its place, or nil to take the field out.
func vendorShape(t *testing.T, file string, set map[string]any) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "enrich", "source", "testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	for k, x := range set {
		if x == nil {
			delete(v, k)
		} else {
			v[k] = x
		}
	}
	return v
}

var vendorNotFound = map[string]any{"status": 404, "error": map[string]any{"type": "not_found", "message": "No records were found matching your request"}}

// fakePDLCompanies answers People Data Labs' company enrich (GET /v5/company/enrich
// ?website=) for the domains of companies, each company_full.json with its fields.
func fakePDLCompanies(t *testing.T, companies map[string]map[string]any) *vendorFake {
	return newVendorFake(t, func(r *http.Request) (int, any) {
		if set, ok := companies[r.URL.Query().Get("website")]; ok && r.URL.Path == "/v5/company/enrich" {
			return http.StatusOK, vendorShape(t, "pdl/company_full.json", set)
		}
		return http.StatusNotFound, vendorNotFound
	})
}

// elCompany is what fakeEnrichLayerCompanies knows of a domain: the page its resolve
// answers with, and the fields of that page's company_full.json.
type elCompany struct {
	page string
	set  map[string]any
}

// fakeEnrichLayerCompanies answers Enrich Layer's company resolve (GET
// /api/v2/company/resolve?company_domain=) and company (GET /api/v2/company?url=).
func fakeEnrichLayerCompanies(t *testing.T, companies map[string]elCompany) *vendorFake {
	return newVendorFake(t, func(r *http.Request) (int, any) {
		q := r.URL.Query()
		switch r.URL.Path {
		case "/api/v2/company/resolve":
			if c, ok := companies[q.Get("company_domain")]; ok {
				return http.StatusOK, vendorShape(t, "enrichlayer/resolve.json", map[string]any{"url": c.page})
			}
		case "/api/v2/company":
			for _, c := range companies {
				if strings.TrimSuffix(c.page, "/") == strings.TrimSuffix(q.Get("url"), "/") {
					return http.StatusOK, vendorShape(t, "enrichlayer/company_full.json", c.set)
				}
			}
		}
		return http.StatusNotFound, map[string]any{"code": 404, "description": "Not found", "name": "Not Found"}
	})
}

// fakeApolloOrganizations answers Apollo's organization enrichment (GET
// /api/v1/organizations/enrich?domain=), organization_full.json with its fields.
func fakeApolloOrganizations(t *testing.T, companies map[string]map[string]any) *vendorFake {
	return newVendorFake(t, func(r *http.Request) (int, any) {
		if set, ok := companies[r.URL.Query().Get("domain")]; ok && r.URL.Path == "/api/v1/organizations/enrich" {
			full := vendorShape(t, "apollo/organization_full.json", nil)
			org := full["organization"].(map[string]any)
			for k, v := range set {
				org[k] = v
			}
			return http.StatusOK, full
		}
		return http.StatusOK, vendorShape(t, "apollo/organization_none.json", nil)
	})
}

// withVendors asks PDL, Enrich Layer and Apollo, in that order, after the fake network
// and the dataset, filling the company fields fill.
func withVendors(t *testing.T, pdl, el, apollo *vendorFake, fill ...string) func(*server.Config) {
	return func(cfg *server.Config) {
		vc := func(f *vendorFake, key string) source.VendorConfig {
			return source.VendorConfig{APIKey: key, BaseURL: f.srv.URL, Rate: 1000, Burst: 1000, Attempts: 1,
				Backoff: time.Millisecond, NetworkHost: enrich.DefaultNetworkHost}
		}
		p, err := source.NewPDL(vc(pdl, "pdl-key"))
		if err != nil {
			t.Fatal(err)
		}
		e, err := source.NewEnrichLayer(vc(el, "el-key"))
		if err != nil {
			t.Fatal(err)
		}
		a, err := source.NewApollo(vc(apollo, "apollo-key"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Sources = append(cfg.Sources, p, e, a)
		cfg.Fill = enrich.FillLists{Company: fill}
	}
}

// sourcesOf renders a task's `sources` as "name outcome[/reason] calls=vendor_calls
// credits=vendor_credits" lines.
func sourcesOf(r *servertest.Response) []string {
	calls, _ := r.Get("sources").([]any)
	out := []string{}
	for _, c := range calls {
		m := c.(map[string]any)
		s := m["name"].(string) + " " + m["outcome"].(string)
		if reason, ok := m["reason"].(string); ok {
			s += "/" + reason
		}
		out = append(out, s+" calls="+jsonNumber(m["vendor_calls"])+" credits="+jsonNumber(m["vendor_credits"]))
	}
	return out
}

func jsonNumber(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// The waterfall: PDL knows the company but not its slogan nor what it does; Enrich
// Layer, asked next, fills both and nothing else; Apollo is not asked once the list
// is filled. The task names the source of every field, and what each source was
// asked; so does its webhook. A repeat within the freshness window asks nothing and
// shows the provenance the record was stored with.
func TestWaterfallFillsFromTheNextSource(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pdl := fakePDLCompanies(t, map[string]map[string]any{
		"roadrunner.com": {"website": "roadrunner.com", "display_name": "Road Runner Inc", "linkedin_url": "linkedin.com/company/roadrunner",
			"headline": nil, "summary": nil},
	})
	el := fakeEnrichLayerCompanies(t, map[string]elCompany{
		"roadrunner.com": {page: "https://www.linkedin.com/company/roadrunner/", set: map[string]any{
			"name": "Roadrunner", "website": "https://www.roadrunner.com/", "tagline": "Meep meep",
			"description": "Fast birds.", "company_size_on_linkedin": 999, "founded_year": 1980}},
	})
	apollo := fakeApolloOrganizations(t, map[string]map[string]any{
		"roadrunner.com": {"primary_domain": "roadrunner.com", "short_description": "never asked"},
	})
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks, withVendors(t, pdl, el, apollo, "slogan", "about"))
	rcv := servertest.NewReceiver(t)
	loopID, _ := e.CreateLoop("Companies", rcv.Srv.URL, "company")
	e.StartWorkers()

	enq := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "roadrunner.com", "loop_id": loopID})
	is.Equal(enq.Status, http.StatusAccepted)
	is.True(!enq.Has("provenance")) // the enqueue response is the contract's own
	done := e.WaitSettled(enq.Str("task.id"))
	is.Equal(done.Str("task.status"), "succeeded")

	is.Equal(done.Str("data.name"), "Road Runner Inc") // PDL's, not overwritten by Enrich Layer's
	is.Equal(done.Get("data.employee_count"), 318.0)   // PDL's, not Enrich Layer's 999
	is.Equal(done.Get("data.year_founded"), 1949.0)    // PDL's, not Enrich Layer's 1980
	is.Equal(done.Str("data.slogan"), "Meep meep")     // Enrich Layer's
	is.Equal(done.Str("data.about"), "Fast birds.")    // Enrich Layer's
	is.Equal(done.Str("provenance.name"), "pdl")       // the first source's
	is.Equal(done.Str("provenance.employee_count"), "pdl")
	is.Equal(done.Str("provenance.slogan"), "enrichlayer") // the second's
	is.Equal(done.Str("provenance.about"), "enrichlayer")
	provenance := done.Get("provenance").(map[string]any)
	data := done.Get("data").(map[string]any)
	for field, v := range data {
		switch field {
		case "enrichment_status", "created_at", "updated_at":
			is.True(!done.Has("provenance." + field)) // stamped by enrichd, no source's
		default:
			is.Equal(v != nil, provenance[field] != nil) // every non-null field, and only those, is named
		}
	}
	// The README's worked example, with what each vendor was asked and billed by its
	// published price: PDL's company enrich, 1 credit; Enrich Layer's resolve (2) and
	// company (1); nothing from Apollo.
	is.Equal(sourcesOf(done), []string{
		"fake-network miss calls=0 credits=0", "dataset miss calls=0 credits=0",
		"pdl hit calls=1 credits=1",
		"enrichlayer hit calls=2 credits=3", // resolve, then the company
		"apollo skipped/filled calls=0 credits=0",
	})
	is.Equal(apollo.calls(), 0) // the third source is not asked once the list is filled

	// The webhook body carries both, as the task does.
	hook := rcv.Wait(t, 1)[0]
	var body map[string]any
	is.NoErr(json.Unmarshal(hook.Body, &body))
	is.Equal(body["event"], "task.succeeded")
	is.Equal(body["provenance"], done.Get("provenance"))
	is.Equal(body["sources"], done.Get("sources"))

	// Within the freshness window the store answers: no source is asked.
	pdlCalls, elCalls := pdl.calls(), el.calls()
	again := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "roadrunner.com"})
	is.Equal(again.Status, http.StatusOK)
	hit := e.Do("GET", "/v1/tasks/"+again.Str("task.id"), nil)
	is.Equal(hit.Str("task.status"), "succeeded")
	is.Equal(hit.Get("data.slogan"), "Meep meep")
	is.Equal(hit.Get("provenance"), done.Get("provenance")) // as it was stored
	is.Equal(hit.Get("sources"), []any{})
	is.Equal(pdl.calls(), pdlCalls)
	is.Equal(el.calls(), elCalls)
	is.Equal(apollo.calls(), 0)
}

// A second source that answers with another company is discarded, and logged; the
// next one, the same company, fills what is still missing.
func TestWaterfallDiscardsAnotherSubject(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pdl := fakePDLCompanies(t, map[string]map[string]any{
		"coyote.com": {"website": "coyote.com", "display_name": "Coyote Supplies", "linkedin_url": "linkedin.com/company/coyote",
			"headline": nil, "summary": nil},
	})
	el := fakeEnrichLayerCompanies(t, map[string]elCompany{
		"coyote.com": {page: "https://www.linkedin.com/company/acme-bricks/", set: map[string]any{
			"name": "Acme Bricks", "website": "https://www.acmebricks.com/", "tagline": "Bricks", "description": "Bricks, not coyotes."}},
	})
	apollo := fakeApolloOrganizations(t, map[string]map[string]any{
		"coyote.com": {"name": "Coyote", "primary_domain": "coyote.com", "website_url": "http://www.coyote.com",
			"linkedin_url": "http://www.linkedin.com/company/coyote", "short_description": "Supplies for coyotes."},
	})
	e := servertest.NewEnv(t, withVendors(t, pdl, el, apollo, "slogan", "about"))
	e.StartWorkers()

	enq := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "coyote.com"})
	done := e.WaitSettled(enq.Str("task.id"))

	is.Equal(done.Str("task.status"), "succeeded")
	is.Equal(done.Str("data.name"), "Coyote Supplies")
	is.Equal(done.Str("data.about"), "Supplies for coyotes.") // Apollo's
	is.Equal(done.Get("data.slogan"), nil)                    // Acme Bricks' slogan is not Coyote's
	is.Equal(done.Str("provenance.about"), "apollo")
	for field, src := range done.Get("provenance").(map[string]any) {
		is.True(src != "enrichlayer") // nothing of the other company is kept
		_ = field
	}
	is.Equal(sourcesOf(done), []string{
		"fake-network miss calls=0 credits=0", "dataset miss calls=0 credits=0",
		"pdl hit calls=1 credits=1",
		"enrichlayer miss/other_subject calls=2 credits=3", // billed, though discarded
		"apollo hit calls=1 credits=1",
	})
	is.True(strings.Contains(e.Logs.String(), "another subject")) // the discarded answer is logged
	is.True(strings.Contains(e.Logs.String(), "acmebricks.com"))
}

// With no fill list, the first source that knows the subject gives the answer (as
// before the waterfall): the others are not asked.
func TestWaterfallWithNoFillListIsFirstHitWins(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pdl := fakePDLCompanies(t, map[string]map[string]any{"wile.com": {"website": "wile.com", "headline": nil}})
	el := fakeEnrichLayerCompanies(t, map[string]elCompany{
		"wile.com": {page: "https://www.linkedin.com/company/acme/", set: map[string]any{"website": "https://wile.com/"}},
	})
	apollo := fakeApolloOrganizations(t, nil)
	e := servertest.NewEnv(t, withVendors(t, pdl, el, apollo))
	e.StartWorkers()

	done := e.WaitSettled(e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "wile.com"}).Str("task.id"))

	is.Equal(done.Str("task.status"), "succeeded")
	is.Equal(done.Get("data.slogan"), nil)
	is.Equal(sourcesOf(done), []string{"fake-network miss calls=0 credits=0", "dataset miss calls=0 credits=0",
		"pdl hit calls=1 credits=1", "enrichlayer skipped/filled calls=0 credits=0", "apollo skipped/filled calls=0 credits=0"})
	is.Equal(el.calls()+apollo.calls(), 0)

	// The organization's own list is read for its next task.
	slogan := []string{"slogan"}
	is.NoErr(e.DB.SetFillLists(t.Context(), e.OrgID, store.FillUpdate{Company: &slogan}))
	e.Clock.Add(31 * 24 * time.Hour)
	filled := e.WaitSettled(e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "wile.com"}).Str("task.id"))
	is.Equal(filled.Str("data.slogan"), "Everything for the road runner hunter") // Enrich Layer's
	is.Equal(filled.Str("provenance.slogan"), "enrichlayer")
	is.Equal(sourcesOf(filled), []string{"fake-network miss calls=0 credits=0", "dataset miss calls=0 credits=0",
		"pdl hit calls=1 credits=1", "enrichlayer hit calls=2 credits=3", "apollo skipped/filled calls=0 credits=0"})
}

// A stored record served because its refresh failed keeps the provenance it was
// stored with, beside the sources that were asked and failed.
func TestWaterfallStoredRecordServedOnFailureKeepsItsProvenance(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pdl := fakePDLCompanies(t, map[string]map[string]any{"acme-anvils.com": {"website": "acme-anvils.com"}})
	e := servertest.NewEnv(t, withVendors(t, pdl, fakeEnrichLayerCompanies(t, nil), fakeApolloOrganizations(t, nil)))
	e.StartWorkers()
	first := e.WaitSettled(e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme-anvils.com"}).Str("task.id"))
	is.Equal(first.Str("provenance.name"), "pdl")

	pdl.down.Store(true)
	e.Clock.Add(31 * 24 * time.Hour) // past the freshness window: the record is refreshed
	stale := e.WaitSettled(e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme-anvils.com"}).Str("task.id"))

	is.Equal(stale.Str("task.status"), "succeeded")
	is.Equal(stale.Get("provenance"), first.Get("provenance"))
	// A vendor's error and its 404s bill nothing.
	is.Equal(sourcesOf(stale), []string{"fake-network miss calls=0 credits=0", "dataset miss calls=0 credits=0",
		"pdl error calls=1 credits=0", "enrichlayer miss calls=1 credits=0", "apollo miss calls=1 credits=0"})
}

// An email lookup's task names where its person's fields came from and the sources
// its company and profile lookups and its staff searches asked (the dataset's search
// found nobody); served again from the store, it asks none
// and keeps that provenance.
func TestEmailLookupCarriesProvenanceAndSources(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	servertest.AcmeNetwork(e)
	e.StartWorkers()

	_, done := e.EmailLookup("jane.smith@acme.com")

	is.Equal(done.Str("task.status"), "succeeded")
	is.Equal(done.Str("provenance.full_name"), "fake-network")
	is.Equal(done.Str("provenance.positions"), "fake-network")
	is.True(!done.Has("provenance.email_match")) // how the address was matched is email_match's to say
	// The dataset was asked to search the staff too, and listed nobody.
	is.Equal(sourcesOf(done), []string{"fake-network hit calls=0 credits=0", "dataset miss calls=0 credits=0"})

	again := e.Do("POST", "/v1/people/enrich", map[string]string{"email": "jane.smith@acme.com"})
	is.Equal(again.Status, http.StatusOK)
	hit := e.Do("GET", "/v1/tasks/"+again.Str("task.id"), nil)
	is.Equal(hit.Get("provenance"), done.Get("provenance"))
	is.Equal(hit.Get("sources"), []any{})
}

// fakeEnrichLayerProfiles answers Enrich Layer's profile (GET /api/v2/profile
// ?profile_url=) for the profiles of people, each profile.json with its fields.
func fakeEnrichLayerProfiles(t *testing.T, people map[string]map[string]any) *vendorFake {
	return newVendorFake(t, func(r *http.Request) (int, any) {
		if set, ok := people[r.URL.Query().Get("profile_url")]; ok && r.URL.Path == "/api/v2/profile" {
			return http.StatusOK, vendorShape(t, "enrichlayer/profile.json", set)
		}
		return http.StatusNotFound, map[string]any{"code": 404, "description": "Not found", "name": "Not Found"}
	})
}

// fakePDLPeople answers People Data Labs' person enrich by profile (GET
// /v5/person/enrich?profile=) for the profiles of people, each person.json's record
// with its fields.
func fakePDLPeople(t *testing.T, people map[string]map[string]any) *vendorFake {
	return newVendorFake(t, func(r *http.Request) (int, any) {
		if set, ok := people[r.URL.Query().Get("profile")]; ok && r.URL.Path == "/v5/person/enrich" {
			return http.StatusOK, map[string]any{"status": 200, "likelihood": 9, "data": pdlPerson(t, set)}
		}
		return http.StatusNotFound, vendorNotFound
	})
}

// withPeopleVendors asks Enrich Layer, then PDL, after the fake network and the
// dataset, filling the person fields fill.
func withPeopleVendors(t *testing.T, el, pdl *vendorFake, fill ...string) func(*server.Config) {
	return func(cfg *server.Config) {
		vc := func(f *vendorFake, key string) source.VendorConfig {
			return source.VendorConfig{APIKey: key, BaseURL: f.srv.URL, Rate: 1000, Burst: 1000, Attempts: 1,
				Backoff: time.Millisecond, NetworkHost: enrich.DefaultNetworkHost}
		}
		e, err := source.NewEnrichLayer(vc(el, "el-key"))
		if err != nil {
			t.Fatal(err)
		}
		p, err := source.NewPDL(vc(pdl, "pdl-key"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Sources = append(cfg.Sources, e, p)
		cfg.Fill = enrich.FillLists{Person: fill}
	}
}

// The person waterfall, as a profile lookup runs it: Enrich Layer knows Wile E.
// Coyote's profile but not what he wrote about himself; PDL, asked next for the same
// profile, fills `about` (and the other fields still null), and nothing Enrich Layer
// gave: its name, headline and connection count stay Enrich Layer's. A second
// profile, which PDL answers with another person's record (Wile's), has nothing of
// that record merged: PDL's part is a miss, another subject, and a WARN line names
// both.
func TestWaterfallFillsAPersonFromTheNextSource(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	const (
		wile = "https://www.linkedin.com/in/wile-e-coyote"
		road = "https://www.linkedin.com/in/road-runner"
	)
	el := fakeEnrichLayerProfiles(t, map[string]map[string]any{
		wile: {"summary": nil},
		road: {"public_identifier": "road-runner", "first_name": "Road", "last_name": "Runner", "full_name": "Road Runner",
			"headline": "Runs", "occupation": "Runs", "summary": nil},
	})
	pdl := fakePDLPeople(t, map[string]map[string]any{
		wile: nil, // the published record: Wile's, naming his profile
		road: nil, // the same record: Wile's, not the Road Runner's
	})
	e := servertest.NewEnv(t, withPeopleVendors(t, el, pdl, "about", "headline"))
	e.StartWorkers()

	done := e.WaitSettled(e.Do("POST", "/v1/people/enrich", map[string]string{"networkUrl": wile}).Str("task.id"))
	is.Equal(done.Str("task.status")+" "+done.Str("error.message"), "succeeded ")
	is.Equal(done.Str("data.network_url"), wile)
	is.Equal(done.Str("data.full_name"), "Wile E. Coyote")                         // Enrich Layer's, not PDL's "wile coyote"
	is.Equal(done.Str("data.headline"), "Head of Procurement at Acme Corporation") // Enrich Layer's: wanted, but not null
	is.Equal(done.Get("data.network_connections"), 500.0)                          // Enrich Layer's, not PDL's 512
	is.Equal(done.Str("data.about"), "buys anvils.")                               // PDL's
	is.Equal(done.Str("provenance.full_name"), "enrichlayer")
	is.Equal(done.Str("provenance.headline"), "enrichlayer")
	is.Equal(done.Str("provenance.positions"), "enrichlayer")
	is.Equal(done.Str("provenance.about"), "pdl")
	provenance := done.Get("provenance").(map[string]any)
	for field, v := range done.Get("data").(map[string]any) {
		switch field {
		case "enrichment_status", "last_enriched_at":
			is.True(!done.Has("provenance." + field)) // stamped by enrichd, no source's
		default:
			is.Equal(v != nil, provenance[field] != nil) // every non-null field, and only those, is named
		}
	}
	for field, src := range provenance {
		if src == "pdl" {
			is.True(field != "full_name" && field != "headline" && field != "network_connections" && field != "positions")
		}
	}
	is.Equal(sourcesOf(done), []string{
		"fake-network miss calls=0 credits=0", "dataset miss calls=0 credits=0",
		"enrichlayer hit calls=1 credits=1", // the profile
		"pdl hit calls=1 credits=1",         // the person enrich by profile
	})
	is.True(!strings.Contains(e.Logs.String(), "another subject"))

	// Within the freshness window the store answers: no source is asked.
	elCalls, pdlCalls := el.calls(), pdl.calls()
	again := e.Do("POST", "/v1/people/enrich", map[string]string{"networkUrl": wile})
	is.Equal(again.Status, http.StatusOK)
	hit := e.Do("GET", "/v1/tasks/"+again.Str("task.id"), nil)
	is.Equal(hit.Get("provenance"), done.Get("provenance"))
	is.Equal(hit.Get("sources"), []any{})
	is.Equal(el.calls(), elCalls)
	is.Equal(pdl.calls(), pdlCalls)

	other := e.WaitSettled(e.Do("POST", "/v1/people/enrich", map[string]string{"networkUrl": road}).Str("task.id"))
	is.Equal(other.Str("task.status"), "succeeded")
	is.Equal(other.Str("data.full_name"), "Road Runner")
	is.Equal(other.Get("data.about"), nil) // Wile's summary is not the Road Runner's
	is.Equal(other.Get("data.network_connections"), 500.0)
	for _, src := range other.Get("provenance").(map[string]any) {
		is.Equal(src, "enrichlayer") // nothing of the other person is kept
	}
	is.True(!strings.Contains(string(other.Raw), "buys anvils"))
	is.Equal(sourcesOf(other), []string{
		"fake-network miss calls=0 credits=0", "dataset miss calls=0 credits=0",
		"enrichlayer hit calls=1 credits=1",
		"pdl miss/other_subject calls=1 credits=1", // billed, though discarded
	})
	is.True(strings.Contains(e.Logs.String(), "another subject")) // the discarded answer is logged
	is.True(!strings.Contains(e.Logs.String(), "wile-e-coyote"))  // without the people's profiles
	is.True(!strings.Contains(e.Logs.String(), "road-runner"))
}
