package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/enrich/source"
	"enrichd/server"
	"enrichd/server/servertest"
	"enrichd/store"

	"github.com/matryer/is"
)

// A vendor's direct answer to "who is this address" (PDL's person enrich by email,
// Apollo's people match by email) is a candidate: it answers an email lookup only
// once it holds a current position at the company behind the domain under a name the
// address fits. These tests ask through the real handler, against vendors answering
// in their published shapes.

// pdlPerson is PDL's published person record (person enrich's data, in
// enrich/source/testdata/pdl/person.json) with set: a value to write in its place,
// or nil to take the field out.
func pdlPerson(t *testing.T, set map[string]any) map[string]any {
	t.Helper()
	rec := vendorShape(t, "pdl/person.json", nil)["data"].(map[string]any)
	for k, v := range set {
		if v == nil {
			delete(rec, k)
		} else {
			rec[k] = v
		}
	}
	return rec
}

// pdlRecordAt is PDL's published person record made someone else's: their names,
// profile and experience, and the current job PDL writes beside it from their
// current role. The published person's headline and summary, their own words, are
// left out; the rest (location, connections, industry) is kept.
func pdlRecordAt(t *testing.T, slug, first, last string, experience ...map[string]any) map[string]any {
	t.Helper()
	exp := make([]any, len(experience))
	set := map[string]any{"id": slug, "full_name": first + " " + last, "first_name": first, "last_name": last,
		"middle_initial": nil, "middle_name": nil, "linkedin_url": "linkedin.com/in/" + slug, "linkedin_username": slug,
		"linkedin_id": nil, "headline": nil, "summary": nil, "experience": exp,
		"job_title": nil, "job_company_name": nil, "job_company_website": nil, "job_company_linkedin_url": nil}
	for i, x := range experience {
		exp[i] = x
		if x["end_date"] == nil && set["job_title"] == nil {
			set["job_title"] = x["title"].(map[string]any)["name"]
			company := x["company"].(map[string]any)
			set["job_company_name"], set["job_company_linkedin_url"] = company["name"], company["linkedin_url"]
		}
	}
	return pdlPerson(t, set)
}

// pdlRole is the current role of PDL's published person record, made a role at
// company (its network page, page) under title from start to end; end "" is a
// current role.
func pdlRole(t *testing.T, company, page, title, start, end string) map[string]any {
	t.Helper()
	var role map[string]any
	for _, x := range pdlPerson(t, nil)["experience"].([]any) {
		if x := x.(map[string]any); x["is_primary"] == true {
			role = x
		}
	}
	if role == nil {
		t.Fatal("pdl/person.json has no primary role")
	}
	c := role["company"].(map[string]any)
	c["name"], c["linkedin_url"] = company, page
	delete(c, "website") // the published company's, not this one's
	role["title"].(map[string]any)["name"] = title
	role["start_date"], role["end_date"] = start, nil
	if end != "" {
		role["end_date"] = end
	}
	return role
}

