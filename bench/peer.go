package bench

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"enrichd/store"

	"github.com/google/uuid"
)

// The peer scenario puts enrichd beside two servers measured in the same run, with the
// same requests, load generator and clients: the bare HTTP stack (what any Go service
// costs before it does anything), and the naive service a team would write itself for
// the same two calls. Each is a few dozen lines; neither is made slower than its
// authors would write it. See docs/performance.md.

// peerServers in the order each round drives them; peerRequests likewise.
var (
	peerServers  = []string{"bare", "naive", "enrichd"}
	peerRequests = []peerRequest{
		{"hit", http.MethodPost, "POST /v1/companies/enrich of a company the store holds (200)"},
		{"read", http.MethodGet, "GET /v1/tasks/{id} of a settled task (200)"},
	}
)

type peerRequest struct{ name, method, what string }

// Peer is a row of the peer scenario: one server's figures for one kind of request,
// over all rounds, and each round's.
type Peer struct {
	Server  string      `json:"server"`  // bare, naive or enrichd
	Request string      `json:"request"` // hit or read
	Rounds  []PeerRound `json:"rounds"`
	// On enrichd's rows: its rate over the naive service's and over the bare stack's,
	// for the same kind of request in the same run.
	EnrichdPerNaive float64 `json:"enrichd_per_naive,omitempty"`
	EnrichdPerBare  float64 `json:"enrichd_per_bare,omitempty"`
}

// PeerRound is one server's figures for one kind of request in one round.
type PeerRound struct {
	Rate   float64 `json:"rate"`
	Count  int64   `json:"count"`
	Errors int64   `json:"errors"`
	P50ms  float64 `json:"p50_ms"`
	P99ms  float64 `json:"p99_ms"`
}

// peerTarget is one server under load: where to send, with what, and what it holds.
type peerTarget struct {
	raw   *rawClient
	key   string
	hits  []string // domains its store holds
	tasks []string // ids of tasks it answers
}

// request sends one request of a kind, picked at random among the server's own.
// The answer expected is a 200 whose body opens as enrichd's does, {"task":{"id":"…
func (p *peerTarget) request(ctx context.Context, kind string) bool {
	var a answer
	var err error
	if kind == "hit" {
		a, err = p.raw.do(ctx, p.key, http.MethodPost, "/v1/companies/enrich", `{"domain":"`+p.hits[rand.IntN(len(p.hits))]+`"}`, "")
	} else {
		a, err = p.raw.do(ctx, p.key, http.MethodGet, "/v1/tasks/"+p.tasks[rand.IntN(len(p.tasks))], "", "")
	}
	return err == nil && a.status == http.StatusOK && a.taskID != ""
}

// peers is the three servers of a peer run, started and seeded.
type peers struct {
	targets map[string]*peerTarget
	closers []func()
}

func (ps *peers) close() {
	for i := len(ps.closers) - 1; i >= 0; i-- {
		ps.closers[i]()
	}
}

