package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/enrich/source"
	"enrichd/server"
	"enrichd/server/servertest"

	"github.com/matryer/is"
)

// fakePDL serves People Data Labs' company enrich, person enrich and person search in
// their published shapes, for one company's staff. Its search evaluates the query the
// way PDL's index does: first_name and last_name are lower-cased keywords, matched
// whole by term and terms, and by pattern by wildcard. It pages with size and
// scroll_token, and counts every record it returns, which is what PDL bills.
type fakePDL struct {
	srv      *httptest.Server
	mu       sync.Mutex
	staff    []elPerson
	searches []pdlSearchCall
	returned map[string]int // records returned by the search, by profile URL
	// byEmail are the records person enrich answers by email, which may be anyone's;
	// emailAsks and searchCalls count the requests of each kind.
	byEmail     map[string]map[string]any
	emailAsks   int
	searchCalls int
	// byProfile are records person enrich answers by profile URL beside the staff's;
	// profileAsks counts the asks by profile.
	byProfile   map[string]map[string]any
	profileAsks int
	companyAsks int
	// middle holds the second given names PDL keeps apart in middle_name, by slug.
	middle map[string]string
}

type pdlSearchCall struct {
	size   int
	scroll string
	query  map[string]any
}

func newFakePDL(t *testing.T, staff ...elPerson) *fakePDL {
	f := &fakePDL{staff: staff, returned: map[string]int{}, byEmail: map[string]map[string]any{}, byProfile: map[string]map[string]any{},
		middle: map[string]string{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakePDL) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	reply := func(status int, v any) {
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	notFound := func() {
		reply(http.StatusNotFound, map[string]any{"status": 404, "error": map[string]any{"type": "not_found", "message": "No records were found matching your request"}})
	}
	q := r.URL.Query()
	switch r.URL.Path {
	case "/v5/company/enrich":
		f.mu.Lock()
		f.companyAsks++
		f.mu.Unlock()
		if q.Get("website") != "globex.com" {
			notFound()
			return
		}
		reply(http.StatusOK, map[string]any{"status": 200, "likelihood": 8, "name": "globex", "display_name": "Globex",
			"website": "globex.com", "linkedin_url": "linkedin.com/company/globex", "linkedin_id": "1234", "size": "51-200",
			"employee_count": 120, "industry": "computer software", "founded": 2001, "type": "private",
			"location": map[string]any{"name": "springfield, illinois, united states", "locality": "springfield", "country": "united states"}})
	case "/v5/person/enrich":
		if address := q.Get("email"); address != "" {
			f.mu.Lock()
			f.emailAsks++
			record, ok := f.byEmail[address]
			f.mu.Unlock()
			if !ok {
				notFound()
				return
			}
			reply(http.StatusOK, map[string]any{"status": 200, "likelihood": 9, "data": record})
			return
		}
		f.mu.Lock()
		f.profileAsks++
		record, ok := f.byProfile[q.Get("profile")]
		f.mu.Unlock()
		if ok {
			reply(http.StatusOK, map[string]any{"status": 200, "likelihood": 9, "data": record})
			return
		}
		for _, p := range f.staff {
			if q.Get("profile") == "https://www.linkedin.com/in/"+p.slug {
				reply(http.StatusOK, map[string]any{"status": 200, "likelihood": 9, "data": f.record(p)})
				return
			}
		}
		notFound()
	case "/v5/person/search":
		f.mu.Lock()
		f.searchCalls++
		f.mu.Unlock()
		body := pdlSearchBody{Size: 1} // PDL's default size
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Size < 1 || body.Size > 100 {
			reply(http.StatusBadRequest, map[string]any{"status": 400, "error": map[string]any{"type": "invalid_request_error", "message": "bad request"}})
			return
		}
		var hits []elPerson
		for _, p := range f.staff {
			first, last := strings.ToLower(p.first), strings.ToLower(p.last)
			if pdlMatches(body.Query, map[string]string{"job_company_website": "globex.com",
				"first_name": first, "middle_name": f.middle[p.slug], "middle_initial": pdlInitialOf(f.middle[p.slug]), "last_name": last,
				"last_initial": pdlInitialOf(last), "full_name": first + " " + last}) {
				hits = append(hits, p)
			}
		}
		from := 0
		if body.ScrollToken != "" {
			from, _ = strconv.Atoi(strings.TrimPrefix(body.ScrollToken, "scroll_"))
		}
		if len(hits) == 0 {
			notFound()
			return
		}
		end := min(from+body.Size, len(hits))
		f.mu.Lock()
		f.searches = append(f.searches, pdlSearchCall{size: body.Size, scroll: body.ScrollToken, query: body.Query})
		data := []any{}
		for _, p := range hits[min(from, end):end] {
			f.returned["https://www.linkedin.com/in/"+p.slug]++
			data = append(data, f.record(p))
		}
		f.mu.Unlock()
		var scroll any
		if end < len(hits) {
			scroll = "scroll_" + strconv.Itoa(end)
		}
		reply(http.StatusOK, map[string]any{"status": 200, "data": data, "total": len(hits), "scroll_token": scroll})
	default:
		notFound()
	}
}

func (f *fakePDL) record(p elPerson) map[string]any {
	first, last := strings.ToLower(p.first), strings.ToLower(p.last)
	var middle any
	if m := f.middle[p.slug]; m != "" {
		middle = m
	}
	return map[string]any{"id": p.slug, "full_name": first + " " + last, "first_name": first, "middle_name": middle, "last_name": last,
		"linkedin_url": "linkedin.com/in/" + p.slug, "job_title": "engineer", "job_company_name": "globex",
		"job_company_website": "globex.com", "job_company_linkedin_url": "linkedin.com/company/globex",
		"location_locality": "springfield", "location_country": "united states",
		"experience": []any{map[string]any{"company": map[string]any{"name": "globex", "website": "globex.com",
			"linkedin_url": "linkedin.com/company/globex"}, "title": map[string]any{"name": "engineer"},
			"start_date": "2020-03", "end_date": nil, "is_primary": true}}}
}

// pdlMatches evaluates the Elasticsearch bool, term, terms and wildcard queries PDL
// accepts against a record's keyword fields; anything else fails the test's search.
func pdlMatches(query map[string]any, doc map[string]string) bool {
	for kind, v := range query {
		arg, _ := v.(map[string]any)
		switch kind {
		case "bool":
			if must, ok := arg["must"].([]any); ok {
				for _, c := range must {
					if m, _ := c.(map[string]any); !pdlMatches(m, doc) {
						return false
					}
				}
			}
			if should, ok := arg["should"].([]any); ok {
				hit := false
				for _, c := range should {
					if m, _ := c.(map[string]any); pdlMatches(m, doc) {
						hit = true
					}
				}
				if !hit {
					return false
				}
			}
		case "term":
			for field, want := range arg {
				if doc[field] != want {
					return false
				}
			}
		case "terms":
			for field, want := range arg {
				list, _ := want.([]any)
				if !slices.Contains(list, any(doc[field])) {
					return false
				}
			}
		case "wildcard":
			for field, pattern := range arg {
				p, _ := pattern.(string)
				if m, ok := pattern.(map[string]any); ok {
					p, _ = m["value"].(string)
				}
				if !wildcardRegexp(p).MatchString(doc[field]) {
					return false
				}
			}
		default:
			return false
		}
	}
	return true
}

// pdlInitialOf is a name's first letter, as PDL's middle_initial and last_initial
// keep it ("" for no name).
func pdlInitialOf(name string) string {
	for _, r := range name {
		return string(r)
	}
	return ""
}

// pdlSearchBody is a Person Search request: size, from 1 to 100, is 1 when not sent
// (PDL's reference); a record returned is a credit billed.
type pdlSearchBody struct {
	Query       map[string]any `json:"query"`
	Size        int            `json:"size"`
	ScrollToken string         `json:"scroll_token"`
}

// wildcards holds the wildcard patterns compiled, by pattern: a corpus run evaluates
// each against every record.
var wildcards sync.Map

func wildcardRegexp(pattern string) *regexp.Regexp {
	if re, ok := wildcards.Load(pattern); ok {
		return re.(*regexp.Regexp)
	}
	re := regexp.MustCompile("^" + strings.ReplaceAll(strings.ReplaceAll(regexp.QuoteMeta(pattern), `\*`, ".*"), `\?`, ".") + "$")
	wildcards.Store(pattern, re)
	return re
}

func withPDL(t *testing.T, f *fakePDL) func(*server.Config) {
	return func(cfg *server.Config) {
		p, err := source.NewPDL(source.VendorConfig{APIKey: "pdl-key", BaseURL: f.srv.URL, Rate: 1000, Burst: 1000,
			Backoff: time.Millisecond, NetworkHost: enrich.DefaultNetworkHost})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Sources = append(cfg.Sources, p)
	}
}

// PDL's names are whole keywords: asking for "lee" alone never lists Ken Berners-Lee.
// The search asks for the surnames that contain each name form as well, so k.lee,
// which fits both Kim Lee and Ken Berners-Lee, is ambiguous, whether or not Kim is
// held, and never answered with Kim alone.
func TestAnEmailLookupOnPDLSeesCompoundSurnames(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pdl := newFakePDL(t, elPerson{"kim-lee", "Kim", "Lee"}, elPerson{"ken-berners-lee", "Ken", "Berners-Lee"})
	e := servertest.NewEnv(t, withPDL(t, pdl))
	e.StartWorkers()

	start := e.Balance("acme").Balance
	_, first := e.EmailLookup("k.lee@globex.com")
	is.Equal(first.Str("error.code")+" "+first.Str("data.full_name"), "ambiguous ") // Kim Lee and Ken Berners-Lee
	is.Equal(first.Get("error.candidates"), 2.0)
	is.Equal(e.Balance("acme").Balance, start) // refunded: nobody was charged for

	_, kim := e.EmailLookup("kim.lee@globex.com")
	is.Equal(kim.Str("task.status")+" "+kim.Str("error.message"), "succeeded ")
	is.Equal(kim.Str("data.full_name"), "kim lee")
	_, again := e.EmailLookup("k.lee@globex.com")
	is.Equal(again.Str("error.code"), "ambiguous") // Kim held changes nothing

	// A surname written joined, or its part alone, finds the one person it fits.
	for _, address := range []string{"ken.bernerslee@globex.com", "kbernerslee@globex.com", "ken.lee@globex.com"} {
		_, ken := e.EmailLookup(address)
		is.Equal(ken.Str("task.status")+" "+ken.Str("error.message"), "succeeded ")
		is.Equal(ken.Str("data.full_name"), "ken berners-lee")
	}
}

// The same for a surname written joined: k.bernerslee fits Katherine and Ken
// Berners-Lee, before and after Katherine is held.
func TestAnEmailLookupOnPDLSeesJoinedCompoundSurnames(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pdl := newFakePDL(t, elPerson{"katherine-berners-lee", "Katherine", "Berners-Lee"}, elPerson{"ken-berners-lee", "Ken", "Berners-Lee"})
	e := servertest.NewEnv(t, withPDL(t, pdl))
	e.StartWorkers()
	_, before := e.EmailLookup("k.bernerslee@globex.com")
	is.Equal(before.Str("error.code")+" "+before.Str("data.full_name"), "ambiguous ")
	_, katherine := e.EmailLookup("katherine.bernerslee@globex.com")
	is.Equal(katherine.Str("data.full_name"), "katherine berners-lee")
	_, after := e.EmailLookup("k.bernerslee@globex.com")
	is.Equal(after.Str("error.code")+" "+after.Str("data.full_name"), "ambiguous ")
	is.Equal(after.Get("error.candidates"), 2.0)
}

// PDL bills its search per record returned: when the short page is full, the lookup
// goes on from where it ended (scroll_token) instead of asking for the same records
// again. Twelve people named Jones, one of them Robert.
func TestAnEmailLookupPaysNoPDLRecordTwice(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	staff := []elPerson{{"robert-jones", "Robert", "Jones"}}
	for _, first := range []string{"Ann", "Tom", "Tim", "Eve", "Ida", "Max", "Sam", "Lea", "Kai", "Mia", "Zoe"} {
		staff = append(staff, elPerson{strings.ToLower(first) + "-jones", first, "Jones"})
	}
	pdl := newFakePDL(t, staff...)
	e := servertest.NewEnv(t, withPDL(t, pdl))
	e.StartWorkers()
	_, done := e.EmailLookup("robert.jones@globex.com")
	is.Equal(done.Str("task.status")+" "+done.Str("error.message"), "succeeded ")
	is.Equal(done.Str("data.full_name"), "robert jones") // PDL answers in lower case

	pdl.mu.Lock()
	defer pdl.mu.Unlock()
	is.Equal(len(pdl.returned), len(staff)) // everyone listed
	for u, n := range pdl.returned {
		if n != 1 {
			t.Errorf("%s was returned, and billed, %d times", u, n)
		}
	}
	is.Equal(len(pdl.searches), 2)
	is.Equal(pdl.searches[0].scroll, "")
	is.True(pdl.searches[1].scroll != "") // the second page goes on from the first
	is.Equal(pdl.searches[0].size+pdl.searches[1].size, enrich.StaffSearchMax)
}

// When the first page's total says more people match than a whole page shows, people
// the address fits may lie beyond any page: the lookup is cut off and refunded, and
// the rest of the page, which PDL would bill record by record, is not bought.
func TestAnEmailLookupOnPDLCutOffBuysNoMoreThanItsFirstPage(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var staff []elPerson
	for i := range enrich.StaffSearchMax + 5 {
		staff = append(staff, elPerson{"r" + strconv.Itoa(i) + "-jones", "R" + strconv.Itoa(i), "Jones"})
	}
	pdl := newFakePDL(t, staff...)
	e := servertest.NewEnv(t, withPDL(t, pdl))
	e.StartWorkers()
	start := e.Balance("acme").Balance
	_, done := e.EmailLookup("rjones@globex.com")
	is.Equal(done.Str("error.code"), "not_found")
	is.Equal(e.Balance("acme").Balance, start) // refunded
	is.True(strings.Contains(done.Str("error.message"), "shows more people"))
	pdl.mu.Lock()
	defer pdl.mu.Unlock()
	is.Equal(len(pdl.searches), 1)
	is.Equal(len(pdl.returned), enrich.DefaultMaxRetrievals+1) // the first page alone
}

// An email lookup keeps the company it identified the domain as, whatever it found:
// the next lookups at the domain read it from the store, PDL is asked for it once, and
// a company lookup of the domain is served from the store with PDL's provenance.
func TestAnEmailLookupAsksForItsCompanyOnce(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pdl := newFakePDL(t, elPerson{"kim-lee", "Kim", "Lee"})
	e := servertest.NewEnv(t, withPDL(t, pdl))
	e.StartWorkers()
	for _, address := range []string{"zed.nobody@globex.com", "kim.lee@globex.com", "k.lee@globex.com"} {
		_, done := e.EmailLookup(address)
		is.True(done.Str("task.status") != "")
	}
	pdl.mu.Lock()
	is.Equal(pdl.companyAsks, 1) // the first lookup's, though it found nobody
	pdl.mu.Unlock()
	r := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "globex.com"})
	is.Equal(r.Status, http.StatusOK) // held: settled inside the request
	got := e.Do("GET", "/v1/tasks/"+r.Str("task.id"), nil)
	is.Equal(got.Str("data.name"), "Globex")
	is.Equal(got.Get("provenance.name"), "pdl")
	pdl.mu.Lock()
	is.Equal(pdl.companyAsks, 1)
	pdl.mu.Unlock()
}
