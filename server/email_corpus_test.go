package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"enrichd/enrich/namecorpus"
	"enrichd/server/servertest"
)

// Email resolution measured on names no list of enrichd holds (enrich/namecorpus: 21
// Latin-script cultures, compound given names, double surnames, particles,
// diacritics), through the real handler, on the dataset and on a People Data Labs
// stand-in serving PDL's published shapes, each in the order the addresses were
// written and shuffled, each on a fresh database. ENRICHD_EMAIL_CORPUS sets how many
// companies (40 for the figures docs/api.md gives; 3 by default: a company writing
// first.last, one firstlast and one flast).

// corpusCompanies is how many companies of the corpus a run answers.
func corpusCompanies(t *testing.T) int {
	if v := os.Getenv("ENRICHD_EMAIL_CORPUS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("ENRICHD_EMAIL_CORPUS=%q: want a number of companies", v)
		}
		return n
	}
	return 3
}

const corpusSeed = "email-corpus"

func corpusProfile(slug string) string { return "https://www.linkedin.com/in/" + slug }
func corpusPage(c namecorpus.Company) string {
	return "https://www.linkedin.com/company/" + c.Slug
}

// corpusJSONL is the corpus as the dataset imports it: each company, and each person
// with their position there (ended for those who left) and one before it. A profile
// writes the name as the person does (without diacritics for some), with first and
// last names or, for some, only a full name.
func corpusJSONL(cs []namecorpus.Company) []string {
	var lines []string
	for _, c := range cs {
		b, _ := json.Marshal(map[string]any{"type": "company", "name": c.Name, "domain": c.Domain, "network_url": corpusPage(c)})
		lines = append(lines, string(b))
		for _, p := range c.Staff {
			n := p.Written()
			pos := map[string]any{"title": "Engineer", "company_name": c.Name, "company_network_url": corpusPage(c),
				"start_date": "2019-01-01", "start_date_precision": "year", "is_current": p.Current}
			if !p.Current {
				pos["end_date"], pos["end_date_precision"] = "2023-01-01", "year"
			}
			prev := map[string]any{"title": "Analyst", "company_name": "Elsewhere", "company_network_url": "https://www.linkedin.com/company/elsewhere",
				"start_date": "2015-01-01", "start_date_precision": "year", "end_date": "2019-01-01", "end_date_precision": "year", "is_current": false}
			rec := map[string]any{"type": "person", "network_url": corpusProfile(p.Slug), "full_name": n.Full(),
				"positions": []any{pos, prev}}
			if !p.FullNameOnly {
				rec["first_name"], rec["last_name"] = n.First(), n.Last()
			}
			b, _ := json.Marshal(rec)
			lines = append(lines, string(b))
		}
	}
	return lines
}

// corpusPDL serves the corpus in People Data Labs' published shapes: company enrich by
// website, person enrich by profile and by email, and person search, whose query it
// evaluates as PDL's index does (pdlMatches): names are lower-case keywords, matched
// whole, with their diacritics (PDL lower-cases its data and otherwise searches it
// as it is: docs/sources.md). full_name is first_name and last_name with a space, as
// PDL's schema says. Its match by email knows the address of about a third of the
// people who have one, as a vendor knows some and not others.
type corpusPDL struct {
	srv       *httptest.Server
	companyOf map[string]namecorpus.Company // by domain
	people    map[string]map[string]any     // records by profile URL
	docs      []map[string]string           // what the search matches, by record
	urls      []string
	byEmail   map[string]string // profile URL by address
	calls     atomic.Int64
	records   atomic.Int64 // records the search returned, which PDL bills
	searches  atomic.Int64
	companies atomic.Int64 // company enrich calls
	emails    atomic.Int64 // person enrich calls by email
	emailHits atomic.Int64
	profiles  atomic.Int64 // person enrich calls by profile
	mu        sync.Mutex
	rejected  []string // queries PDL would refuse
	// Since the last lookup at each company ended (by its domain), which corpusRun
	// reads once a lookup (a company's lookups are made one at a time): the calls
	// made, the records the search returned and the person enrich matches (a credit
	// each, as PDL bills), and the profiles of the records returned, with whether a
	// plain name's terms listed them or the wildcards alone.
	asked, enriched map[string]int64
	returned        map[string][]billedRecord
	domainOf        map[string]string // the company's domain, by profile URL
}