// startPeers starts enrichd as the other scenarios do, with domains companies in its
// store, then the naive service seeded with the same records and the bare stack.
func startPeers(ctx context.Context, opt Options, domains int) (_ *peers, err error) {
	ps := &peers{targets: map[string]*peerTarget{}}
	defer func() {
		if err != nil {
			ps.close()
		}
	}()
	e, key, orgID, err := startEnv(ctx, opt)
	if err != nil {
		return nil, err
	}
	ps.closers = append(ps.closers, e.close)
	hits, ids, err := e.warm(ctx, key, domains)
	if err != nil {
		return nil, err
	}
	if err := e.settled(ctx, orgID); err != nil {
		return nil, err
	}
	ps.targets["enrichd"] = &peerTarget{raw: e.raw, key: key, hits: hits, tasks: ids}

	// The records the peers hold are enrichd's own, so every answer carries the same
	// bytes of company data.
	// A task read carries where its data came from beside it, so theirs do too.
	records := make(map[string]peerRecord, len(hits))
	for i, id := range ids {
		a, err := e.raw.do(ctx, key, http.MethodGet, "/v1/tasks/"+id, "", "")
		var read peerRecord
		if err == nil && a.status == http.StatusOK {
			err = json.Unmarshal(a.body, &read)
		}
		if err != nil || len(read.Data) == 0 || len(read.Provenance) == 0 || len(read.Sources) == 0 {
			return nil, fmt.Errorf("reading the record of %s from enrichd: %d %v", hits[i], a.status, err)
		}
		records[hits[i]] = read
	}

	dir, err := os.MkdirTemp("", "enrichd-peer-")
	if err != nil {
		return nil, err
	}
	ps.closers = append(ps.closers, func() { os.RemoveAll(dir) })
	const peerKey = "peer-bench-key"
	naive, err := openNaive(ctx, filepath.Join(dir, "naive.db"), peerKey, records)
	if err != nil {
		return nil, err
	}
	ps.closers = append(ps.closers, naive.close)
	naiveAddr, stop, err := servePeer(naive.handler())
	if err != nil {
		return nil, err
	}
	ps.closers = append(ps.closers, stop)
	nt := &peerTarget{raw: newRawClient(naiveAddr), key: peerKey, hits: hits}
	ps.closers = append(ps.closers, nt.raw.closeIdle)
	for _, d := range hits { // its tasks to read, one per record as enrichd's
		a, err := nt.raw.do(ctx, peerKey, http.MethodPost, "/v1/companies/enrich", `{"domain":"`+d+`"}`, "")
		if err != nil || a.status != http.StatusOK || a.taskID == "" {
			return nil, fmt.Errorf("seeding the naive service: %d %v", a.status, err)
		}
		nt.tasks = append(nt.tasks, a.taskID)
	}
	ps.targets["naive"] = nt

	bareAddr, stop, err := servePeer(bareHandler(peerKey, records[hits[0]]))
	if err != nil {
		return nil, err
	}
	ps.closers = append(ps.closers, stop)
	bt := &peerTarget{raw: newRawClient(bareAddr), key: peerKey, hits: hits, tasks: ids}
	ps.closers = append(ps.closers, bt.raw.closeIdle)
	ps.targets["bare"] = bt
	return ps, nil
}

// servePeer serves h on a loopback port as enrichd's listener is served.
func servePeer(h http.Handler) (addr string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return ln.Addr().String(), func() { srv.Close() }, nil
}

// peer runs the peer scenario: rounds of each kind of request against each server in
// turn, so that what else the machine is doing falls on the three alike.
func peer(ctx context.Context, opt Options) ([]Result, error) {
	ps, err := startPeers(ctx, opt, 256)
	if err != nil {
		return nil, err
	}
	defer ps.close()
	rounds := opt.Rounds
	if rounds <= 0 {
		rounds = 3
	}
	slot := opt.Duration / time.Duration(rounds)
	type sum struct {
		lat     latencies
		n, errs int64
		elapsed time.Duration
		rounds  []PeerRound
	}
	sums := map[string]*sum{}
	for round := range rounds {
		if opt.Progress != nil {
			fmt.Fprintf(opt.Progress, "  round %d of %d ...\n", round+1, rounds)
		}
		for _, req := range peerRequests {
			for _, server := range peerServers {
				t := ps.targets[server]
				lat, n, errs, elapsed := load(ctx, opt.Concurrency, slot, func(ctx context.Context, c, i int) bool {
					return t.request(ctx, req.name)
				})
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				s := sums[req.name+"/"+server]
				if s == nil {
					s = &sum{}
					sums[req.name+"/"+server] = s
				}
				r := PeerRound{Rate: float64(n) / elapsed.Seconds(), Count: n, Errors: errs}
				r.P50ms, r.P99ms = lat.percentile(0.50), lat.percentile(0.99)
				s.rounds = append(s.rounds, r)
				s.lat = append(s.lat, lat...)
				s.n, s.errs, s.elapsed = s.n+n, s.errs+errs, s.elapsed+elapsed
			}
		}
	}
	var rows []Result
	for _, req := range peerRequests {
		rate := map[string]float64{}
		for _, server := range peerServers {
			s := sums[req.name+"/"+server]
			r := Result{Scenario: "peer/" + req.name + "/" + server, Unit: "req/s", Rate: float64(s.n) / s.elapsed.Seconds(),
				Count: s.n, Errors: s.errs, Peer: &Peer{Server: server, Request: req.name, Rounds: s.rounds}}
			s.lat.fill(&r)
			rate[server] = r.Rate
			r.Note = fmt.Sprintf("%s from %d clients, %d rounds of %s; %s", req.what, opt.Concurrency, rounds, slot, peerWhat[server])
			if server == "enrichd" {
				r.Peer.EnrichdPerNaive, r.Peer.EnrichdPerBare = ratio(r.Rate, rate["naive"]), ratio(r.Rate, rate["bare"])
				r.Note += fmt.Sprintf("; %.2f× the naive service, %s of the bare stack", r.Peer.EnrichdPerNaive, percent(r.Peer.EnrichdPerBare))
			}
			rows = append(rows, r)
		}
	}
	return rows, nil
}

