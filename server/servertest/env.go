package servertest

import (
	"bytes"
	"context"
	"encoding/json"
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

	"enrichd/store"
	_ "enrichd/store/sqlite" // the default engine

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/server/dashboard"
	"enrichd/store/storetest"
	"enrichd/wire"
	"enrichd/worker"
)

// Env is one enrichd: a real database (a SQLite file, or a fresh PostgreSQL database
// when ENRICHD_TEST_ENGINE=postgres), the real HTTP handler behind a loopback listener,
// and workers started on demand. Only the network is fake.
type Env struct {
	T       testing.TB
	Path    string // the database's DSN: a file path, or a postgres:// URL
	DB      *store.DB
	Cfg     server.Config
	Srv     *server.Server
	Work    *worker.Pool // the background work: StartWorkers runs it
	HTTP    *httptest.Server
	Clock   *storetest.Clock
	Net     *FakeNetwork
	Logs    *syncBuffer
	Key     string // a key of org "acme", which holds 100 credits
	OrgID   string
	Stopped chan struct{}
	Stop    context.CancelFunc
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

// NewEnv starts enrichd with the fake network as its only source. Workers are not
// started: call StartWorkers. Each option is a func(*server.Config), applied in
// order, or a DBAt.
func NewEnv(t testing.TB, opts ...any) *Env {
	t.Helper()
	e := &Env{T: t, Net: NewFakeNetwork(), Logs: &syncBuffer{}}
	// The clock starts at the real time: task deadlines are real contexts.
	e.Clock = storetest.NewClock(time.Now().UTC())
	e.Cfg = server.DefaultConfig()
	e.Cfg.Workers = 4
	// An enqueue wakes a worker, so polling is only the fallback (a retry coming due,
	// a lease running out). At 10 ms, the idle polls and sweeps of the tests running
	// at once were over half the statements the HTTP suite sent PostgreSQL (409,000
	// of them, against 177,000 at 100 ms) and a share of the CPU the suite is short of.
	e.Cfg.PollInterval = 100 * time.Millisecond
	e.Cfg.SweepInterval = 100 * time.Millisecond
	e.Cfg.RateIP, e.Cfg.RateKey = server.Rate{}, server.Rate{}
	e.Cfg.Logger = slog.New(slog.NewJSONHandler(e.Logs, nil))
	for _, o := range opts {
		switch o := o.(type) {
		case func(*server.Config):
			o(&e.Cfg)
		case DBAt:
			SQLiteOnly(t, "the test names the database file")
			e.Path = string(o)
		default:
			t.Fatalf("NewEnv: an option is a func(*server.Config) or a DBAt, not a %T", o)
		}
	}
	if e.Path == "" && OnPostgres() {
		e.Path = postgresDatabase(t)
	}
	if e.Path == "" {
		e.Path = filepath.Join(t.TempDir(), "enrichd.db")
		copySQLiteTemplate(t, e.Path)
	}
	e.Open()
	t.Cleanup(e.Close)
	e.Key, e.OrgID = e.NewOrg("acme", 100)
	return e
}

// DBAt is an option of NewEnv: the path of the database file, instead of one in a new
// temporary directory.
type DBAt string

// Open opens the database and builds the server on it.
func (e *Env) Open() {
	// Closed by env.close, which a restart calls in the middle of a test.
	db, err := store.Open(context.Background(), e.Path, storetest.Schema(e.T), store.WithSubjectKey(storetest.SubjectKey))
	if err != nil {
		e.T.Fatal(err)
	}
	db.Now = e.Clock.Now
	e.DB = db
	cfg := e.Cfg
	// Sources a test configures are asked after the fake network and the dataset.
	cfg.Sources = append([]enrich.Source{e.Net, db.Dataset()}, e.Cfg.Sources...)
	cfg.Dashboard = dashboard.New
	e.Srv, e.Work = wire.New(db, cfg)
	e.HTTP = httptest.NewServer(e.Srv)
}

// Close stops workers, the listener and the database, as a shutdown would.
func (e *Env) Close() {
	e.StopWorkers()
	if e.HTTP != nil {
		e.HTTP.Close()
		e.HTTP = nil
	}
	if e.DB != nil {
		e.DB.Close()
		e.DB = nil
	}
}

// Restart closes everything and opens the same database again.
func (e *Env) Restart() {
	e.Close()
	e.Open()
}

func (e *Env) StartWorkers() {
	ctx, cancel := context.WithCancel(context.Background())
	e.Stop, e.Stopped = cancel, make(chan struct{})
	go func() {
		defer close(e.Stopped)
		e.Work.RunWorkers(ctx)
	}()
}

func (e *Env) StopWorkers() {
	if e.Stop != nil {
		e.Stop()
		<-e.Stopped
		e.Stop = nil
	}
}

// NewOrg creates an organization holding credits and returns a key of it.
func (e *Env) NewOrg(name string, credits int64) (key, orgID string) {
	ctx := context.Background()
	key, k, err := e.DB.CreateKey(ctx, store.BySystem, name, "test", true)
	if err != nil {
		e.T.Fatal(err)
	}
	if credits > 0 {
		if _, err := e.DB.GrantCredits(ctx, name, credits, nil); err != nil {
			e.T.Fatal(err)
		}
	}
	return key, k.OrgID
}

func (e *Env) ImportJSONL(lines ...string) {
	if _, err := e.DB.Import(context.Background(), strings.NewReader(strings.Join(lines, "\n")), enrich.Normalizer{}); err != nil {
		e.T.Fatal(err)
	}
}

func (e *Env) Balance(org string) store.Balance {
	b, err := e.DB.CreditBalance(context.Background(), org)
	if err != nil {
		e.T.Fatal(err)
	}
	if b.Balance != b.Granted-b.Charged+b.Refund-b.Expired {
		e.T.Fatalf("ledger does not add up: %+v", b)
	}
	return b
}

type Response struct {
	Status int
	Header http.Header
	Raw    []byte
	Body   map[string]any
}

// Str reads a string at a dotted path of the JSON body ("task.status"); a number
// indexes an array ("data.0.id").
func (r *Response) Str(path string) string {
	v, _ := r.Get(path).(string)
	return v
}

func (r *Response) Get(path string) any {
	var v any = r.Body
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

func (r *Response) Has(path string) bool {
	var v any = r.Body
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

// Do sends a request with the env's key; headers are name, value pairs and may
// replace Authorization ("" removes it).
func (e *Env) Do(method, path string, body any, headers ...string) *Response {
	e.T.Helper()
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
			e.T.Fatal(err)
		}
		sent = raw
	}
	if body != nil {
		rd = bytes.NewReader(sent)
	}
	req, err := http.NewRequest(method, e.HTTP.URL+path, rd)
	if err != nil {
		e.T.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.Key)
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
	res, err := Client.Do(req)
	if err != nil {
		e.T.Fatal(err)
	}
	defer res.Body.Close()
	out := &Response{Status: res.StatusCode, Header: res.Header}
	out.Raw, _ = io.ReadAll(res.Body)
	if method != http.MethodHead && strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(out.Raw, &out.Body); err != nil {
			e.T.Fatalf("%s %s: body is not JSON: %v: %s", method, path, err, out.Raw)
		}
	}
	e.checkOpenAPI(req, sent, out)
	return out
}