// billedRecord is a record a search returned: its profile, and whether the query
// without its wildcards lists it too.
type billedRecord struct {
	url   string
	plain bool
}

func newCorpusPDL(t *testing.T, cs []namecorpus.Company) *corpusPDL {
	f := &corpusPDL{companyOf: map[string]namecorpus.Company{}, people: map[string]map[string]any{}, byEmail: map[string]string{},
		asked: map[string]int64{}, enriched: map[string]int64{}, returned: map[string][]billedRecord{}, domainOf: map[string]string{}}
	for _, c := range cs {
		f.companyOf[c.Domain] = c
		for _, p := range c.Staff {
			// PDL keeps a second given name apart, in middle_name, and full_name is the
			// first and last names alone (its schema's example: sean fong thorne is
			// first_name sean, middle_name fong, full_name sean thorne).
			n := p.Written()
			first, middle, last := strings.ToLower(n.First()), "", strings.ToLower(n.Last())
			if n.Compound() && !n.Hyphenated {
				first, middle = strings.ToLower(n.Given[0]), strings.ToLower(strings.Join(n.Given[1:], " "))
			}
			exp := map[string]any{"company": map[string]any{"name": strings.ToLower(c.Name), "website": c.Domain,
				"linkedin_url": "linkedin.com/company/" + c.Slug}, "title": map[string]any{"name": "engineer"},
				"start_date": "2019-01", "end_date": nil, "is_primary": p.Current}
			website := c.Domain
			if !p.Current {
				exp["end_date"], website = "2023-01", "elsewhere.example"
			}
			u := corpusProfile(p.Slug)
			var middleName any
			if middle != "" {
				middleName = middle
			}
			f.people[u] = map[string]any{"id": p.Slug, "full_name": first + " " + last, "first_name": first, "last_name": last,
				"middle_name": middleName, "linkedin_url": "linkedin.com/in/" + p.Slug, "job_title": "engineer",
				"job_company_website": website, "location_locality": "springfield", "location_country": "united states",
				"experience": []any{exp}}
			f.docs = append(f.docs, map[string]string{"job_company_website": website, "first_name": first, "middle_name": middle,
				"middle_initial": pdlInitialOf(middle), "last_name": last, "last_initial": pdlInitialOf(last), "full_name": first + " " + last})
			f.urls = append(f.urls, u)
			f.domainOf[u] = c.Domain
		}
		for _, a := range c.Addresses {
			if a.Holder >= 0 && corpusHash(a.Local+"@"+c.Domain)%3 == 0 {
				f.byEmail[a.Local+"@"+c.Domain] = corpusProfile(c.Staff[a.Holder].Slug)
			}
		}
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func corpusHash(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

func (f *corpusPDL) serve(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
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
		f.companies.Add(1)
		f.spent(q.Get("website"))
		c, ok := f.companyOf[q.Get("website")]
		if !ok {
			notFound()
			return
		}
		reply(http.StatusOK, map[string]any{"status": 200, "likelihood": 8, "name": strings.ToLower(c.Name), "display_name": c.Name,
			"website": c.Domain, "linkedin_url": "linkedin.com/company/" + c.Slug, "size": "51-200", "employee_count": len(c.Staff)})
	case "/v5/person/enrich":
		u := q.Get("profile")
		if email := q.Get("email"); email != "" {
			f.emails.Add(1)
			_, domain, _ := strings.Cut(strings.ToLower(email), "@")
			f.spent(domain)
			u = f.byEmail[strings.ToLower(email)]
		} else {
			f.profiles.Add(1)
			f.spent(f.domainOf[u])
		}
		rec, ok := f.people[u]
		if ok && q.Get("email") != "" {
			f.emailHits.Add(1)
		}
		if !ok {
			notFound()
			return
		}
		f.mu.Lock()
		f.enriched[f.domainOf[u]]++ // a match is a credit
		f.mu.Unlock()
		reply(http.StatusOK, map[string]any{"status": 200, "likelihood": 9, "data": rec})
	case "/v5/person/search":
		f.searches.Add(1)
		body := pdlSearchBody{Size: 1} // PDL's default size
		raw := new(bytes.Buffer)
		raw.ReadFrom(r.Body)
		if err := json.Unmarshal(raw.Bytes(), &body); err != nil || body.Size < 1 || body.Size > 100 {
			reply(http.StatusBadRequest, map[string]any{"status": 400, "error": map[string]any{"type": "invalid_request_error", "message": "bad request"}})
			return
		}
		domain := queryWebsite(body.Query)
		f.spent(domain)
		if why := pdlRefuses(body.Query); why != "" {
			f.mu.Lock()
			f.rejected = append(f.rejected, why)
			f.mu.Unlock()
			reply(http.StatusBadRequest, map[string]any{"status": 400, "error": map[string]any{"type": "invalid_request_error", "message": why}})
			return
		}
		var hits []int
		for i, doc := range f.docs {
			if pdlMatches(body.Query, doc) {
				hits = append(hits, i)
			}
		}
		if len(hits) == 0 {
			notFound()
			return
		}
		from := 0
		if body.ScrollToken != "" {
			from, _ = strconv.Atoi(strings.TrimPrefix(body.ScrollToken, "scroll_"))
		}
		end := min(from+body.Size, len(hits))
		data := []any{}
		plain := withoutWildcards(body.Query).(map[string]any)
		f.mu.Lock()
		for _, i := range hits[min(from, end):end] {
			data = append(data, f.people[f.urls[i]])
			f.returned[domain] = append(f.returned[domain], billedRecord{url: f.urls[i], plain: pdlMatches(plain, f.docs[i])})
		}
		f.mu.Unlock()
		f.records.Add(int64(len(data)))
		var scroll any
		if end < len(hits) {
			scroll = "scroll_" + strconv.Itoa(end)
		}
		reply(http.StatusOK, map[string]any{"status": 200, "data": data, "total": len(hits), "scroll_token": scroll})
	default:
		notFound()
	}
}

// spent counts a call at the company of this domain.
func (f *corpusPDL) spent(domain string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked[domain]++
}

// since returns what was asked at the company of this domain since it was last
// asked: the calls, the person enrich matches and the records the search returned;
// and starts counting afresh.
func (f *corpusPDL) since(domain string) (calls, enriched int64, returned []billedRecord) {
	f.mu.Lock()
	defer f.mu.Unlock()
	calls, enriched, returned = f.asked[domain], f.enriched[domain], f.returned[domain]
	delete(f.asked, domain)
	delete(f.enriched, domain)
	delete(f.returned, domain)
	return calls, enriched, returned
}

// withoutWildcards is a query with each wildcard clause made one that lists nobody:
// what the plain names alone would list (the names query has no must_not).
func withoutWildcards(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if _, ok := v["wildcard"]; ok {
			return map[string]any{"terms": map[string]any{"full_name": []any{}}}
		}
		out := map[string]any{}
		for k, x := range v {
			out[k] = withoutWildcards(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = withoutWildcards(x)
		}
		return out
	}
	return v
}

// queryWebsite is the employer's website a search asks for (job_company_website).
func queryWebsite(v any) string {
	switch v := v.(type) {
	case map[string]any:
		if term, ok := v["term"].(map[string]any); ok {
			if w, ok := term["job_company_website"].(string); ok {
				return w
			}
		}
		for _, x := range v {
			if w := queryWebsite(x); w != "" {
				return w
			}
		}
	case []any:
		for _, x := range v {
			if w := queryWebsite(x); w != "" {
				return w
			}
		}
	}
	return ""
}

// pdlRefuses says why PDL would refuse a query, by its published limits: an array of
// more than 100 elements, or more than 20 wildcards.
func pdlRefuses(query map[string]any) string {
	wildcards := 0
	var walk func(v any) string
	walk = func(v any) string {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if k == "wildcard" {
					wildcards++
				}
				if why := walk(x); why != "" {
					return why
				}
			}
		case []any:
			if len(v) > 100 {
				return fmt.Sprintf("an array of %d elements", len(v))
			}
			for _, x := range v {
				if why := walk(x); why != "" {
					return why
				}
			}
		}
		return ""
	}
	if why := walk(query); why != "" {
		return why
	}
	if wildcards > 20 {
		return fmt.Sprintf("%d wildcards", wildcards)
	}
	return ""
}

