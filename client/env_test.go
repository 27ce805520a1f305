package client

import (
	"context"
	_ "enrichd/store/sqlite" // the default engine
	"enrichd/wire"
	"enrichd/worker"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/netguard"
	"enrichd/server"
	"enrichd/store"
	"enrichd/store/storetest"
)

func TestMain(m *testing.M) {
	// Every response the tests receive must fit this package's types to the field.
	strictDecoding = true
	os.Exit(m.Run())
}

// env is a real enrichd (the server's handler and workers over a SQLite file in the
// test's directory) whose only source is a fake network, and a client of it.
type env struct {
	t     *testing.T
	db    *store.DB
	srv   *server.Server
	work  *worker.Pool
	url   string
	src   *fakeSource
	clock *storetest.Clock // the server's clock: it moves only when a test moves it
	key   string           // a key of org "acme", which holds 100 credits
	calls *recorder
	c     *Client
}

func newEnv(t *testing.T, configure ...func(*server.Config)) *env {
	t.Helper()
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "enrichd.db"), storetest.Schema(t), store.WithSubjectKey(storetest.SubjectKey))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	e := &env{t: t, db: db, src: newFakeSource(), calls: &recorder{next: http.DefaultTransport}}
	// Starting at the real time keeps webhook signatures within the tolerance.
	e.clock = storetest.NewClock(time.Now().UTC())
	db.Now = e.clock.Now
	cfg := server.DefaultConfig()
	cfg.Workers = 2
	cfg.PollInterval = 10 * time.Millisecond
	cfg.SweepInterval = 10 * time.Millisecond
	cfg.RateIP, cfg.RateKey = server.Rate{}, server.Rate{}
	cfg.WebhookPolicy = netguard.Policy{AllowPrivate: true} // receivers are httptest servers
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Sources = []enrich.Source{e.src}
	for _, c := range configure {
		c(&cfg)
	}
	e.srv, e.work = wire.New(db, cfg)
	hs := httptest.NewServer(e.srv)
	t.Cleanup(hs.Close)
	e.url = hs.URL
	e.key = e.newOrg("acme", 100)
	e.c = New(e.url, e.key, WithHTTPClient(&http.Client{Transport: e.calls}))
	return e
}

// startWorkers runs the task workers and the webhook sender until the test ends.
func (e *env) startWorkers() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.work.RunWorkers(ctx)
	}()
	e.t.Cleanup(func() { cancel(); <-done })
}

// newOrg creates an organization holding credits and returns a key of it.
func (e *env) newOrg(name string, credits int64) string {
	e.t.Helper()
	key, _, err := e.db.CreateKey(context.Background(), store.BySystem, name, "test", true)
	if err != nil {
		e.t.Fatal(err)
	}
	if credits > 0 {
		if _, err := e.db.GrantCredits(context.Background(), name, credits, nil); err != nil {
			e.t.Fatal(err)
		}
	}
	return key
}

func (e *env) balance(org string) int64 {
	e.t.Helper()
	b, err := e.db.CreditBalance(context.Background(), org)
	if err != nil {
		e.t.Fatal(err)
	}
	return b.Balance
}

// recorder is a transport that remembers every response's status and when its
// request was sent.
type recorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen []call
}

type call struct {
	method, path string
	status       int
	at           time.Time
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	at := time.Now()
	res, err := r.next.RoundTrip(req)
	if err == nil {
		r.mu.Lock()
		r.seen = append(r.seen, call{req.Method, req.URL.Path, res.StatusCode, at})
		r.mu.Unlock()
	}
	return res, err
}

func (r *recorder) calls(method, path string) []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []call
	for _, c := range r.seen {
		if c.method == method && c.path == path {
			out = append(out, c)
		}
	}
	return out
}

// fakeSource stands in for the professional network.
type fakeSource struct {
	mu        sync.Mutex
	companies map[string]*enrich.Company // by domain and by network URL
	people    map[string]*enrich.Person  // by network URL
	gate      chan struct{}              // when set, every call waits for it to close
}

func newFakeSource() *fakeSource {
	return &fakeSource{companies: map[string]*enrich.Company{}, people: map[string]*enrich.Person{}}
}

func (f *fakeSource) Name() string { return "fake-network" }

func (f *fakeSource) addCompany(name, domain string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := &enrich.Company{Name: name, EnrichmentStatus: enrich.StatusEnriched, Domain: &domain,
		NetworkURL:      enrich.Ptr("https://www.linkedin.com/company/" + strings.ToLower(name)),
		EmployeeCount:   enrich.Ptr(int64(42)),
		PrimaryIndustry: enrich.Ptr("Software Development"),
		Headquarters:    map[string]any{"city": "Lyon", "country": "FR"}}
	f.companies[domain] = c
	f.companies[*c.NetworkURL] = c
}

func (f *fakeSource) addPerson(slug, first, last, title, companyName string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	url := "https://www.linkedin.com/in/" + slug
	f.people[url] = &enrich.Person{NetworkURL: &url, FullName: enrich.Ptr(first + " " + last), FirstName: &first, LastName: &last,
		Headline: enrich.Ptr(title + " at " + companyName),
		Positions: []enrich.Position{{Title: &title, CompanyName: &companyName, StartDate: enrich.Ptr("2020-01-01"),
			StartDatePrecision: enrich.Ptr("year"), IsCurrent: true}}}
}

// hold makes every call wait until release is called.
func (f *fakeSource) hold() (release func()) {
	gate := make(chan struct{})
	f.mu.Lock()
	f.gate = gate
	f.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			f.gate = nil
			f.mu.Unlock()
			close(gate)
		})
	}
}

func (f *fakeSource) enter(ctx context.Context) error {
	f.mu.Lock()
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (f *fakeSource) company(ctx context.Context, key string) (*enrich.Company, error) {
	if err := f.enter(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.companies[key]; ok {
		cp := *c
		return &cp, nil
	}
	return nil, enrich.ErrNotFound
}

func (f *fakeSource) CompanyByDomain(ctx context.Context, tally *enrich.Tally, d string) (*enrich.Company, error) {
	return f.company(ctx, d)
}

func (f *fakeSource) CompanyByURL(ctx context.Context, tally *enrich.Tally, u string) (*enrich.Company, error) {
	return f.company(ctx, u)
}

func (f *fakeSource) PersonByURL(ctx context.Context, tally *enrich.Tally, u string) (*enrich.Person, error) {
	if err := f.enter(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.people[u]; ok {
		cp := *p
		return &cp, nil
	}
	return nil, enrich.ErrNotFound
}
