// Package bench owns `enrichd bench`: it starts the real service in-process on a
// loopback port over a temporary database and the synthetic `sim` source, drives it
// through real HTTP with a bounded load generator, and measures, in the same run, the
// raw SQLite ceiling of the same work with the store's own connection setup, or (the
// peer scenario) two simpler servers answering the same requests: the bare HTTP stack
// and a naive SQLite service.
package bench

import (
	"context"
	_ "enrichd/store/postgres" // the engine several replicas share
	_ "enrichd/store/sqlite"   // the default engine
	"enrichd/wire"
	"enrichd/worker"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"enrichd/enrich"
	"enrichd/enrich/source"
	"enrichd/netguard"
	"enrichd/server"
	"enrichd/store"
)

// Scenarios in the order they run. tail, one long run of store hits cut into
// windows, runs only when named, like peer, which measures two
// servers besides enrichd, with --duration for each. waterfall enriches the same
// companies four times through three synthetic vendors. growth fills a database with a million tasks
// (about a minute and half a gigabyte of temporary disk), and replicas needs a
// PostgreSQL database (Options.DB), so they run only when named.
var (
	Scenarios        = []string{"enqueue-hit", "enqueue-miss", "read", "deliver", "fair", "mixed", "memory", "peer", "growth", "replicas", "email-quality", "waterfall", "tail"}
	DefaultScenarios = Scenarios[:7]
)

// Options is one bench run.
type Options struct {
	Schema      string        // the text of schema.sql
	Duration    time.Duration // how long each timed scenario drives load
	Concurrency int           // clients sending at once
	Scenarios   []string      // which to run; all when empty
	Workers     int           // task workers of the service
	GrowthTasks int           // tasks the growth scenario stores before measuring again
	FairBulk    int           // tasks the first organization queues in the fair scenario; 5,000 when 0
	Progress    io.Writer     // a line per scenario as it starts; nil for none

	// The memory scenario drives the mixed load against a serve process of its own for
	// MemoryLoad (60 s when 0), then leaves it idle for MemoryIdle (30 s when 0).
	MemoryLoad, MemoryIdle time.Duration
	// ServeCommand starts that process: the program and its arguments up to and
	// including "serve"; this program's own binary when empty. The scenario adds the
	// flags it needs, then ServeArgs.
	ServeCommand []string
	ServeArgs    []string

	// The replicas scenario starts, for each count in Replicas (1, 2 and 3 when empty),
	// that many serve processes on the PostgreSQL database DB, each on a schema of its
	// own that is dropped afterwards, and spreads the mixed load over them in turn.
	DB       string
	Replicas []int

	// Rounds is how many times the peer scenario drives each of its servers in turn,
	// each for Duration/Rounds; 3 when 0.
	Rounds int

	// EmailCompanies is how many sim companies the email-quality scenario writes
	// addresses for; 50 when 0.
	EmailCompanies int
	// EmailNames are the name sets the email-quality scenario's staff are drawn from
	// (source.SimNamesLists, source.SimNamesHeldOut); both when empty.
	EmailNames []string

	// WaterfallSubjects is how many companies the waterfall scenario enriches in each
	// of its passes; 10,000 when 0.
	WaterfallSubjects int

	// TailWindow is the length of the tail scenario's windows; 10 s when 0.
	TailWindow time.Duration
}

// Result is one scenario's figures.
type Result struct {
	Scenario string `json:"scenario"`
	// Unit is what Rate counts per second; or "s" for fair (the seconds the small
	// organization waited), "MB" for memory (the peak resident set under load), "B/task"
	// for storage (the file's bytes per stored task).
	Unit   string  `json:"unit"`
	Rate   float64 `json:"rate"`
	Count  int64   `json:"count"` // requests, tasks or deliveries measured; for storage, the tasks stored
	Errors int64   `json:"errors"`
	P50ms  float64 `json:"p50_ms"`
	P99ms  float64 `json:"p99_ms"`
	// Ceiling is the raw SQLite rate of the same work, CeilingUnit what it counts.
	Ceiling     float64 `json:"ceiling,omitempty"`
	CeilingUnit string  `json:"ceiling_unit,omitempty"`
	Ratio       float64 `json:"ratio,omitempty"` // Rate / Ceiling
	Note        string  `json:"note,omitempty"`

	Memory  *Memory  `json:"memory,omitempty"`  // the memory scenario's
	Storage *Storage `json:"storage,omitempty"` // the storage row's

	EmailQuality *EmailQuality `json:"email_quality,omitempty"` // the email-quality scenario's
	Peer         *Peer         `json:"peer,omitempty"`          // the peer scenario's
	Waterfall    *Waterfall    `json:"waterfall,omitempty"`     // the waterfall scenario's
	Tail         *Tail         `json:"tail,omitempty"`          // the tail scenario's
}