var peerWhat = map[string]string{
	"bare":    "net/http, a bearer check, the body decoded, a canned answer",
	"naive":   "net/http and SQLite (WAL, synchronous=NORMAL, one writer connection, a reader pool): a POST is one transaction of key lookup, record lookup, task insert, balance update and ledger insert",
	"enrichd": "the real service, sim source, rate limits off",
}

// peerTask is a task as enrichd's API shows it, for the peers' answers.
type peerTask struct {
	ID             string          `json:"id"`
	ObjectType     string          `json:"object_type"`
	Operation      string          `json:"operation"`
	Status         string          `json:"status"`
	Input          json.RawMessage `json:"input"`
	Target         string          `json:"target"`
	CreditsCharged int             `json:"credits_charged"`
	LoopID         *string         `json:"loop_id"`
	WatchID        *string         `json:"watch_id"`
	IdempotencyKey *string         `json:"idempotency_key"`
	CreatedAt      string          `json:"created_at"`
	QueuedAt       *string         `json:"queued_at"`
	StartedAt      *string         `json:"started_at"`
	FinishedAt     *string         `json:"finished_at"`
	ExpiresAt      string          `json:"expires_at"`
	ErasedAt       *string         `json:"erased_at"` // null: the peers hold no erasures
}

type peerAnswer struct {
	Task       peerTask        `json:"task"`
	Data       json.RawMessage `json:"data,omitempty"`
	Provenance json.RawMessage `json:"provenance,omitempty"` // a task read's, as enrichd's
	Sources    json.RawMessage `json:"sources,omitempty"`
}

// peerRecord is what a peer holds of one of enrichd's records: its data, and the
// provenance and sources its task read shows.
type peerRecord struct {
	Data       json.RawMessage `json:"data"`
	Provenance json.RawMessage `json:"provenance"`
	Sources    json.RawMessage `json:"sources"`
}

const peerTime = "2006-01-02T15:04:05.000Z"