// A direct answer that confirms settles the lookup: succeeded, charged 3 credits,
// email_match naming the vendor, and no staff search made on any source, though
// Enrich Layer's would cost 10 credits and PDL's one a record; the dashboard's task
// page names the vendor too. Asked again, the address is on record (exact): nobody
// is asked, and no source is named.
func TestADirectEmailAnswerThatConfirmsIsChargedWithoutAStaffSearch(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	el := newFakeEnrichLayer(t, elPerson{"robert-jones", "Robert", "Jones"}, elPerson{"rachel-jones", "Rachel", "Jones"})
	pdl := newFakePDL(t, elPerson{"robert-jones", "Robert", "Jones"}, elPerson{"rachel-jones", "Rachel", "Jones"})
	pdl.byEmail["robert.jones@globex.com"] = pdlRecordAt(t, "robert-jones", "robert", "jones",
		pdlRole(t, "globex", "linkedin.com/company/globex", "engineer", "2020-03", ""))
	e := servertest.NewEnv(t, withEnrichLayer(t, el), withPDL(t, pdl))
	e.StartWorkers()

	start := e.Balance("acme")
	_, done := e.EmailLookup("robert.jones@globex.com")
	is.Equal(done.Str("task.status")+" "+done.Str("error.message"), "succeeded ")
	is.Equal(done.Str("data.full_name"), "robert jones")
	is.Equal(done.Str("data.network_url"), "https://www.linkedin.com/in/robert-jones")
	// PDL has the address on record for him: exact, on its record (matched_by).
	is.Equal(done.Get("data.email_match"), map[string]any{"method": "exact", "email": "robert.jones@globex.com",
		"pattern": "first.last", "source": "pdl", "matched_by": "pdl"})
	is.Equal(done.Get("task.credits_charged"), 3.0)
	is.Equal(done.Get("provenance.full_name"), "pdl") // the vendor's record, as it gave it
	is.Equal(done.Get("provenance.positions"), "pdl")
	is.Equal(sourceOutcome(done, "pdl"), "hit/1") // one vendor call, the match
	is.Equal(sourceOutcome(done, "fake-network"), "miss/0")
	after := e.Balance("acme")
	is.Equal(after.Balance, start.Balance-3)
	is.Equal(after.Refund, start.Refund)

	pdl.mu.Lock()
	is.Equal(pdl.emailAsks, 1)
	is.Equal(pdl.searchCalls, 0) // PDL's staff search: not made
	pdl.mu.Unlock()
	for _, u := range el.since(0) {
		is.True(u.Path != "/api/v2/company/employee/search/") // nor Enrich Layer's
	}
	is.Equal(e.Net.Searches.Load(), int64(0))
	viewer := e.SignIn("acme", "viewer")
	page := viewer.Get("/dashboard/tasks/" + done.Str("task.id"))
	is.True(page.Has(`found by <code id="email-match-source">pdl</code>`)) // the task page says so too
	is.True(page.Has(`matched by <code id="email-match-matched-by">pdl</code>`))

	asks, calls := pdl.emailAsks, el.count()
	_, again := e.EmailLookup("robert.jones@globex.com")
	is.Equal(again.Str("data.email_match.method"), "exact")
	is.True(again.Has("data.email_match.source"))
	is.Equal(again.Get("data.email_match.source"), nil) // what is held answered
	page = viewer.Get("/dashboard/tasks/" + again.Str("task.id"))
	is.True(page.Has(`id="email-match"`) && !page.Has(`id="email-match-source"`))
	pdl.mu.Lock()
	is.Equal(pdl.emailAsks, asks)
	pdl.mu.Unlock()
	is.Equal(el.count(), calls)
}

// A direct answer naming someone who does not work at the domain's company now, or
// whose name the address does not fit, is dropped: that person is never returned nor
// charged for. The lookup goes on with the staff search, which answers as it would
// have (the owner when it finds them, refunded not_found when it finds nobody).
func TestADirectEmailAnswerThatFailsConfirmationIsNeverCharged(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		answer map[string]any
		staff  []elPerson
		want   string // the person's name, or the error code
	}{
		{"someone at another company", pdlRecordAt(t, "robert-jones-initech", "robert", "jones",
			pdlRole(t, "initech", "linkedin.com/company/initech", "engineer", "2019-01", "")), nil, "not_found"},
		{"someone who has left the company", pdlRecordAt(t, "robert-jones-2", "robert", "jones",
			pdlRole(t, "globex", "linkedin.com/company/globex", "engineer", "2015-01", "2019-06")), nil, "not_found"},
		{"someone the address does not fit", pdlRecordAt(t, "mary-smith", "mary", "smith",
			pdlRole(t, "globex", "linkedin.com/company/globex", "ceo", "2018-01", "")), nil, "not_found"},
		{"someone the address does not fit, the search finds the owner", pdlRecordAt(t, "mary-smith", "mary", "smith",
			pdlRole(t, "globex", "linkedin.com/company/globex", "ceo", "2018-01", "")),
			[]elPerson{{"robert-jones", "Robert", "Jones"}}, "robert jones"},
		{"someone at another company, the search finds the owner", pdlRecordAt(t, "robert-jones-initech", "robert", "jones",
			pdlRole(t, "initech", "linkedin.com/company/initech", "engineer", "2019-01", "")),
			[]elPerson{{"robert-jones", "Robert", "Jones"}}, "robert jones"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			pdl := newFakePDL(t, tc.staff...)
			pdl.byEmail["robert.jones@globex.com"] = tc.answer
			e := servertest.NewEnv(t, withPDL(t, pdl))
			e.StartWorkers()
			// The company is held, so that PDL is asked only for the person: its part in
			// the task's sources is the dropped answer's, and the search's.
			company := e.WaitSettled(e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "globex.com"}).Str("task.id"))
			is.Equal(company.Str("task.status"), "succeeded")
			start := e.Balance("acme").Balance
			_, done := e.EmailLookup("robert.jones@globex.com")
			pdl.mu.Lock()
			is.Equal(pdl.emailAsks, 1)   // asked first: it costs no more than the search
			is.Equal(pdl.searchCalls, 1) // and the search made all the same
			pdl.mu.Unlock()
			wrong := "https://www.linkedin.com/in/" + tc.answer["id"].(string)
			is.True(!strings.Contains(string(done.Raw), wrong)) // the wrong person is nowhere in the task
			// The drop is logged, without whom the vendor answered with: another person.
			is.True(strings.Contains(e.Logs.String(), "direct email match dropped"))
			is.True(!strings.Contains(e.Logs.String(), tc.answer["id"].(string)))
			if tc.want == "not_found" {
				is.Equal(done.Str("error.code"), "not_found")
				is.True(!done.Has("data"))
				is.Equal(e.Balance("acme").Balance, start) // refunded
				is.Equal(e.LedgerKinds(done.Str("task.id")), []string{"charge", "refund"})
				// PDL's answer is a miss, another subject's: the match it billed, and the
				// search that listed nobody (a 404, which PDL does not bill).
				is.Equal(sourceCredits(done, "pdl"), "miss/other_subject 2 calls 1 credits")
				return
			}
			is.Equal(done.Str("task.status")+" "+done.Str("error.message"), "succeeded ")
			is.Equal(done.Str("data.full_name"), tc.want)
			is.Equal(done.Str("data.network_url"), "https://www.linkedin.com/in/robert-jones")
			is.Equal(done.Str("data.email_match.source"), "pdl") // PDL's search listed the owner
			is.Equal(e.Balance("acme").Balance, start-3)         // for the owner
			// The owner's profile, found by PDL's search, makes PDL's part a hit; the
			// dropped match is still in its calls and credits: the match and the search
			// (one record returned, the owner's profile, which is not paid for again).
			is.Equal(sourceCredits(done, "pdl"), "hit 2 calls 2 credits")
			pdl.mu.Lock()
			is.Equal(pdl.profileAsks, 0)
			pdl.mu.Unlock()
		})
	}
}

