package bench

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"enrichd/enrich"
	"enrichd/enrich/source"
	"enrichd/store"
)

// mixKind is one type of call of the realistic mix, drawn with its weight (in
// percent) by every client for every call.
type mixKind struct {
	name   string
	weight int
	post   bool // a write: compared with the write ceiling, reads with the read ceiling
	what   string
}

const (
	mixRead = iota
	mixList
	mixHit
	mixMiss
	mixEmail
	mixLoop
	mixReplay
)

var mixKinds = []mixKind{
	mixRead:   {"read", 30, false, "GET /v1/tasks/{id} of a task the client made (200)"},
	mixList:   {"list", 10, false, "GET /v1/tasks?pageSize=25 (200)"},
	mixHit:    {"hit", 25, true, "POST /v1/companies/enrich answered from the store (200)"},
	mixMiss:   {"miss", 15, true, "POST /v1/companies/enrich of a new domain, queued (202)"},
	mixEmail:  {"email", 5, true, "POST /v1/people/enrich of a new address the sim source resolves, queued (202)"},
	mixLoop:   {"loop", 5, true, "POST /v1/loops/{id}/run of a stored company: settled at once, its webhook queued (200)"},
	mixReplay: {"replay", 10, true, "POST /v1/companies/enrich resent with an earlier Idempotency-Key and body (200, Idempotent-Replayed)"},
}

// mixClients is the clients of the mix: half of --concurrency, as the realistic mix
// was measured with 16 clients beside the 32 of the single-request scenarios.
func mixClients(opt Options) int { return max(1, opt.Concurrency/2) }

// mix is the realistic load against one enrichd: what it needs set up there, and what
// each client remembers between calls.
type mix struct {
	e       *env
	key     string
	loopID  string
	hits    []string       // domains the store holds
	replays []keyedRequest // requests made once, to be resent
	seen    []string       // tasks to read before a client has made its own
	clients []mixClient
	emails  atomic.Int64 // the sim companies whose staff addresses were asked
	sim     source.Sim
}

type keyedRequest struct{ key, body string }

// mixClient is one client's own: only its goroutine touches it.
type mixClient struct {
	recent [64]string // ids of the tasks it made last, to read them back
	n      int
}

func (c *mixClient) remember(id string) {
	if id != "" {
		c.recent[c.n%len(c.recent)] = id
		c.n++
	}
}

// setUpMix warms the store with 256 companies, makes the keyed requests the replays
// resend, and waits until every task has settled. The organization behind key must
// have credits and the company Loop loopID, and workers must be running.
func setUpMix(ctx context.Context, e *env, key, loopID string, clients int) (*mix, error) {
	m := &mix{e: e, key: key, loopID: loopID, clients: make([]mixClient, clients)}
	var err error
	if m.hits, m.seen, err = e.warm(ctx, key, 256); err != nil {
		return nil, err
	}
	if err := e.settledHTTP(ctx, key, m.seen); err != nil {
		return nil, err
	}
	for i := range 128 {
		r := keyedRequest{key: fmt.Sprintf("bench-replay-%d", i), body: `{"domain":"` + m.hits[i%len(m.hits)] + `"}`}
		a, err := e.do(ctx, key, http.MethodPost, "/v1/companies/enrich", r.body, r.key)
		if err != nil || a.status != http.StatusOK {
			return nil, fmt.Errorf("making the requests to replay: %d %v", a.status, err)
		}
		m.replays = append(m.replays, r)
	}
	return m, nil
}