// Report is a whole run.
type Report struct {
	Date        time.Time `json:"date"`
	CPUs        int       `json:"cpus"`
	GoVersion   string    `json:"go_version"`
	Concurrency int       `json:"concurrency"`
	Duration    string    `json:"duration"`
	Results     []Result  `json:"results"`
}

// Run runs the scenarios and returns their figures.
func Run(ctx context.Context, opt Options) (*Report, error) {
	if opt.Duration <= 0 || opt.Concurrency <= 0 {
		return nil, errors.New("bench: duration and concurrency must be positive")
	}
	names := opt.Scenarios
	if len(names) == 0 {
		names = DefaultScenarios
	}
	for _, n := range names {
		if !slices.Contains(Scenarios, n) {
			return nil, fmt.Errorf("unknown scenario %q; the scenarios are %s", n, strings.Join(Scenarios, ", "))
		}
	}
	ceil := &ceilings{opt: opt}
	rep := &Report{Date: time.Now().UTC(), CPUs: runtime.NumCPU(), GoVersion: runtime.Version(),
		Concurrency: opt.Concurrency, Duration: opt.Duration.String()}
	for _, name := range Scenarios {
		if !slices.Contains(names, name) {
			continue
		}
		if opt.Progress != nil {
			fmt.Fprintf(opt.Progress, "running %s ...\n", name)
		}
		var res Result
		var err error
		switch name {
		case "enqueue-hit":
			res, err = enqueueHit(ctx, opt)
			if err == nil {
				err = ceil.withWrite(ctx, &res)
			}
		case "enqueue-miss":
			res, err = enqueueMiss(ctx, opt)
			if err == nil {
				err = ceil.withWrite(ctx, &res)
			}
		case "read":
			res, err = read(ctx, opt)
			if err == nil {
				err = ceil.withRead(ctx, &res)
			}
		case "deliver":
			res, err = deliver(ctx, opt)
			if err == nil {
				err = ceil.withWrite(ctx, &res)
			}
		case "fair":
			res, err = fair(ctx, opt)
		case "mixed":
			var more []Result
			if more, err = mixed(ctx, opt, ceil); err == nil {
				rep.Results = append(rep.Results, more...)
				continue
			}
		case "memory":
			res, err = memory(ctx, opt)
		case "peer":
			var more []Result
			if more, err = peer(ctx, opt); err == nil {
				rep.Results = append(rep.Results, more...)
				continue
			}
		case "email-quality":
			res, err = emailQuality(ctx, opt)
		case "waterfall":
			res, err = waterfall(ctx, opt)
		case "tail":
			res, err = tail(ctx, opt)
		case "growth":
			var more []Result
			if more, err = growth(ctx, opt); err == nil {
				rep.Results = append(rep.Results, more...)
				continue
			}
		case "replicas":
			var more []Result
			if more, err = replicaRuns(ctx, opt); err == nil {
				rep.Results = append(rep.Results, more...)
				continue
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		rep.Results = append(rep.Results, res)
	}
	return rep, nil
}

// env is one enrichd under test: a temporary database, the real server on a loopback
// listener, its workers running.
type env struct {
	dir    string
	db     *store.DB
	srv    *server.Server
	work   *worker.Pool
	http   *http.Server
	base   string
	client *http.Client // for the few requests outside the load (readiness)
	raw    *rawClient   // the load's
	spread *spread      // instead of raw, when the load goes to several processes
	stop   context.CancelFunc
	done   chan struct{}
}

func newEnv(ctx context.Context, opt Options, configure func(*server.Config)) (*env, error) {
	dir, err := os.MkdirTemp("", "enrichd-bench-")
	if err != nil {
		return nil, err
	}
	e := &env{dir: dir}
	if e.db, err = store.Open(ctx, e.dbPath(), opt.Schema, subjectKey()); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cfg := server.DefaultConfig()
	cfg.Workers = opt.Workers
	cfg.MaxBacklog = 1 << 40
	cfg.RateIP, cfg.RateKey = server.Rate{}, server.Rate{}
	// The log line of every request is part of the cost measured; it goes nowhere.
	cfg.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	cfg.Sources = []enrich.Source{&source.Sim{NetworkHost: enrich.DefaultNetworkHost}}
	cfg.WebhookPolicy = netguard.Policy{AllowPrivate: true} // the receiver is on loopback
	if configure != nil {
		configure(&cfg)
	}
	e.srv, e.work = wire.New(e.db, cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.close()
		return nil, err
	}
	e.base = "http://" + ln.Addr().String()
	e.http = &http.Server{Handler: e.srv, ReadHeaderTimeout: 10 * time.Second}
	go e.http.Serve(ln)
	e.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute}}
	e.raw = newRawClient(ln.Addr().String())
	return e, nil
}