// SettleWithin is how long the tests that poll wait for what a test expects to
// happen (a task to settle, a delivery, a metric). Only a failing test waits it whole:
// it is long enough that a busy machine, running the tests in parallel, fails nothing
// merely for being slow.
const SettleWithin = time.Minute

// WaitSettled polls a task until it leaves queued and running.
func (e *Env) WaitSettled(id string, headers ...string) *Response {
	e.T.Helper()
	deadline := time.Now().Add(SettleWithin)
	for {
		r := e.Do("GET", "/v1/tasks/"+id, nil, headers...)
		if r.Status != 200 {
			e.T.Fatalf("GET task %s: %d %s", id, r.Status, r.Raw)
		}
		if s := r.Str("task.status"); s != "queued" && s != "running" {
			return r
		}
		if time.Now().After(deadline) {
			e.T.Fatalf("task %s did not settle: %s", id, r.Raw)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// FakeNetwork stands in for the professional network.
type FakeNetwork struct {
	mu        sync.Mutex
	companies map[string]*enrich.Company // by domain and by network URL
	people    map[string]*enrich.Person  // by network URL
	down      bool
	gate      chan struct{} // when set, every call waits for it to close
	Calls     atomic.Int64
	Searches  atomic.Int64 // staff searches
	Profiles  atomic.Int64 // profile retrievals
}

func NewFakeNetwork() *FakeNetwork {
	return &FakeNetwork{companies: map[string]*enrich.Company{}, people: map[string]*enrich.Person{}}
}

func (f *FakeNetwork) Name() string { return "fake-network" }

func (f *FakeNetwork) AddCompany(c *enrich.Company) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.Domain != nil {
		f.companies[*c.Domain] = c
	}
	if c.NetworkURL != nil {
		f.companies[*c.NetworkURL] = c
	}
}

func (f *FakeNetwork) AddPerson(p *enrich.Person) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.people[*p.NetworkURL] = p
}

func (f *FakeNetwork) SetDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

// Hold makes calls wait until the returned func is called.
func (f *FakeNetwork) Hold() (release func()) {
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

func (f *FakeNetwork) enter(ctx context.Context) error {
	f.Calls.Add(1)
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

func (f *FakeNetwork) company(ctx context.Context, key string) (*enrich.Company, error) {
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

func (f *FakeNetwork) CompanyByDomain(ctx context.Context, tally *enrich.Tally, d string) (*enrich.Company, error) {
	return f.company(ctx, d)
}

func (f *FakeNetwork) CompanyByURL(ctx context.Context, tally *enrich.Tally, u string) (*enrich.Company, error) {
	return f.company(ctx, u)
}

func (f *FakeNetwork) PersonByURL(ctx context.Context, tally *enrich.Tally, u string) (*enrich.Person, error) {
	f.Profiles.Add(1)
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
func (f *FakeNetwork) SearchStaff(ctx context.Context, tally *enrich.Tally, q enrich.StaffQuery) ([]enrich.StaffMember, error) {
	f.Searches.Add(1)
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

// Employee is a profile on the fake network with one position at the company whose
// page is companyURL; ended makes it a past position.
func Employee(slug, first, last, companyURL, title, city, country string, ended bool) *enrich.Person {
	pos := enrich.Position{Title: &title, CompanyName: enrich.Ptr("Acme"), CompanyNetworkURL: &companyURL,
		StartDate: enrich.Ptr("2020-01-01"), StartDatePrecision: enrich.Ptr("year"), IsCurrent: !ended}
	if ended {
		pos.EndDate, pos.EndDatePrecision = enrich.Ptr("2023-01-01"), enrich.Ptr("year")
	}
	return &enrich.Person{NetworkURL: enrich.Ptr("https://www.linkedin.com/in/" + slug), FullName: enrich.Ptr(first + " " + last),
		FirstName: &first, LastName: &last, City: &city, CountryCode: &country, Positions: []enrich.Position{pos}}
}

func Company(name, domain string) *enrich.Company {
	slug := strings.ToLower(name)
	return &enrich.Company{Name: name, EnrichmentStatus: "enriched", Domain: &domain,
		NetworkURL: enrich.Ptr("https://www.linkedin.com/company/" + slug), EmployeeCount: enrich.Ptr(int64(42))}
}

func StoreOutcomeFailed() store.Outcome {
	return store.Outcome{Err: &enrich.TaskError{Code: enrich.CodeInternalError, Message: "late"}}
}