// settledHTTP waits until none of the tasks is queued or running, asking the API: the
// enrichd may be another process.
func (e *env) settledHTTP(ctx context.Context, key string, ids []string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for _, id := range ids {
		for {
			a, err := e.do(ctx, key, http.MethodGet, "/v1/tasks/"+id, "", "")
			if err != nil {
				return err
			}
			if a.status != http.StatusOK {
				return fmt.Errorf("reading task %s: %d", id, a.status)
			}
			if !bytes.Contains(a.body, []byte(`"status":"queued"`)) && !bytes.Contains(a.body, []byte(`"status":"running"`)) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("task %s has not settled in 2 minutes", id)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return nil
}

// call makes one call of a kind drawn by weight and reports the kind and whether the
// answer was the one expected.
func (m *mix) call(ctx context.Context, client, i int) (int, bool) {
	// A client's first calls go through every kind once, so that every row has a
	// figure however short the run.
	kind := i
	if i >= len(mixKinds) {
		kind = 0
		for draw := rand.IntN(100); draw >= mixKinds[kind].weight; kind++ {
			draw -= mixKinds[kind].weight
		}
	}
	me := &m.clients[client]
	var a answer
	var err error
	want := http.StatusOK
	switch kind {
	case mixRead:
		a, err = m.e.do(ctx, m.key, http.MethodGet, "/v1/tasks/"+m.someTask(me), "", "")
	case mixList:
		a, err = m.e.do(ctx, m.key, http.MethodGet, "/v1/tasks?pageSize=25", "", "")
	case mixHit:
		a, err = m.e.do(ctx, m.key, http.MethodPost, "/v1/companies/enrich", `{"domain":"`+m.hits[rand.IntN(len(m.hits))]+`"}`, "")
	case mixMiss:
		want = http.StatusAccepted
		a, err = m.e.do(ctx, m.key, http.MethodPost, "/v1/companies/enrich", fmt.Sprintf(`{"domain":"mix-%d-%d.com"}`, client, i), "")
	case mixEmail:
		want = http.StatusAccepted
		a, err = m.e.do(ctx, m.key, http.MethodPost, "/v1/people/enrich", `{"email":"`+m.nextEmail()+`"}`, "")
	case mixLoop:
		a, err = m.e.do(ctx, m.key, http.MethodPost, "/v1/loops/"+m.loopID+"/run", `{"domain":"`+m.hits[rand.IntN(len(m.hits))]+`"}`, "")
	case mixReplay:
		r := m.replays[rand.IntN(len(m.replays))]
		a, err = m.e.do(ctx, m.key, http.MethodPost, "/v1/companies/enrich", r.body, r.key)
		if err == nil && !a.replayed {
			return kind, false
		}
	}
	if kind != mixRead && kind != mixList && kind != mixReplay {
		me.remember(a.taskID)
	}
	return kind, err == nil && a.status == want
}

// someTask is one of the tasks the client made lately, or of those the setup made.
func (m *mix) someTask(me *mixClient) string {
	if me.n == 0 {
		return m.seen[rand.IntN(len(m.seen))]
	}
	return me.recent[rand.IntN(min(me.n, len(me.recent)))]
}

// nextEmail is the address of a current employee of a sim company never asked before,
// whose first.last nobody else there shares: an address the sim source resolves.
func (m *mix) nextEmail() string {
	for {
		slug := fmt.Sprintf("mail-%d", m.emails.Add(1))
		staff := m.sim.Staff(slug)
		names := make(map[string]int, len(staff))
		for _, p := range staff {
			names[strings.ToLower(p.FirstName+"."+p.LastName)]++
		}
		for _, p := range staff {
			local := strings.ToLower(p.FirstName + "." + p.LastName)
			if p.Current && names[local] == 1 && !strings.Contains(local, "-") {
				return local + "@" + slug + ".com"
			}
		}
	}
}

// drive runs the mix from its clients for d and returns the row of the whole, then a
// row per kind.
func (m *mix) drive(ctx context.Context, scenario string, d time.Duration) []Result {
	lats, ok, bad, elapsed := loadKinds(ctx, len(m.clients), len(mixKinds), d, m.call)
	var all latencies
	var count, errs int64
	rows := []Result{{}}
	for k, kind := range mixKinds {
		r := Result{Scenario: scenario + "/" + kind.name, Unit: "req/s", Rate: float64(ok[k]) / elapsed.Seconds(), Count: ok[k], Errors: bad[k],
			Note: fmt.Sprintf("%d%% of the calls: %s", kind.weight, kind.what)}
		lats[k].fill(&r)
		all = append(all, lats[k]...)
		count += ok[k]
		errs += bad[k]
		rows = append(rows, r)
	}
	rows[0] = Result{Scenario: scenario, Unit: "req/s", Rate: float64(count) / elapsed.Seconds(), Count: count, Errors: errs,
		Note: fmt.Sprintf("the realistic mix from %d clients, each call's type drawn by weight; workers running, the Loop's webhooks going to a local receiver", len(m.clients))}
	all.fill(&rows[0])
	return rows
}

// mixed drives the realistic mix against an in-process enrichd, then reports what its
// database holds per stored task.
func mixed(ctx context.Context, opt Options, ceil *ceilings) ([]Result, error) {
	rc, err := startReceiver()
	if err != nil {
		return nil, err
	}
	defer rc.close()
	e, key, orgID, err := startEnv(ctx, opt)
	if err != nil {
		return nil, err
	}
	defer e.close()
	loop, err := e.db.CreateLoop(ctx, store.NewLoop{OrgID: orgID, Name: "bench", ObjectType: enrich.ObjectCompany,
		WebhookURL: rc.url, Enabled: true})
	if err != nil {
		return nil, err
	}
	m, err := setUpMix(ctx, e, key, loop.ID, mixClients(opt))
	if err != nil {
		return nil, err
	}
	rows := m.drive(ctx, "mixed", opt.Duration)
	for i := range rows[1:] {
		r := &rows[1+i]
		if mixKinds[i].post {
			err = ceil.withWrite(ctx, r)
		} else {
			err = ceil.withRead(ctx, r)
		}
		if err != nil {
			return nil, err
		}
	}
	space, err := e.db.SpaceUsage(ctx)
	if err != nil {
		return nil, err
	}
	return append(rows, storageRow(space)), nil
}