// fakeApollo serves Apollo's people match (POST /api/v1/people/match) in its published
// shape for the people it knows by address, and counts the matches asked.
type fakeApollo struct {
	srv     *httptest.Server
	mu      sync.Mutex
	byEmail map[string]map[string]any
	matches int
}

func newFakeApollo(t *testing.T) *fakeApollo {
	f := &fakeApollo{byEmail: map[string]map[string]any{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != "/api/v1/people/match" {
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":"not found"}`))
			return
		}
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		f.matches++
		person, ok := f.byEmail[body["email"].(string)]
		f.mu.Unlock()
		if !ok {
			json.NewEncoder(w).Encode(map[string]any{"person": nil})
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"person": person})
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeApollo) asked() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.matches
}

// apolloPersonAt is an Apollo person, currently at Acme (AcmeURL).
func apolloPersonAt(slug, first, last string) map[string]any {
	return map[string]any{"id": slug, "first_name": first, "last_name": last, "name": first + " " + last,
		"linkedin_url": "http://www.linkedin.com/in/" + slug, "headline": "Engineer at Acme", "email_status": "verified",
		"organization_id": "org-acme",
		"organization":    map[string]any{"id": "org-acme", "name": "Acme", "linkedin_url": "http://www.linkedin.com/company/acme", "primary_domain": "acme.com"},
		"employment_history": []any{map[string]any{"organization_id": "org-acme", "organization_name": "Acme", "title": "Engineer",
			"start_date": "2021-04-01", "end_date": nil, "current": true}}}
}

func withApollo(t *testing.T, f *fakeApollo) func(*server.Config) {
	return func(cfg *server.Config) {
		a, err := source.NewApollo(source.VendorConfig{APIKey: "apollo-key", BaseURL: f.srv.URL, Rate: 1000, Burst: 1000,
			Backoff: time.Millisecond, NetworkHost: enrich.DefaultNetworkHost})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Sources = append(cfg.Sources, a)
	}
}