// corpusAnswer is how one lookup ended.
type corpusAnswer struct {
	code, person, method, matchedBy string
}

func (a corpusAnswer) String() string {
	if a.code != "" {
		return a.code
	}
	s := a.person + " (" + a.method
	if a.matchedBy != "" {
		s += ", matched by " + a.matchedBy
	}
	return s + ")"
}

// lookupCost is what one lookup cost at PDL: the records its searches returned, a
// credit each, of which those of people the address fits and those a plain name's
// terms listed (the others only the wildcards that stand for diacritics did), and
// the people it fits whom the wildcards alone listed; its
// person enrich matches, a credit each; and its calls of every kind.
type lookupCost struct{ records, fits, fitsWild, plain, enriched, calls int64 }

// corpusRun answers every address on a fresh enrichd: companies side by side, each
// company's addresses one at a time, in the order written or shuffled. With pdl, it
// also returns what each lookup cost there, by address.
func corpusRun(t *testing.T, cs []namecorpus.Company, opts []any, dataset bool, shuffled bool, pdl *corpusPDL) (map[string]corpusAnswer, int, map[string]lookupCost) {
	e := servertest.NewEnv(t, opts...)
	if dataset {
		e.ImportJSONL(corpusJSONL(cs)...)
	}
	e.Key, _ = e.NewOrg("corpus", 1<<30)
	e.StartWorkers()
	answers := map[string]corpusAnswer{}
	costs := map[string]lookupCost{}
	var mu sync.Mutex
	current := map[string]bool{} // current employees' profiles
	for _, c := range cs {
		for _, p := range c.Staff {
			current[corpusProfile(p.Slug)] = p.Current
		}
	}
	var failed atomic.Value
	work := make(chan namecorpus.Company)
	var wg sync.WaitGroup
	lookups := 0
	for _, c := range cs {
		lookups += len(c.Addresses)
	}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				order := c.Addresses
				if shuffled {
					order = append([]namecorpus.Address(nil), c.Addresses...)
					r := rand.New(rand.NewPCG(corpusHash(c.Slug), 7))
					r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
				}
				for _, a := range order {
					address := a.Local + "@" + c.Domain
					got, err := corpusAsk(e, address)
					if err != nil {
						failed.Store(fmt.Errorf("%s: %w", address, err))
						return
					}
					mu.Lock()
					answers[address] = got
					if pdl != nil {
						calls, enriched, returned := pdl.since(c.Domain)
						cost := lookupCost{records: int64(len(returned)), enriched: enriched, calls: calls}
						for _, r := range returned {
							if r.plain {
								cost.plain++
							}
							for _, o := range a.Owners {
								if corpusProfile(c.Staff[o].Slug) == r.url && current[r.url] {
									cost.fits++
									if !r.plain {
										cost.fitsWild++
									}
								}
							}
						}
						costs[address] = cost
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, c := range cs {
		work <- c
	}
	close(work)
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	return answers, lookups, costs
}

// corpusAsk asks for an address and waits for its task to settle.
func corpusAsk(e *servertest.Env, address string) (corpusAnswer, error) {
	send := func(method, path string, body []byte) (map[string]any, error) {
		req, _ := http.NewRequest(method, e.HTTP.URL+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+e.Key)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := servertest.Client.Do(req)
		if err != nil {
			return nil, err
		}
		defer res.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
			return nil, err
		}
		if res.StatusCode != http.StatusOK && res.StatusCode != http.StatusAccepted {
			return nil, fmt.Errorf("%s %s: %d %v", method, path, res.StatusCode, out)
		}
		return out, nil
	}
	body, _ := json.Marshal(map[string]string{"email": address})
	got, err := send("POST", "/v1/people/enrich", body)
	if err != nil {
		return corpusAnswer{}, err
	}
	r := &servertest.Response{Body: got}
	id := r.Str("task.id")
	deadline := time.Now().Add(30 * time.Second)
	for {
		switch r.Str("task.status") {
		case "succeeded":
			if r.Has("data") {
				return corpusAnswer{person: r.Str("data.network_url"), method: r.Str("data.email_match.method"),
					matchedBy: r.Str("data.email_match.matched_by")}, nil
			}
		case "failed":
			return corpusAnswer{code: r.Str("error.code")}, nil
		}
		if time.Now().After(deadline) {
			return corpusAnswer{}, fmt.Errorf("task %s did not settle", id)
		}
		time.Sleep(3 * time.Millisecond)
		if got, err = send("GET", "/v1/tasks/"+id, nil); err != nil {
			return corpusAnswer{}, err
		}
		r = &servertest.Response{Body: got}
	}
}

// corpusScore is the figures of one run.
type corpusScore struct {
	addresses, succeeded, right, wrong int
	unique, rightUnique                int
	firstlast, rightFirstlast          int
	compound, rightCompound            int
	double, rightDouble                int
	formerAnswered                     int
	matchedBy                          int // answers resting on a vendor's match by the address
	matchedSeveral                     int // of them, addresses several current employees fit
	// holderOfSeveral counts the wrong answers that name the address's holder where it
	// fits several people: a vendor's match by the address not said to be one.
	holderOfSeveral int
	wrongs          []string
}

func (s corpusScore) row(name string, right, of int) string {
	return fmt.Sprintf("%-28s %6.1f%% (%d of %d)", name, 100*ratio(right, of), right, of)
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 1
	}
	return float64(a) / float64(b)
}