// dbPath is the SQLite file of the enrichd under test.
func (e *env) dbPath() string { return filepath.Join(e.dir, "bench.db") }

func (e *env) startWorkers() {
	ctx, cancel := context.WithCancel(context.Background())
	e.stop, e.done = cancel, make(chan struct{})
	go func() {
		defer close(e.done)
		e.work.RunWorkers(ctx)
	}()
}

func (e *env) stopWorkers() {
	if e.stop != nil {
		e.stop()
		<-e.done
		e.stop = nil
	}
}

func (e *env) close() {
	e.stopWorkers()
	if e.http != nil {
		e.http.Close()
	}
	if e.client != nil {
		e.client.CloseIdleConnections()
	}
	if e.raw != nil {
		e.raw.closeIdle()
	}
	if e.db != nil {
		e.db.Close()
	}
	os.RemoveAll(e.dir)
}

// newOrg creates an organization with plenty of credits and returns a key of it.
func (e *env) newOrg(ctx context.Context, name string) (key, orgID string, err error) {
	key, k, err := e.db.CreateKey(ctx, store.BySystem, name, "bench", true)
	if err != nil {
		return "", "", err
	}
	_, err = e.db.GrantCredits(ctx, name, 1<<40, nil)
	return key, k.OrgID, err
}

// startEnv starts an enrichd with one organization, "bench", and its workers running.
func startEnv(ctx context.Context, opt Options) (e *env, key, orgID string, err error) {
	if e, err = newEnv(ctx, opt, nil); err != nil {
		return nil, "", "", err
	}
	if key, orgID, err = e.newOrg(ctx, "bench"); err != nil {
		e.close()
		return nil, "", "", err
	}
	e.startWorkers()
	return e, key, orgID, nil
}

// post sends a JSON body and returns the status and the task id of an enqueue
// response (or "" for other bodies).
func (e *env) post(ctx context.Context, key, path, body string) (int, string, error) {
	a, err := e.do(ctx, key, http.MethodPost, path, body, "")
	return a.status, a.taskID, err
}

func (e *env) get(ctx context.Context, key, path string) (int, string, error) {
	a, err := e.do(ctx, key, http.MethodGet, path, "", "")
	return a.status, a.taskID, err
}

// answer is what the load generator reads of a response: no more than it needs.
type answer struct {
	status   int
	taskID   string
	replayed bool // Idempotent-Replayed: true
	body     []byte
}

// do sends a request, with an Idempotency-Key when idemKey is not empty, through the
// bench's lean client (see rawClient).
func (e *env) do(ctx context.Context, key, method, path, body, idemKey string) (answer, error) {
	if e.spread != nil {
		return e.spread.pick().do(ctx, key, method, path, body, idemKey)
	}
	return e.raw.do(ctx, key, method, path, body, idemKey)
}

// taskID picks the task id out of an enqueue or task response without a full decode:
// the load generator should not cost more than the server it measures.
func taskID(raw []byte) string {
	const marker = `{"task":{"id":"`
	s := string(raw)
	if !strings.HasPrefix(s, marker) {
		return ""
	}
	s = s[len(marker):]
	if end := strings.IndexByte(s, '"'); end > 0 {
		return s[:end]
	}
	return ""
}