// Where the staff search costs less than the direct match (here the network's, which
// costs nothing, against Apollo's 1 credit a match), the direct match is not asked
// while the search confirms someone, and is asked after a search that confirmed
// nobody. email_match.source names the source that found the person, and is kept
// with the profiles an ambiguous address gathered.
func TestADirectEmailMatchIsNotAskedBeforeACheaperStaffSearch(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	apollo := newFakeApollo(t)
	apollo.byEmail["jane.smith@acme.com"] = apolloPersonAt("jane-smith", "Jane", "Smith")
	apollo.byEmail["jsmith@acme.com"] = apolloPersonAt("john-smith", "John", "Smith")
	apollo.byEmail["ada.lovelace@acme.com"] = apolloPersonAt("ada-lovelace", "Ada", "Lovelace")
	e := servertest.NewEnv(t, withApollo(t, apollo))
	servertest.AcmeNetwork(e)
	e.StartWorkers()

	// jsmith fits three Smiths on the network: ambiguous, and Apollo is not asked.
	// A hint picks John among the profiles gathered, found by the network's search.
	_, amb := e.EmailLookup("jsmith@acme.com")
	is.Equal(amb.Str("error.code"), "ambiguous")
	is.Equal(amb.Get("error.candidates"), 3.0)
	_, picked := e.EmailLookup("jsmith@acme.com", "fullName", "John Smith")
	is.Equal(picked.Str("task.status")+" "+picked.Str("error.message"), "succeeded ")
	is.Equal(picked.Str("data.network_url"), "https://www.linkedin.com/in/john-smith")
	is.Equal(picked.Get("data.email_match"), map[string]any{"method": "resolved", "email": "jsmith@acme.com",
		"pattern": "flast", "source": "fake-network", "matched_by": nil})
	is.Equal(apollo.asked(), 0)
	is.Equal(e.Net.Searches.Load(), int64(1))

	// jane.smith: the network's search confirms Jane; Apollo, which knows her too, is
	// not asked.
	_, jane := e.EmailLookup("jane.smith@acme.com")
	is.Equal(jane.Str("task.status")+" "+jane.Str("error.message"), "succeeded ")
	is.Equal(jane.Str("data.network_url"), "https://www.linkedin.com/in/jane-smith")
	is.Equal(jane.Get("data.email_match"), map[string]any{"method": "resolved", "email": "jane.smith@acme.com",
		"pattern": "first.last", "source": "fake-network", "matched_by": nil})
	is.Equal(apollo.asked(), 0)
	is.Equal(e.Net.Searches.Load(), int64(2))

	// Nobody at Acme on the network fits ada.lovelace: Apollo, asked after the search,
	// answers with someone who confirms.
	start := e.Balance("acme").Balance
	_, ada := e.EmailLookup("ada.lovelace@acme.com")
	is.Equal(ada.Str("task.status")+" "+ada.Str("error.message"), "succeeded ")
	is.Equal(ada.Str("data.full_name"), "Ada Lovelace")
	// Apollo's match is its closest record: resolved, on Apollo's match (matched_by).
	is.Equal(ada.Get("data.email_match"), map[string]any{"method": "resolved", "email": "ada.lovelace@acme.com",
		"pattern": "first.last", "source": "apollo", "matched_by": "apollo"})
	is.Equal(apollo.asked(), 1)
	is.Equal(e.Net.Searches.Load(), int64(3))
	is.Equal(e.Balance("acme").Balance, start-3)
}

// sourceOutcome is "outcome/reason" of the named source among a task's sources,
// and its vendor calls: "hit/1".
func sourceOutcome(r *servertest.Response, name string) string {
	list, _ := r.Get("sources").([]any)
	for _, x := range list {
		if m, _ := x.(map[string]any); m["name"] == name {
			reason, _ := m["reason"].(string)
			return fmt.Sprintf("%s/%s%v", m["outcome"], reason, m["vendor_calls"])
		}
	}
	return "not asked"
}

// sourceCredits is "outcome[/reason] N calls M credits" of the named source among a
// task's sources.
func sourceCredits(r *servertest.Response, name string) string {
	list, _ := r.Get("sources").([]any)
	for _, x := range list {
		if m, _ := x.(map[string]any); m["name"] == name {
			s, _ := m["outcome"].(string)
			if reason, ok := m["reason"].(string); ok {
				s += "/" + reason
			}
			return fmt.Sprintf("%s %v calls %v credits", s, m["vendor_calls"], m["vendor_credits"])
		}
	}
	return "not asked"
}

// A direct answer whose record names no profile page (PDL keeps people it has no
// network URL for) still says where its fields came from: its task's provenance names
// the vendor for each of them.
func TestADirectEmailAnswerWithoutAProfilePageKeepsItsProvenance(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	el := newFakeEnrichLayer(t)
	pdl := newFakePDL(t)
	rec := pdlRecordAt(t, "robert-jones", "robert", "jones", pdlRole(t, "globex", "linkedin.com/company/globex", "engineer", "2020-03", ""))
	delete(rec, "linkedin_url")
	pdl.byEmail["robert.jones@globex.com"] = rec
	e := servertest.NewEnv(t, withEnrichLayer(t, el), withPDL(t, pdl))
	e.StartWorkers()

	_, done := e.EmailLookup("robert.jones@globex.com")
	is.Equal(done.Str("task.status")+" "+done.Str("error.message"), "succeeded ")
	is.Equal(done.Str("data.full_name"), "robert jones")
	is.Equal(done.Get("provenance.full_name"), "pdl")
	is.Equal(done.Get("provenance.positions"), "pdl")
}

