//go:build unix

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
)

// billingVendors are People Data Labs, Enrich Layer and Apollo as enrichd asks them
// for companies by domain, each under its own path prefix, billing by its published
// price: PDL 1 credit a company matched, Enrich Layer 2 a resolve and 1 a company page,
// Apollo 1 an organization. A request is billed as it arrives, as a vendor that
// answers it bills it whether or not the caller is still there to read the answer. A
// domain that names a vendor ("hold-at-apollo-1.example") is held there, its answer
// kept back until release or until the caller is gone.
type billingVendors struct {
	srv     *httptest.Server
	mu      sync.Mutex
	calls   map[string]int64
	credits map[string]int64
	held    map[string]int64 // waiting now
	release chan struct{}    // closed: held answers go, and nothing more is held
}

var billedVendors = []string{"pdl", "enrichlayer", "apollo"}

func newBillingVendors(t *testing.T) *billingVendors {
	v := &billingVendors{calls: map[string]int64{}, credits: map[string]int64{}, held: map[string]int64{}, release: make(chan struct{})}
	v.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vendor, path, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		q := r.URL.Query()
		var domain, answer string
		var price int64
		switch vendor + " /" + path {
		case "pdl /v5/company/enrich":
			domain, price = q.Get("website"), 1
			answer = fmt.Sprintf(`{"name": "Company of %s", "website": %q, "linkedin_url": %q}`, domain, domain, companyPage(domain))
		case "enrichlayer /api/v2/company/resolve":
			domain, price = q.Get("company_domain"), 2
			answer = fmt.Sprintf(`{"url": %q}`, companyPage(domain))
		case "enrichlayer /api/v2/company":
			domain, price = strings.TrimPrefix(q.Get("url"), "https://www.linkedin.com/company/"), 1
			answer = fmt.Sprintf(`{"name": "Company of %s", "company_size_on_linkedin": 12}`, domain)
		case "apollo /api/v1/organizations/enrich":
			domain, price = q.Get("domain"), 1
			answer = fmt.Sprintf(`{"organization": {"name": "Company of %s", "primary_domain": %q, "short_description": "What %s does."}}`, domain, domain, domain)
		default:
			http.NotFound(w, r)
			return
		}
		v.mu.Lock()
		v.calls[vendor]++
		v.credits[vendor] += price
		v.mu.Unlock()
		if strings.Contains(domain, "hold-at-"+vendor) {
			v.mu.Lock()
			v.held[vendor]++
			v.mu.Unlock()
			select {
			case <-v.release:
			case <-r.Context().Done(): // the caller was killed
			}
			v.mu.Lock()
			v.held[vendor]--
			v.mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, answer)
	}))
	t.Cleanup(func() {
		v.open()
		v.srv.Close()
	})
	return v
}

// companyPage is the network page the vendors give domain.
func companyPage(domain string) string { return "https://www.linkedin.com/company/" + domain }

func (v *billingVendors) open() {
	v.mu.Lock()
	defer v.mu.Unlock()
	select {
	case <-v.release:
	default:
		close(v.release)
	}
}

// billed is what each vendor billed so far: calls and credits, by vendor.
func (v *billingVendors) billed() (calls, credits map[string]int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	calls, credits = map[string]int64{}, map[string]int64{}
	for _, name := range billedVendors {
		calls[name], credits[name] = v.calls[name], v.credits[name]
	}
	return calls, credits
}

func (v *billingVendors) holding(vendor string) int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.held[vendor]
}

// sourceFigures is a source of GET /v1/sources as this test reads it.
type sourceFigures struct {
	Name    string `json:"name"`
	Calls   int64  `json:"calls"`
	Hits    int64  `json:"hits"`
	Credits int64  `json:"vendor_credits"`
	Pending int64  `json:"pending"`
	Unknown int64  `json:"unknown"`
}

func readSources(t *testing.T, client *http.Client, base, key string) map[string]sourceFigures {
	t.Helper()
	status, _, raw := call(t, client, http.MethodGet, base+"/v1/sources", key, "")
	if status != http.StatusOK {
		t.Fatalf("GET /v1/sources: %d %s", status, raw)
	}
	var body struct {
		Sources []sourceFigures `json:"sources"`
	}
	if err := json.Unmarshal([]byte(raw), &body); err != nil {
		t.Fatal(err)
	}
	out := map[string]sourceFigures{}
	for _, s := range body.Sources {
		out[s.Name] = s
	}
	return out
}

// TestSpendOfAKilledServeIsWhatTheVendorsBilled runs the real binary on a waterfall of
// People Data Labs, Enrich Layer and Apollo with Apollo capped at 40 credits a month,
// kills it with SIGKILL while its tasks wait for the vendors' answers at each of the
// three, and starts it again on the same database: GET /v1/sources counts every call
// and credit the vendors billed, the killed process's included, and Apollo's cap is
// not passed, before the restart or after it. On both engines.
func TestSpendOfAKilledServeIsWhatTheVendorsBilled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills a serve process")
	}
	t.Parallel()
	bin := enrichdBinary(t)
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			db := engineDB(t, engine)
			spendSurvivesAKill(t, bin, db, engine)
		})
	}
}