// bareHandler is the bare HTTP stack: what a Go service costs before it does any work.
func bareHandler(key string, record peerRecord) http.Handler {
	now := time.Now().UTC().Format(peerTime)
	task := peerTask{ID: uuid.NewString(), ObjectType: "company", Operation: "enrich", Status: "succeeded",
		Input: json.RawMessage(`{"domain":"hit-0.com"}`), Target: "hit-0.com", CreditsCharged: 1, CreatedAt: now, FinishedAt: &now, ExpiresAt: now}
	hit, _ := json.Marshal(peerAnswer{Task: task})
	read, _ := json.Marshal(peerAnswer{Task: task, Data: record.Data, Provenance: record.Provenance, Sources: record.Sources})
	authorized := func(w http.ResponseWriter, r *http.Request) bool {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+key)) != 1 {
			http.Error(w, `{"error":{"code":"unauthorized"}}`, http.StatusUnauthorized)
			return false
		}
		return true
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/companies/enrich", func(w http.ResponseWriter, r *http.Request) {
		if !authorized(w, r) {
			return
		}
		var in struct{ Domain string }
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&in); err != nil || in.Domain == "" {
			http.Error(w, `{"error":{"code":"invalid_request"}}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(hit)
	})
	mux.HandleFunc("GET /v1/tasks/{id}", func(w http.ResponseWriter, r *http.Request) {
		if !authorized(w, r) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(read)
	})
	return mux
}

// naive is the service a team would write for the same two calls: net/http, SQLite,
// database/sql with plain ExecContext and QueryRowContext, one transaction per POST.
// Like enrichd it writes through one connection and reads through a pool, the usual
// way to use SQLite from Go: several writers would wait on SQLite's busy handler.
type naive struct{ write, read *sql.DB }

const naiveSchema = `
CREATE TABLE api_keys (key_hash BLOB PRIMARY KEY, org_id TEXT NOT NULL);
CREATE TABLE balances (org_id TEXT PRIMARY KEY, credits INTEGER NOT NULL);
CREATE TABLE companies (domain TEXT PRIMARY KEY, data TEXT NOT NULL, provenance TEXT NOT NULL);
CREATE TABLE tasks (id TEXT PRIMARY KEY, org_id TEXT NOT NULL, input TEXT NOT NULL, target TEXT NOT NULL,
	status TEXT NOT NULL, credits_charged INTEGER NOT NULL, created_at TEXT NOT NULL, finished_at TEXT, expires_at TEXT NOT NULL);
CREATE TABLE ledger (id INTEGER PRIMARY KEY, org_id TEXT NOT NULL, task_id TEXT NOT NULL, delta INTEGER NOT NULL, created_at TEXT NOT NULL);`

func openNaive(ctx context.Context, path, key string, records map[string]peerRecord) (*naive, error) {
	dsn := "file:" + path + "?" + url.Values{"_pragma": {"journal_mode(WAL)", "synchronous(NORMAL)", "busy_timeout(5000)"}}.Encode()
	n := &naive{}
	var err error
	if n.write, err = sql.Open("sqlite", dsn); err != nil {
		return nil, err
	}
	n.write.SetMaxOpenConns(1)
	if n.read, err = sql.Open("sqlite", dsn); err != nil {
		n.write.Close()
		return nil, err
	}
	readers := store.DefaultReaders() // as many as enrichd's pool
	n.read.SetMaxOpenConns(readers)
	n.read.SetMaxIdleConns(readers)
	err = func() error {
		if _, err := n.write.ExecContext(ctx, naiveSchema); err != nil {
			return err
		}
		hash := sha256.Sum256([]byte(key))
		if _, err := n.write.ExecContext(ctx, `INSERT INTO api_keys VALUES (?, 'org-1')`, hash[:]); err != nil {
			return err
		}
		if _, err := n.write.ExecContext(ctx, `INSERT INTO balances VALUES ('org-1', ?)`, int64(1)<<40); err != nil {
			return err
		}
		for domain, rec := range records {
			if _, err := n.write.ExecContext(ctx, `INSERT INTO companies VALUES (?, ?, ?)`, domain, string(rec.Data), string(rec.Provenance)); err != nil {
				return err
			}
		}
		return nil
	}()
	if err != nil {
		n.close()
		return nil, fmt.Errorf("setting up the naive service: %w", err)
	}
	return n, nil
}

func (n *naive) close() {
	n.write.Close()
	n.read.Close()
}

var errNoCredits = errors.New("insufficient credits")

func (n *naive) handler() http.Handler {
	fail := func(w http.ResponseWriter, status int, code string) {
		http.Error(w, `{"error":{"code":"`+code+`"}}`, status)
	}
	bearer := func(r *http.Request) []byte {
		h := sha256.Sum256([]byte(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")))
		return h[:]
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/companies/enrich", func(w http.ResponseWriter, r *http.Request) {
		var in struct{ Domain string }
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&in); err != nil || in.Domain == "" {
			fail(w, http.StatusBadRequest, "invalid_request")
			return
		}
		domain := strings.ToLower(strings.TrimSpace(in.Domain))
		ctx := r.Context()
		tx, err := n.write.BeginTx(ctx, nil)
		if err != nil {
			fail(w, http.StatusServiceUnavailable, "unavailable")
			return
		}
		defer tx.Rollback()
		var org string
		if err := tx.QueryRowContext(ctx, `SELECT org_id FROM api_keys WHERE key_hash = ?`, bearer(r)).Scan(&org); err != nil {
			fail(w, http.StatusUnauthorized, "unauthorized")
			return
		}
		var data string
		if err := tx.QueryRowContext(ctx, `SELECT data FROM companies WHERE domain = ?`, domain).Scan(&data); err != nil {
			fail(w, http.StatusNotFound, "not_found") // the naive service answers store hits only
			return
		}
		id, _ := uuid.NewV7()
		now := time.Now().UTC()
		created, expires := now.Format(peerTime), now.Add(10*time.Minute).Format(peerTime)
		input, _ := json.Marshal(map[string]string{"domain": domain})
		err = func() error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO tasks VALUES (?, ?, ?, ?, 'succeeded', 1, ?, ?, ?)`,
				id.String(), org, string(input), domain, created, created, expires); err != nil {
				return err
			}
			res, err := tx.ExecContext(ctx, `UPDATE balances SET credits = credits - 1 WHERE org_id = ? AND credits >= 1`, org)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n != 1 {
				return errNoCredits
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO ledger (org_id, task_id, delta, created_at) VALUES (?, ?, -1, ?)`, org, id.String(), created); err != nil {
				return err
			}
			return tx.Commit()
		}()
		switch {
		case errors.Is(err, errNoCredits):
			fail(w, http.StatusPaymentRequired, "insufficient_credits")
			return
		case err != nil:
			fail(w, http.StatusServiceUnavailable, "unavailable")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(peerAnswer{Task: peerTask{ID: id.String(), ObjectType: "company", Operation: "enrich", Status: "succeeded",
			Input: input, Target: domain, CreditsCharged: 1, CreatedAt: created, FinishedAt: &created, ExpiresAt: expires}})
	})
	mux.HandleFunc("GET /v1/tasks/{id}", func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		var org string
		if err := n.read.QueryRowContext(ctx, `SELECT org_id FROM api_keys WHERE key_hash = ?`, bearer(r)).Scan(&org); err != nil {
			fail(w, http.StatusUnauthorized, "unauthorized")
			return
		}
		t := peerTask{ObjectType: "company", Operation: "enrich"}
		var input, data, provenance sql.NullString
		err := n.read.QueryRowContext(ctx, `SELECT t.id, t.input, t.target, t.status, t.credits_charged, t.created_at, t.finished_at, t.expires_at, c.data, c.provenance
			FROM tasks t LEFT JOIN companies c ON c.domain = t.target WHERE t.id = ? AND t.org_id = ?`, r.PathValue("id"), org).
			Scan(&t.ID, &input, &t.Target, &t.Status, &t.CreditsCharged, &t.CreatedAt, &t.FinishedAt, &t.ExpiresAt, &data, &provenance)
		if errors.Is(err, sql.ErrNoRows) {
			fail(w, http.StatusNotFound, "not_found")
			return
		} else if err != nil {
			fail(w, http.StatusServiceUnavailable, "unavailable")
			return
		}
		t.Input = json.RawMessage(input.String)
		// Its tasks are store hits: no source asked, the record's provenance.
		a := peerAnswer{Task: t, Provenance: json.RawMessage(`{}`), Sources: json.RawMessage(`[]`)}
		if data.Valid {
			a.Data, a.Provenance = json.RawMessage(data.String), json.RawMessage(provenance.String)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(a)
	})
	return mux
}