// settled waits until the organization has no queued or running task.
func (e *env) settled(ctx context.Context, orgID string) error {
	for {
		queued, err := e.db.CountTasks(ctx, orgID, store.StatusQueued)
		if err != nil {
			return err
		}
		running, err := e.db.CountTasks(ctx, orgID, store.StatusRunning)
		if err != nil {
			return err
		}
		if queued+running == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// load runs fn from n clients until the duration has passed, recording the latency
// of every call; fn reports whether the call did what was expected. A call in flight
// when the time is up runs to its end and counts, so every client measures at least
// one call however slow the machine is.
func load(ctx context.Context, n int, d time.Duration, fn func(ctx context.Context, client, i int) bool) (lat latencies, count, errs int64, elapsed time.Duration) {
	lats, ok, bad, elapsed := loadKinds(ctx, n, 1, d, func(ctx context.Context, client, i int) (int, bool) {
		return 0, fn(ctx, client, i)
	})
	return lats[0], ok[0], bad[0], elapsed
}

// loadKinds is load for calls of several kinds, told apart by fn's first result (from
// 0 to kinds-1): the latencies and counts are kept per kind.
func loadKinds(ctx context.Context, n, kinds int, d time.Duration, fn func(ctx context.Context, client, i int) (kind int, good bool)) (lat []latencies, ok, bad []int64, elapsed time.Duration) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	lat, ok, bad = make([]latencies, kinds), make([]int64, kinds), make([]int64, kinds)
	start := time.Now()
	deadline := start.Add(d)
	for c := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine, myOK, myBad := make([]latencies, kinds), make([]int64, kinds), make([]int64, kinds)
			// A client makes its first kinds calls however short the run: the mix
			// goes through every kind once in them, so every row has a figure even
			// on a machine too slow (or too loaded) to finish that round in d.
			for i := 0; ctx.Err() == nil && (i < kinds || time.Now().Before(deadline)); i++ {
				t := time.Now()
				kind, good := fn(ctx, c, i)
				if ctx.Err() != nil {
					break // the whole bench was stopped
				}
				mine[kind] = append(mine[kind], time.Since(t))
				if good {
					myOK[kind]++
				} else {
					myBad[kind]++
				}
			}
			mu.Lock()
			for k := range kinds {
				lat[k] = append(lat[k], mine[k]...)
				ok[k] += myOK[k]
				bad[k] += myBad[k]
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return lat, ok, bad, time.Since(start)
}

type latencies []time.Duration

func (l latencies) percentile(p float64) float64 {
	if len(l) == 0 {
		return 0
	}
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	i := int(p * float64(len(l)-1))
	return float64(l[i].Microseconds()) / 1000
}

func (l latencies) fill(r *Result) {
	r.P50ms, r.P99ms = l.percentile(0.50), l.percentile(0.99)
}

// warm stores n companies, so that enqueueing them again is a store hit, once the
// tasks it returns the ids of have settled.
func (e *env) warm(ctx context.Context, key string, n int) (domains, ids []string, err error) {
	domains, ids = make([]string, n), make([]string, n)
	for i := range domains {
		domains[i] = fmt.Sprintf("hit-%d.com", i)
		status, id, err := e.post(ctx, key, "/v1/companies/enrich", `{"domain":"`+domains[i]+`"}`)
		if err != nil || status != http.StatusAccepted || id == "" {
			return nil, nil, fmt.Errorf("warming the store: %d %v", status, err)
		}
		ids[i] = id
	}
	return domains, ids, nil
}

// startWarmed starts an enrichd whose store holds 256 companies, every task that put
// them there settled: enqueueing one of domains again is a store hit.
func startWarmed(ctx context.Context, opt Options) (e *env, key string, domains []string, err error) {
	e, key, orgID, err := startEnv(ctx, opt)
	if err != nil {
		return nil, "", nil, err
	}
	if domains, _, err = e.warm(ctx, key, 256); err == nil {
		err = e.settled(ctx, orgID)
	}
	if err != nil {
		e.close()
		return nil, "", nil, err
	}
	return e, key, domains, nil
}

func enqueueHit(ctx context.Context, opt Options) (Result, error) {
	e, key, domains, err := startWarmed(ctx, opt)
	if err != nil {
		return Result{}, err
	}
	defer e.close()
	lat, n, errs, elapsed := load(ctx, opt.Concurrency, opt.Duration, func(ctx context.Context, c, i int) bool {
		status, _, err := e.post(ctx, key, "/v1/companies/enrich", `{"domain":"`+domains[rand.IntN(len(domains))]+`"}`)
		return err == nil && status == http.StatusOK
	})
	r := Result{Scenario: "enqueue-hit", Unit: "req/s", Rate: float64(n) / elapsed.Seconds(), Count: n, Errors: errs,
		Note: "POST /v1/companies/enrich answered from the store (200)"}
	lat.fill(&r)
	return r, nil
}

func enqueueMiss(ctx context.Context, opt Options) (Result, error) {
	e, key, orgID, err := startEnv(ctx, opt)
	if err != nil {
		return Result{}, err
	}
	defer e.close()
	start := time.Now()
	lat, n, errs, _ := load(ctx, opt.Concurrency, opt.Duration, func(ctx context.Context, c, i int) bool {
		status, _, err := e.post(ctx, key, "/v1/companies/enrich", fmt.Sprintf(`{"domain":"miss-%d-%d.com"}`, c, i))
		return err == nil && status == http.StatusAccepted
	})
	if err := e.settled(ctx, orgID); err != nil {
		return Result{}, err
	}
	elapsed := time.Since(start)
	r := Result{Scenario: "enqueue-miss", Unit: "tasks/s", Rate: float64(n) / elapsed.Seconds(), Count: n, Errors: errs,
		Note: "202, then until every task has settled; latency is the POST's"}
	lat.fill(&r)
	return r, nil
}

func read(ctx context.Context, opt Options) (Result, error) {
	e, key, _, err := startEnv(ctx, opt)
	if err != nil {
		return Result{}, err
	}
	defer e.close()
	ids := make([]string, 0, 1000)
	for i := range cap(ids) {
		status, id, err := e.post(ctx, key, "/v1/companies/enrich", fmt.Sprintf(`{"domain":"read-%d.com"}`, i))
		if err != nil || status != http.StatusAccepted || id == "" {
			return Result{}, fmt.Errorf("creating tasks to read: %d %v", status, err)
		}
		ids = append(ids, id)
	}
	// Writers keep enqueueing misses while the readers read.
	writeCtx, stopWriting := context.WithCancel(ctx)
	writers := max(1, opt.Concurrency/16)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		load(writeCtx, writers, opt.Duration+time.Minute, func(ctx context.Context, c, i int) bool {
			status, _, err := e.post(ctx, key, "/v1/companies/enrich", fmt.Sprintf(`{"domain":"bg-%d-%d.com"}`, c, i))
			return err == nil && status == http.StatusAccepted
		})
	}()
	lat, n, errs, elapsed := load(ctx, opt.Concurrency, opt.Duration, func(ctx context.Context, c, i int) bool {
		status, _, err := e.get(ctx, key, "/v1/tasks/"+ids[rand.IntN(len(ids))])
		return err == nil && status == http.StatusOK
	})
	stopWriting()
	wg.Wait()
	r := Result{Scenario: "read", Unit: "req/s", Rate: float64(n) / elapsed.Seconds(), Count: n, Errors: errs,
		Note: fmt.Sprintf("GET /v1/tasks/{id} while %d clients enqueue misses", writers)}
	lat.fill(&r)
	return r, nil
}

// receiver is a webhook endpoint on loopback that acknowledges everything.
type receiver struct {
	url      string
	received atomic.Int64
	srv      *http.Server
}

func startReceiver() (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	rc := &receiver{url: "http://" + ln.Addr().String() + "/hook"}
	rc.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		rc.received.Add(1)
		w.WriteHeader(http.StatusNoContent)
	})}
	go rc.srv.Serve(ln)
	return rc, nil
}