// scoreCorpus scores the answers against the corpus: a success is right when it names
// the one current employee the address fits, or, answered on a vendor's match by the
// address itself (email_match.matched_by), the current employee whose mailbox it is.
func scoreCorpus(cs []namecorpus.Company, answers map[string]corpusAnswer) corpusScore {
	var s corpusScore
	for _, c := range cs {
		for _, a := range c.Addresses {
			address := a.Local + "@" + c.Domain
			got := answers[address]
			fits := c.Fits(a)
			s.addresses++
			unique := len(fits) == 1
			right := false
			if got.code == "" {
				s.succeeded++
				switch {
				case unique && got.person == corpusProfile(c.Staff[fits[0]].Slug):
					right = true
				case got.matchedBy != "" && a.Holder >= 0 && c.Staff[a.Holder].Current && got.person == corpusProfile(c.Staff[a.Holder].Slug):
					right = true
				}
				if got.matchedBy != "" {
					s.matchedBy++
					if len(fits) > 1 {
						s.matchedSeveral++
					}
				}
				for _, p := range c.Staff {
					if !p.Current && got.person == corpusProfile(p.Slug) {
						s.formerAnswered++
					}
				}
				if right {
					s.right++
				} else {
					s.wrong++
					if a.Holder >= 0 && got.person == corpusProfile(c.Staff[a.Holder].Slug) {
						s.holderOfSeveral++
					}
					var owners []string
					for _, i := range fits {
						owners = append(owners, c.Staff[i].Full())
					}
					s.wrongs = append(s.wrongs, fmt.Sprintf("%s -> %s; fits %v", address, got, owners))
				}
			}
			if !unique {
				continue
			}
			p := c.Staff[fits[0]]
			hit := 0
			if got.code == "" && got.person == corpusProfile(p.Slug) {
				hit = 1
			}
			s.unique++
			s.rightUnique += hit
			if a.Pattern == "firstlast" {
				s.firstlast++
				s.rightFirstlast += hit
			}
			if p.Compound() {
				s.compound++
				s.rightCompound += hit
			}
			if p.DoubleSurname() {
				s.double++
				s.rightDouble += hit
			}
		}
	}
	sort.Strings(s.wrongs)
	return s
}