func spendSurvivesAKill(t *testing.T, bin, db, engine string) {
	is := is.New(t)
	const budget, workers = 40, 8
	key := strings.TrimSpace(mustCLI(t, "keys", "create", "--org", "acme", "--db", db))
	mustCLI(t, "credits", "grant", "--org", "acme", "--amount", "1000", "--db", db)
	vendors := newBillingVendors(t)
	env := []string{"PDL_API_KEY=pdl-test-key", "ENRICHLAYER_API_KEY=el-test-key", "APOLLO_API_KEY=apollo-test-key"}
	args := []string{"--db", db, "--sources", "pdl,enrichlayer,apollo",
		// Each vendor is asked in turn until the company's size and description are known:
		// PDL knows neither, Enrich Layer the size, Apollo the description.
		"--fill-company", "employee_count,about",
		"--workers", fmt.Sprint(workers), "--lease", "1s", "--shutdown-grace", "1s", "--rate-ip", "0", "--rate-key", "0",
		"--apollo-monthly-budget", fmt.Sprint(budget),
		// Both serves hash their subjects under one key file (on SQLite, the one beside the
		// database; on PostgreSQL there is none unless given).
		"--secret-key-file", filepath.Join(t.TempDir(), "enrichd.secret-key")}
	for _, name := range billedVendors {
		args = append(args, "--"+name+"-url", vendors.srv.URL+"/"+name, "--"+name+"-rate", "0", "--"+name+"-concurrency", "16")
	}
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()

	var tasks []string
	submit := func(base, domain string) {
		t.Helper()
		status, r, raw := call(t, client, http.MethodPost, base+"/v1/companies/enrich", key, fmt.Sprintf(`{"domain": %q}`, domain))
		if status != http.StatusAccepted {
			t.Fatalf("enrich %s: %d %s", domain, status, raw)
		}
		tasks = append(tasks, r.Task.ID)
	}
	settle := func(base string) {
		t.Helper()
		for _, id := range tasks {
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
				_, r, raw := call(t, client, http.MethodGet, base+"/v1/tasks/"+id, key, "")
				if r.Task.Status != "queued" && r.Task.Status != "running" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("task %s did not settle: %s", id, raw)
				}
			}
		}
	}
	// onTheBooks checks that GET /v1/sources counts, of each vendor, at least what it
	// billed before the read: a request is on the books before it is sent.
	onTheBooks := func(base, when string) map[string]sourceFigures {
		t.Helper()
		calls, credits := vendors.billed()
		got := readSources(t, client, base, key)
		for _, name := range billedVendors {
			t.Logf("%s, %s: the vendor billed %d calls and %d credits; GET /v1/sources shows %d calls and %d credits (%d pending, %d unknown)",
				when, name, calls[name], credits[name], got[name].Calls, got[name].Credits, got[name].Pending, got[name].Unknown)
			if got[name].Calls < calls[name] || got[name].Credits < credits[name] {
				t.Errorf("%s, %s: GET /v1/sources shows %d calls and %d credits, the vendor billed %d and %d",
					when, name, got[name].Calls, got[name].Credits, calls[name], credits[name])
			}
		}
		if credits["apollo"] > budget {
			t.Errorf("%s: Apollo billed %d credits against a budget of %d", when, credits["apollo"], budget)
		}
		return got
	}

	first := startBinaryServe(t, bin, "first", env, args...)
	// Apollo's month comes to 4 credits short of its cap...
	for i := range budget - 4 {
		submit(first.base, fmt.Sprintf("p%d.example", i))
	}
	settle(first.base)
	onTheBooks(first.base, "before the kill")
	// ...and the next tasks wait at each vendor in turn: two at PDL, two at Enrich
	// Layer's resolve (PDL answered), four at Apollo (PDL and Enrich Layer answered),
	// which the cap leaves room for.
	held := map[string]int64{"pdl": 2, "enrichlayer": 2, "apollo": 4}
	for _, name := range billedVendors {
		for i := range held[name] {
			submit(first.base, fmt.Sprintf("hold-at-%s-%d.example", name, i))
		}
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		waiting := 0
		for _, name := range billedVendors {
			if vendors.holding(name) == held[name] {
				waiting++
			}
		}
		if waiting == len(billedVendors) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the vendors hold %d, %d and %d asks, want %v", vendors.holding("pdl"), vendors.holding("enrichlayer"), vendors.holding("apollo"), held)
		}
	}
	is.NoErr(first.cmd.Process.Signal(syscall.SIGKILL))
	<-first.exited

	second := startBinaryServe(t, bin, "second", env, args...)
	onTheBooks(second.base, "after the restart")
	// The killed process's tasks run again once their lease is out, the vendors now
	// answering: Apollo's cap is reached, and it is asked no more.
	vendors.open()
	settle(second.base)
	got := onTheBooks(second.base, "once every task settled")
	// The eight tasks the kill cut short had every ask they made on the books, those a
	// vendor had answered too (a task's asks are settled with it): eight at PDL, six at
	// Enrich Layer, four at Apollo, each counted at its full price, as unknown on SQLite
	// (a restart ends every ask of the process before), still pending on PostgreSQL
	// until the killed replica's heartbeat runs out.
	asked := map[string]int64{"pdl": 8, "enrichlayer": 6, "apollo": 4}
	var cut int64
	for _, name := range billedVendors {
		cut += got[name].Pending + got[name].Unknown
		if engine == "sqlite" {
			is.Equal(got[name].Pending, int64(0))
			is.Equal(got[name].Unknown, asked[name])
		}
	}
	is.Equal(cut, int64(18))
	is.Equal(got["apollo"].Credits, int64(budget))
}