// A direct answer that confirms is filled by the organization's person fill list as a
// profile lookup's person is: PDL gives no country code, so the other sources are
// asked for the profile it names, Enrich Layer's fills it, and nothing PDL gave is
// overwritten. PDL is not asked again for the profile. A direct answer that does not
// confirm is filled by nobody: no vendor is paid for a guess's fields.
func TestADirectEmailAnswerIsFilledByThePersonList(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	el := newFakeEnrichLayer(t, elPerson{"robert-jones", "Robert", "Jones"})
	pdl := newFakePDL(t)
	pdl.byEmail["robert.jones@globex.com"] = pdlRecordAt(t, "robert-jones", "robert", "jones",
		pdlRole(t, "globex", "linkedin.com/company/globex", "engineer", "2020-03", ""))
	pdl.byEmail["ann.lee@globex.com"] = pdlRecordAt(t, "ann-lee-initech", "ann", "lee",
		pdlRole(t, "initech", "linkedin.com/company/initech", "engineer", "2019-01", ""))
	e := servertest.NewEnv(t, withEnrichLayer(t, el), withPDL(t, pdl))
	fill := []string{"country_code"}
	is.NoErr(e.DB.SetFillLists(t.Context(), e.OrgID, store.FillUpdate{Person: &fill}))
	e.StartWorkers()

	_, done := e.EmailLookup("robert.jones@globex.com")
	is.Equal(done.Str("task.status")+" "+done.Str("error.message"), "succeeded ")
	is.Equal(done.Str("data.email_match.source"), "pdl")
	is.Equal(done.Str("data.full_name"), "robert jones") // PDL's, not Enrich Layer's "Robert Jones"
	is.Equal(done.Str("data.country_code"), "US")        // Enrich Layer's
	is.Equal(done.Str("provenance.full_name"), "pdl")
	is.Equal(done.Str("provenance.positions"), "pdl")
	is.Equal(done.Str("provenance.country_code"), "enrichlayer")
	is.Equal(done.Get("task.credits_charged"), 3.0)
	// PDL: the match alone. Enrich Layer: the company's resolve and page, then the
	// profile; no staff search on either.
	is.Equal(sourceCredits(done, "pdl"), "hit 1 calls 1 credits")
	is.Equal(sourceCredits(done, "enrichlayer"), "hit 3 calls 4 credits")
	pdl.mu.Lock()
	is.Equal(pdl.searchCalls, 0)
	is.Equal(pdl.profileAsks, 0) // the vendor that matched is not asked for its own record again
	pdl.mu.Unlock()
	for _, u := range el.since(0) {
		is.True(u.Path != "/api/v2/company/employee/search/")
	}

	before := el.count()
	_, guess := e.EmailLookup("ann.lee@globex.com")
	is.Equal(guess.Str("error.code"), "not_found")
	for _, u := range el.since(before) {
		is.True(u.Path != "/api/v2/profile") // the dropped answer's profile is not asked for
	}
}

// An address several current employees fit by name alone (rjones: Robert and Rachel
// Jones) that PDL has on record for one of them is answered with that one, on PDL's
// record: method exact, matched_by pdl. The same address PDL does not know is
// ambiguous.
func TestAVendorsMatchOfAnAddressSeveralFitSaysSo(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pdl := newFakePDL(t, elPerson{"robert-jones", "Robert", "Jones"}, elPerson{"rachel-jones", "Rachel", "Jones"})
	pdl.byEmail["rjones@globex.com"] = pdlRecordAt(t, "robert-jones", "robert", "jones",
		pdlRole(t, "globex", "linkedin.com/company/globex", "engineer", "2020-03", ""))
	e := servertest.NewEnv(t, withPDL(t, pdl))
	e.StartWorkers()
	_, done := e.EmailLookup("rjones@globex.com")
	is.Equal(done.Str("task.status")+" "+done.Str("error.message"), "succeeded ")
	is.Equal(done.Str("data.full_name"), "robert jones")
	is.Equal(done.Get("data.email_match"), map[string]any{"method": "exact", "email": "rjones@globex.com",
		"pattern": "flast", "source": "pdl", "matched_by": "pdl"})
	_, other := e.EmailLookup("r.jones@globex.com") // PDL knows nobody for it: the name decides
	is.Equal(other.Str("error.code"), "ambiguous")
	is.Equal(other.Get("error.candidates"), 2.0)
}