// billedSpread describes what PDL billed the lookups: the records their searches
// returned (mean, median, 95th percentile and most, and the mean by how the lookup
// ended), how many of them were people the address fits and how many a plain name's
// terms listed, the rest being listed only by the wildcards that stand for letters a
// diacritic may sit on; and the credits in all, person enrich matches included.
func billedSpread(costs map[string]lookupCost, answers map[string]corpusAnswer) string {
	if len(costs) == 0 {
		return "no lookups"
	}
	var all []int64
	var sum lookupCost
	worst := ""
	byEnd := map[string][2]int64{}
	for address, c := range costs {
		all = append(all, c.records)
		sum.records, sum.fits, sum.fitsWild = sum.records+c.records, sum.fits+c.fits, sum.fitsWild+c.fitsWild
		sum.plain, sum.enriched = sum.plain+c.plain, sum.enriched+c.enriched
		if worst == "" || c.records > costs[worst].records || c.records == costs[worst].records && address < worst {
			worst = address
		}
		end := answers[address].code
		if end == "" {
			end = "succeeded"
		}
		e := byEnd[end]
		byEnd[end] = [2]int64{e[0] + c.records, e[1] + 1}
	}
	slices.Sort(all)
	n := float64(len(all))
	at := func(q float64) int64 { return all[min(len(all)-1, int(q*n))] }
	var ends []string
	for end, e := range byEnd {
		ends = append(ends, fmt.Sprintf("%s %.2f (%d)", end, float64(e[0])/float64(e[1]), e[1]))
	}
	sort.Strings(ends)
	return fmt.Sprintf("mean %.2f, median %d, p95 %d, most %d (%s, %s); of people the address fits %.2f (%d, %d of them listed by the wildcards alone); "+
		"listed by a plain name's terms %.2f, by the diacritics' wildcards alone %.2f; by outcome: %s; credits a lookup with person enrich matches %.2f",
		float64(sum.records)/n, at(0.5), at(0.95), all[len(all)-1], worst, answers[worst], float64(sum.fits)/n, sum.fits, sum.fitsWild, float64(sum.plain)/n,
		float64(sum.records-sum.plain)/n, strings.Join(ends, ", "), float64(sum.records+sum.enriched)/n)
}

