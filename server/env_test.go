package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	_ "enrichd/store/sqlite" // the default engine
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/server/dashboard"
	"enrichd/store"
	"enrichd/store/storetest"
	"enrichd/wire"
	"enrichd/worker"
)

// env is one enrichd: a real database (a SQLite file, or a fresh PostgreSQL database
// when ENRICHD_TEST_ENGINE=postgres), the real HTTP handler behind a loopback listener,
// and workers started on demand. Only the network is fake.
type env struct {
	t       testing.TB
	path    string // the database's DSN: a file path, or a postgres:// URL
	db      *store.DB
	cfg     server.Config
	srv     *server.Server
	work    *worker.Pool // the background work: startWorkers runs it
	http    *httptest.Server
	clock   *storetest.Clock
	net     *fakeNetwork
	logs    *syncBuffer
	key     string // a key of org "acme", which holds 100 credits
	orgID   string
	stopped chan struct{}
	stop    context.CancelFunc
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// newEnv starts enrichd with the fake network as its only source. Workers are not
// started: call startWorkers. Each option is a func(*server.Config), applied in
// order, or a dbAt.
func newEnv(t testing.TB, opts ...any) *env {
	t.Helper()
	e := &env{t: t, net: newFakeNetwork(), logs: &syncBuffer{}}
	// The clock starts at the real time: task deadlines are real contexts.
	e.clock = storetest.NewClock(time.Now().UTC())
	e.cfg = server.DefaultConfig()
	e.cfg.Workers = 4
	e.cfg.PollInterval = 10 * time.Millisecond
	e.cfg.SweepInterval = 10 * time.Millisecond
	e.cfg.RateIP, e.cfg.RateKey = server.Rate{}, server.Rate{}
	e.cfg.Logger = slog.New(slog.NewJSONHandler(e.logs, nil))
	for _, o := range opts {
		switch o := o.(type) {
		case func(*server.Config):
			o(&e.cfg)
		case dbAt:
			sqliteOnly(t, "the test names the database file")
			e.path = string(o)
		default:
			t.Fatalf("newEnv: an option is a func(*server.Config) or a dbAt, not a %T", o)
		}
	}
	if e.path == "" && onPostgres() {
		e.path = postgresDatabase(t)
	}
	if e.path == "" {
		e.path = filepath.Join(t.TempDir(), "enrichd.db")
	}
	e.open()
	t.Cleanup(e.close)
	e.key, e.orgID = e.newOrg("acme", 100)
	return e
}

// dbAt is an option of newEnv: the path of the database file, instead of one in a new
// temporary directory.
type dbAt string

// open opens the database and builds the server on it.
func (e *env) open() {
	// Closed by env.close, which a restart calls in the middle of a test.
	db, err := store.Open(context.Background(), e.path, storetest.Schema(e.t), store.WithSubjectKey(storetest.SubjectKey))
	if err != nil {
		e.t.Fatal(err)
	}
	db.Now = e.clock.Now
	e.db = db
	cfg := e.cfg
	// Sources a test configures are asked after the fake network and the dataset.
	cfg.Sources = append([]enrich.Source{e.net, db.Dataset()}, e.cfg.Sources...)
	cfg.Dashboard = dashboard.New
	e.srv, e.work = wire.New(db, cfg)
	e.http = httptest.NewServer(e.srv)
}

// close stops workers, the listener and the database, as a shutdown would.
func (e *env) close() {
	e.stopWorkers()
	if e.http != nil {
		e.http.Close()
		e.http = nil
	}
	if e.db != nil {
		e.db.Close()
		e.db = nil
	}
}

// restart closes everything and opens the same database again.
func (e *env) restart() {
	e.close()
	e.open()
}

func (e *env) startWorkers() {
	ctx, cancel := context.WithCancel(context.Background())
	e.stop, e.stopped = cancel, make(chan struct{})
	go func() {
		defer close(e.stopped)
		e.work.RunWorkers(ctx)
	}()
}

func (e *env) stopWorkers() {
	if e.stop != nil {
		e.stop()
		<-e.stopped
		e.stop = nil
	}
}

// newOrg creates an organization holding credits and returns a key of it.
func (e *env) newOrg(name string, credits int64) (key, orgID string) {
	ctx := context.Background()
	key, k, err := e.db.CreateKey(ctx, store.BySystem, name, "test", true)
	if err != nil {
		e.t.Fatal(err)
	}
	if credits > 0 {
		if _, err := e.db.GrantCredits(ctx, name, credits, nil); err != nil {
			e.t.Fatal(err)
		}
	}
	return key, k.OrgID
}

func (e *env) importJSONL(lines ...string) {
	if _, err := e.db.Import(context.Background(), strings.NewReader(strings.Join(lines, "\n")), enrich.Normalizer{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) balance(org string) store.Balance {
	b, err := e.db.CreditBalance(context.Background(), org)
	if err != nil {
		e.t.Fatal(err)
	}
	if b.Balance != b.Granted-b.Charged+b.Refund-b.Expired {
		e.t.Fatalf("ledger does not add up: %+v", b)
	}
	return b
}

type response struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

// str reads a string at a dotted path of the JSON body ("task.status"); a number
// indexes an array ("data.0.id").
func (r *response) str(path string) string {
	v, _ := r.get(path).(string)
	return v
}

func (r *response) get(path string) any {
	var v any = r.body
	for _, part := range strings.Split(path, ".") {
		if list, ok := v.([]any); ok {
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(list) {
				return nil
			}
			v = list[i]
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[part]
	}
	return v
}

func (r *response) has(path string) bool {
	var v any = r.body
	parts := strings.Split(path, ".")
	for _, part := range parts {
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		if v, ok = m[part]; !ok {
			return false
		}
	}
	return true
}

// do sends a request with the env's key; headers are name, value pairs and may
// replace Authorization ("" removes it).
func (e *env) do(method, path string, body any, headers ...string) *response {
	e.t.Helper()
	var rd io.Reader
	var sent []byte // kept for the OpenAPI check
	switch b := body.(type) {
	case nil:
	case string:
		sent = []byte(b)
	case []byte:
		sent = b
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		sent = raw
	}
	if body != nil {
		rd = bytes.NewReader(sent)
	}
	req, err := http.NewRequest(method, e.http.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	out := &response{status: res.StatusCode, header: res.Header}
	out.raw, _ = io.ReadAll(res.Body)
	if method != http.MethodHead && strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(out.raw, &out.body); err != nil {
			e.t.Fatalf("%s %s: body is not JSON: %v: %s", method, path, err, out.raw)
		}
	}
	e.checkOpenAPI(req, sent, out)
	return out
}

// waitSettled polls a task until it leaves queued and running.
func (e *env) waitSettled(id string, headers ...string) *response {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := e.do("GET", "/v1/tasks/"+id, nil, headers...)
		if r.status != 200 {
			e.t.Fatalf("GET task %s: %d %s", id, r.status, r.raw)
		}
		if s := r.str("task.status"); s != "queued" && s != "running" {
			return r
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("task %s did not settle: %s", id, r.raw)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fakeNetwork stands in for the professional network.
type fakeNetwork struct {
	mu        sync.Mutex
	companies map[string]*enrich.Company // by domain and by network URL
	people    map[string]*enrich.Person  // by network URL
	down      bool
	gate      chan struct{} // when set, every call waits for it to close
	calls     atomic.Int64
	searches  atomic.Int64 // staff searches
	profiles  atomic.Int64 // profile retrievals
}

func newFakeNetwork() *fakeNetwork {
	return &fakeNetwork{companies: map[string]*enrich.Company{}, people: map[string]*enrich.Person{}}
}

func (f *fakeNetwork) Name() string { return "fake-network" }

func (f *fakeNetwork) addCompany(c *enrich.Company) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.Domain != nil {
		f.companies[*c.Domain] = c
	}
	if c.NetworkURL != nil {
		f.companies[*c.NetworkURL] = c
	}
}

func (f *fakeNetwork) addPerson(p *enrich.Person) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.people[*p.NetworkURL] = p
}

func (f *fakeNetwork) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

// hold makes calls wait until the returned func is called.
func (f *fakeNetwork) hold() (release func()) {
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

func (f *fakeNetwork) enter(ctx context.Context) error {
	f.calls.Add(1)
	f.mu.Lock()
	gate, down := f.gate, f.down
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if down {
		return fmt.Errorf("fake network is down: %w", enrich.ErrUnavailable)
	}
	return nil
}

func (f *fakeNetwork) company(ctx context.Context, key string) (*enrich.Company, error) {
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

func (f *fakeNetwork) CompanyByDomain(ctx context.Context, tally *enrich.Tally, d string) (*enrich.Company, error) {
	return f.company(ctx, d)
}

func (f *fakeNetwork) CompanyByURL(ctx context.Context, tally *enrich.Tally, u string) (*enrich.Company, error) {
	return f.company(ctx, u)
}

func (f *fakeNetwork) PersonByURL(ctx context.Context, tally *enrich.Tally, u string) (*enrich.Person, error) {
	f.profiles.Add(1)
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

// SearchStaff lists the people who have or had a position at the company (by its
// page) and whose names may be among q.Names, as a network's search does: leads, some
// of whom have left.
func (f *fakeNetwork) SearchStaff(ctx context.Context, tally *enrich.Tally, q enrich.StaffQuery) ([]enrich.StaffMember, error) {
	f.searches.Add(1)
	if err := f.enter(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []enrich.StaffMember
	for url, p := range f.people {
		at := false
		for _, pos := range p.Positions {
			at = at || q.Company.NetworkURL != nil && pos.CompanyNetworkURL != nil && *pos.CompanyNetworkURL == *q.Company.NetworkURL
		}
		if at && q.MayBe(p) {
			n := enrich.NameOf(p)
			out = append(out, enrich.StaffMember{NetworkURL: url, FullName: n.First + " " + n.Last})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NetworkURL < out[j].NetworkURL })
	return out, nil
}

// employee is a profile on the fake network with one position at the company whose
// page is companyURL; ended makes it a past position.
func employee(slug, first, last, companyURL, title, city, country string, ended bool) *enrich.Person {
	pos := enrich.Position{Title: &title, CompanyName: enrich.Ptr("Acme"), CompanyNetworkURL: &companyURL,
		StartDate: enrich.Ptr("2020-01-01"), StartDatePrecision: enrich.Ptr("year"), IsCurrent: !ended}
	if ended {
		pos.EndDate, pos.EndDatePrecision = enrich.Ptr("2023-01-01"), enrich.Ptr("year")
	}
	return &enrich.Person{NetworkURL: enrich.Ptr("https://www.linkedin.com/in/" + slug), FullName: enrich.Ptr(first + " " + last),
		FirstName: &first, LastName: &last, City: &city, CountryCode: &country, Positions: []enrich.Position{pos}}
}

func company(name, domain string) *enrich.Company {
	slug := strings.ToLower(name)
	return &enrich.Company{Name: name, EnrichmentStatus: "enriched", Domain: &domain,
		NetworkURL: enrich.Ptr("https://www.linkedin.com/company/" + slug), EmployeeCount: enrich.Ptr(int64(42))}
}

func storeOutcomeFailed() store.Outcome {
	return store.Outcome{Err: &enrich.TaskError{Code: enrich.CodeInternalError, Message: "late"}}
}