func (rc *receiver) close() { rc.srv.Close() }

func deliver(ctx context.Context, opt Options) (Result, error) {
	rc, err := startReceiver()
	if err != nil {
		return Result{}, err
	}
	defer rc.close()
	received := &rc.received

	e, key, orgID, err := startEnv(ctx, opt)
	if err != nil {
		return Result{}, err
	}
	defer e.close()
	loop, err := e.db.CreateLoop(ctx, store.NewLoop{OrgID: orgID, Name: "bench", ObjectType: enrich.ObjectCompany,
		WebhookURL: rc.url, Enabled: true})
	if err != nil {
		return Result{}, err
	}
	domains, _, err := e.warm(ctx, key, 256)
	if err != nil {
		return Result{}, err
	}
	if err := e.settled(ctx, orgID); err != nil {
		return Result{}, err
	}
	// Every run is a store hit that settles in the request and queues one delivery.
	// They pile up while the sender is stopped, then it sends them all: the rate is the
	// sender's alone, not that of the requests feeding it.
	e.stopWorkers()
	_, n, errs, _ := load(ctx, opt.Concurrency, opt.Duration, func(ctx context.Context, c, i int) bool {
		status, _, err := e.post(ctx, key, "/v1/loops/"+loop.ID+"/run", `{"domain":"`+domains[rand.IntN(len(domains))]+`"}`)
		return err == nil && status == http.StatusOK
	})
	start := time.Now()
	e.startWorkers()
	deadline := time.Now().Add(2 * time.Minute)
	for received.Load() < n {
		if time.Now().After(deadline) {
			return Result{}, fmt.Errorf("only %d of %d deliveries arrived", received.Load(), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
	elapsed := time.Since(start)
	lat, err := e.deliveryLatencies(ctx, orgID, loop.ID)
	if err != nil {
		return Result{}, err
	}
	r := Result{Scenario: "deliver", Unit: "deliveries/s", Rate: float64(n) / elapsed.Seconds(), Count: n, Errors: errs,
		Note: "deliveries queued by Loop runs while the sender was stopped, then sent to a local receiver; latency is from the event to its acknowledged attempt, so it shows how long the backlog took to drain"}
	lat.fill(&r)
	return r, nil
}

// deliveryLatencies is, for each delivery, the time from its event to its
// acknowledged attempt, as the store recorded them.
func (e *env) deliveryLatencies(ctx context.Context, orgID, loopID string) (latencies, error) {
	var lat latencies
	for page := 0; ; page++ {
		ds, _, err := e.db.ListDeliveries(ctx, orgID, loopID, page, 100)
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			if d.LastAttemptAt != nil {
				lat = append(lat, d.LastAttemptAt.Sub(d.CreatedAt))
			}
		}
		if len(ds) < 100 {
			return lat, nil
		}
	}
}

// fair: a bulk upload of 5,000 tasks, then 10 from another organization; how long do
// the 10 wait?
func fair(ctx context.Context, opt Options) (Result, error) {
	e, err := newEnv(ctx, opt, func(cfg *server.Config) {
		// A source that takes a little time, so that the bulk upload is a real backlog.
		cfg.Sources = []enrich.Source{&source.Sim{NetworkHost: enrich.DefaultNetworkHost, Latency: 5 * time.Millisecond}}
	})
	if err != nil {
		return Result{}, err
	}
	defer e.close()
	bulkKey, bulkOrg, err := e.newOrg(ctx, "bulk")
	if err != nil {
		return Result{}, err
	}
	smallKey, smallOrg, err := e.newOrg(ctx, "small")
	if err != nil {
		return Result{}, err
	}
	e.startWorkers()
	const smallTasks = 10
	bulkTasks := int64(opt.FairBulk)
	if bulkTasks <= 0 {
		bulkTasks = 5000
	}
	bulkStart := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range opt.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= bulkTasks; i = next.Add(1) {
				e.post(ctx, bulkKey, "/v1/companies/enrich", fmt.Sprintf(`{"domain":"bulk-%d.com"}`, i))
			}
		}()
	}
	wg.Wait()
	smallStart := time.Now()
	var lat latencies
	for i := range smallTasks {
		t := time.Now()
		if status, _, err := e.post(ctx, smallKey, "/v1/companies/enrich", fmt.Sprintf(`{"domain":"small-%d.com"}`, i)); err != nil || status != http.StatusAccepted {
			return Result{}, fmt.Errorf("small organization's request: %d %v", status, err)
		}
		lat = append(lat, time.Since(t))
	}
	if err := e.settled(ctx, smallOrg); err != nil {
		return Result{}, err
	}
	smallWait := time.Since(smallStart)
	if err := e.settled(ctx, bulkOrg); err != nil {
		return Result{}, err
	}
	bulkDrain := time.Since(bulkStart)
	r := Result{Scenario: "fair", Unit: "s", Rate: smallWait.Seconds(), Count: smallTasks,
		Note: fmt.Sprintf("seconds until a second organization's %d tasks settled, behind %d queued by the first (which took %.1f s to drain; sim latency 5 ms)",
			smallTasks, bulkTasks, bulkDrain.Seconds())}
	lat.fill(&r)
	return r, nil
}