// changedAnswers lists the addresses two runs answered differently (another person,
// or another failure).
func changedAnswers(a, b map[string]corpusAnswer) []string {
	var out []string
	for address, x := range a {
		if y := b[address]; x.code != y.code || x.person != y.person {
			out = append(out, fmt.Sprintf("%s: %s, then %s", address, x, y))
		}
	}
	sort.Strings(out)
	return out
}

// TestEmailResolutionOnNamesNoListHolds measures email lookups on the corpus and holds
// them to their goals: no wrong person, no answer that depends on the order of the
// lookups, joined addresses (firstlast) found without a list, and on PDL no more
// vendor calls a lookup than the direct match, the search and a retrieval.
func TestEmailResolutionOnNamesNoListHolds(t *testing.T) {
	t.Parallel()
	cs := namecorpus.Generate(namecorpus.Options{Seed: corpusSeed, Companies: corpusCompanies(t)})
	for _, src := range []string{"dataset", "pdl"} {
		t.Run(src, func(t *testing.T) {
			t.Parallel() // each source's runs are on servers of their own
			var pdl *corpusPDL
			opts := func() []any {
				if src == "dataset" {
					return nil
				}
				pdl = newCorpusPDL(t, cs)
				return []any{withPDL(t, &fakePDL{srv: pdl.srv})}
			}
			run := func(shuffled bool) (map[string]corpusAnswer, int, map[string]lookupCost) {
				o := opts()
				return corpusRun(t, cs, o, src == "dataset", shuffled, pdl)
			}
			first, lookups, costs := run(false)
			var calls, records, searches int64
			var kinds string
			if pdl != nil {
				calls, records, searches = pdl.calls.Load(), pdl.records.Load(), pdl.searches.Load()
				kinds = fmt.Sprintf("%d company, %d by email (%d known), %d searches, %d by profile", pdl.companies.Load(),
					pdl.emails.Load(), pdl.emailHits.Load(), searches, pdl.profiles.Load())
				if len(pdl.rejected) > 0 {
					t.Errorf("PDL would refuse %d queries: %v", len(pdl.rejected), pdl.rejected[0])
				}
			}
			second, _, _ := run(true)
			s, s2 := scoreCorpus(cs, first), scoreCorpus(cs, second)
			changed := changedAnswers(first, second)
			var b strings.Builder
			fmt.Fprintf(&b, "%s: %d addresses at %d companies\n", src, s.addresses, len(cs))
			fmt.Fprintf(&b, "%-28s %6.2f%% (%d wrong of %d answered, %d of them the holder of an address several fit; shuffled: %d wrong)\n",
				"precision", 100*ratio(s.right, s.succeeded), s.wrong, s.succeeded, s.holderOfSeveral, s2.wrong)
			fmt.Fprintln(&b, s.row("unique-fit coverage", s.rightUnique, s.unique))
			fmt.Fprintln(&b, s.row("firstlast coverage", s.rightFirstlast, s.firstlast))
			fmt.Fprintln(&b, s.row("compound given names", s.rightCompound, s.compound))
			fmt.Fprintln(&b, s.row("double surnames", s.rightDouble, s.double))
			fmt.Fprintf(&b, "%-28s %d\n", "former employees answered", s.formerAnswered+s2.formerAnswered)
			fmt.Fprintf(&b, "%-28s %d\n", "answers changed by order", len(changed))
			fmt.Fprintf(&b, "%-28s %d (%d of them addresses several fit)\n", "answered by a vendor's match", s.matchedBy, s.matchedSeveral)
			if pdl != nil {
				fmt.Fprintf(&b, "%-28s %.2f (%d calls: %s; %.2f records billed a lookup)\n", "vendor calls a lookup",
					float64(calls)/float64(lookups), calls, kinds, float64(records)/float64(lookups))
				fmt.Fprintf(&b, "%-28s %s\n", "records billed a lookup", billedSpread(costs, first))
			}
			for _, w := range append(s.wrongs, s2.wrongs...) {
				fmt.Fprintf(&b, "  wrong: %s\n", w)
			}
			for _, c := range changed {
				fmt.Fprintf(&b, "  changed: %s\n", c)
			}
			t.Log("\n" + b.String())

			if s.wrong+s2.wrong > 0 {
				t.Errorf("%d wrong persons answered", s.wrong+s2.wrong)
			}
			if len(changed) > 0 {
				t.Errorf("%d answers changed with the order of the lookups", len(changed))
			}
			if s.formerAnswered+s2.formerAnswered > 0 {
				t.Errorf("%d former employees answered", s.formerAnswered+s2.formerAnswered)
			}
			if got := ratio(s.rightFirstlast, s.firstlast); got < 0.95 {
				t.Errorf("firstlast unique-fit coverage %.1f%%, want 95%% at least", 100*got)
			}
			if pdl != nil && float64(calls)/float64(lookups) > 2.2 {
				t.Errorf("%.2f vendor calls a lookup, want 2.2 at most", float64(calls)/float64(lookups))
			}
		})
	}
}
