package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"enrichd/enrich"
	"enrichd/enrich/source"
	"enrichd/server"
	"enrichd/server/servertest"
	"enrichd/store"

	"github.com/matryer/is"
)

// fakeCompanyVendor serves one vendor's company-by-domain call in its published shape
// for every domain but those starting with "missing", and counts what it was asked.
type fakeCompanyVendor struct {
	srv  *httptest.Server
	mu   sync.Mutex
	asks []string // the domains asked, in order
}

func newFakeCompanyVendor(t *testing.T, path string, answer func(domain string) any) *fakeCompanyVendor {
	f := &fakeCompanyVendor{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		domain := r.URL.Query().Get("website") + r.URL.Query().Get("domain")
		f.mu.Lock()
		f.asks = append(f.asks, domain)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != path || strings.HasPrefix(domain, "missing") {
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"status": 404, "error": {"type": "not_found", "message": "No records were found matching your request"}}`))
			return
		}
		json.NewEncoder(w).Encode(answer(domain))
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeCompanyVendor) asked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.asks...)
}

// withPDLAndApollo puts the real PDL and Apollo adapters, in that order, on fake
// vendors that know every company.
func withPDLAndApollo(t *testing.T) (func(*server.Config), *fakeCompanyVendor, *fakeCompanyVendor) {
	pdl := newFakeCompanyVendor(t, "/v5/company/enrich", func(d string) any {
		return map[string]any{"status": 200, "likelihood": 8, "name": strings.TrimSuffix(d, ".com"), "display_name": strings.ToUpper(d[:1]) + d[1:],
			"website": d, "employee_count": 120}
	})
	apollo := newFakeCompanyVendor(t, "/api/v1/organizations/enrich", func(d string) any {
		return map[string]any{"organization": map[string]any{"id": "5e66b6381e05b4008c8331b8", "name": strings.ToUpper(d[:1]) + d[1:],
			"primary_domain": d, "industry": "information technology & services"}}
	})
	return func(c *server.Config) {
		p, err := source.NewPDL(source.VendorConfig{APIKey: "pdl-key-budget-test", BaseURL: pdl.srv.URL, Rate: 1000, Burst: 1000})
		if err != nil {
			t.Fatal(err)
		}
		a, err := source.NewApollo(source.VendorConfig{APIKey: "apollo-key-budget-test", BaseURL: apollo.srv.URL, Rate: 1000, Burst: 1000})
		if err != nil {
			t.Fatal(err)
		}
		c.Sources = append(c.Sources, p, a)
	}, pdl, apollo
}

func outcomes(calls []enrich.SourceCall) []string {
	var out []string
	for _, c := range calls {
		s := c.Name + ":" + c.Outcome
		if c.Reason != "" {
			s += "/" + c.Reason
		}
		out = append(out, s)
	}
	return out
}

// Through the real handler and workers: each vendor ask is counted against the
// organization whose task made it, by the vendor's price, and kept across a restart; a
// source over the organization's budget is skipped (outcome skipped, reason budget)
// and the next one asked; another organization's tasks still go to it.
func TestWaterfallSkipsASourceOverBudgetAndAsksTheNext(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	vendors, pdl, apollo := withPDLAndApollo(t)
	e := servertest.NewEnv(t, vendors)
	otherKey, otherID := e.NewOrg("other", 10)
	is.NoErr(e.DB.SetSourceBudget(context.Background(), e.OrgID, "pdl", 1))
	e.StartWorkers()

	first := e.EnrichDomain(e.Key, "initech.com")
	is.Equal(first.Str("task.status"), "succeeded")
	is.Equal(outcomes(e.TaskSources(e.OrgID, first.Str("task.id"))),
		[]string{"fake-network:miss", "dataset:miss", "pdl:hit", "apollo:skipped/filled"})

	second := e.EnrichDomain(e.Key, "globex.com")
	is.Equal(second.Str("task.status"), "succeeded")
	is.Equal(outcomes(e.TaskSources(e.OrgID, second.Str("task.id"))),
		[]string{"fake-network:miss", "dataset:miss", "pdl:skipped/budget", "apollo:hit"})
	is.Equal(pdl.asked(), []string{"initech.com"}) // never asked past the budget
	is.Equal(apollo.asked(), []string{"globex.com"})

	theirs := e.EnrichDomain(otherKey, "hooli.com") // acme's budget is acme's
	is.Equal(outcomes(e.TaskSources(otherID, theirs.Str("task.id")))[2], "pdl:hit")

	check := func() {
		_, mine, _ := e.SourcesOf(e.Key)
		is.Equal(mine["pdl"].SourceUse, store.SourceUse{Calls: 1, Hits: 1, Credits: 1})
		is.Equal(mine["apollo"].SourceUse, store.SourceUse{Calls: 1, Hits: 1, Credits: 1})
		is.Equal(*mine["pdl"].Budget.Remaining, int64(0))
		_, other, _ := e.SourcesOf(otherKey)
		is.Equal(other["pdl"].SourceUse, store.SourceUse{Calls: 1, Hits: 1, Credits: 1})
		is.Equal(other["apollo"].SourceUse, store.SourceUse{})
	}
	check()
	e.Restart()
	check()
}

// A task no source could answer because every priced one is over its budget fails
// provider_unavailable, saying so, and is refunded; no vendor is called.
func TestWaterfallAllSourcesOverBudgetFailsRefunded(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	vendors, pdl, apollo := withPDLAndApollo(t)
	e := servertest.NewEnv(t, vendors, func(c *server.Config) { c.SourceBudgets = map[string]int64{"pdl": 5, "apollo": 5} })
	ctx := context.Background()
	is.NoErr(e.DB.AddSourceSpend(ctx, e.OrgID, "pdl", false, e.Clock.Now(), store.SourceUse{Calls: 5, Hits: 5, Credits: 5}))
	is.NoErr(e.DB.AddSourceSpend(ctx, e.OrgID, "apollo", false, e.Clock.Now(), store.SourceUse{Calls: 5, Hits: 5, Credits: 5}))
	before := e.Balance("acme")
	e.StartWorkers()

	done := e.EnrichDomain(e.Key, "initech.com")
	is.Equal(done.Str("task.status"), "failed")
	is.Equal(done.Str("error.code"), "provider_unavailable")
	is.True(strings.Contains(done.Str("error.message"), "budget"))
	is.True(strings.Contains(done.Str("error.message"), "pdl, apollo"))
	is.Equal(outcomes(e.TaskSources(e.OrgID, done.Str("task.id"))),
		[]string{"fake-network:miss", "dataset:miss", "pdl:skipped/budget", "apollo:skipped/budget"})
	is.Equal(len(pdl.asked()), 0)
	is.Equal(len(apollo.asked()), 0)
	is.Equal(e.Balance("acme").Balance, before.Balance) // refunded
	_, by, _ := e.SourcesOf(e.Key)
	is.Equal(by["pdl"].Credits, int64(5)) // nothing added
}

// pricedPanicker is a priced vendor whose adapter panics on one domain and otherwise
// knows every company, at 1 vendor credit an answer.
type pricedPanicker struct{}

func (pricedPanicker) Name() string          { return "panicky" }
func (pricedPanicker) Prices() enrich.Prices { return enrich.Prices{} }
func (pricedPanicker) CompanyByDomain(ctx context.Context, tally *enrich.Tally, domain string) (*enrich.Company, error) {
	tally.Call()
	if domain == "boom.com" {
		panic("an answer the adapter cannot map")
	}
	tally.Charge(1)
	return &enrich.Company{Name: domain, Domain: enrich.Ptr(domain)}, nil
}
func (pricedPanicker) CompanyByURL(context.Context, *enrich.Tally, string) (*enrich.Company, error) {
	return nil, enrich.ErrNotFound
}
func (pricedPanicker) PersonByURL(context.Context, *enrich.Tally, string) (*enrich.Person, error) {
	return nil, enrich.ErrNotFound
}

// A source that panics in the middle of an ask fails its task, and the ask's hold on
// the budget goes with it: the organization's budget still admits what it has left.
func TestBudgetAskThatPanicsHoldsNothing(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, func(c *server.Config) { c.Sources = append(c.Sources, pricedPanicker{}) })
	is.NoErr(e.DB.SetSourceBudget(context.Background(), e.OrgID, "panicky", 2))
	e.StartWorkers()

	boom := e.EnrichDomain(e.Key, "boom.com")
	is.Equal(boom.Str("task.status"), "failed")
	is.Equal(boom.Str("error.code"), "internal_error")

	for _, domain := range []string{"first-paid.com", "second-paid.com"} {
		r := e.EnrichDomain(e.Key, domain)
		is.Equal(r.Str("task.status"), "succeeded") // within the budget of 2
		is.Equal(r.Str("provenance.name"), "panicky")
	}
	_, by, _ := e.SourcesOf(e.Key)
	is.Equal(by["panicky"].Credits, int64(2))
	is.Equal(by["panicky"].Errors, int64(1)) // the ask that panicked, counted
}
