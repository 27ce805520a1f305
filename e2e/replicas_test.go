//go:build unix

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/secret"
	"enrichd/store"
	"enrichd/store/storetest"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
)

// startReplica starts a serve process of bin, one replica of the test.
func startReplica(t *testing.T, bin, name string, args ...string) *serveProcess {
	t.Helper()
	return startBinaryServe(t, bin, name, []string{"ENRICHLAYER_API_KEY=replica-test-key"}, args...)
}

// fakeVendor is the Enrich Layer API the replicas ask, one path prefix per replica so
// it knows who asks. Lookups of a domain that starts with "missing-" find nothing. A
// replica's lookups wait while its gate is shut; the waiting ones are counted.
type fakeVendor struct {
	srv     *httptest.Server
	mu      sync.Mutex
	gates   map[string]chan struct{} // closed when open
	waiting map[string]*atomic.Int64
}

func newFakeVendor(t *testing.T, replicas ...string) *fakeVendor {
	v := &fakeVendor{gates: map[string]chan struct{}{}, waiting: map[string]*atomic.Int64{}}
	for _, r := range replicas {
		v.gates[r] = make(chan struct{})
		v.waiting[r] = &atomic.Int64{}
	}
	v.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		v.mu.Lock()
		gate, n := v.gates[who], v.waiting[who]
		v.mu.Unlock()
		if gate == nil {
			http.NotFound(w, r)
			return
		}
		n.Add(1)
		select {
		case <-gate:
			n.Add(-1)
		case <-r.Context().Done(): // the replica is gone
			n.Add(-1)
			return
		}
		domain := r.URL.Query().Get("company_domain")
		switch {
		case strings.HasSuffix(rest, "company/resolve") && strings.HasPrefix(domain, "missing-"):
			http.NotFound(w, r)
		case strings.HasSuffix(rest, "company/resolve"):
			fmt.Fprintf(w, `{"url": "https://www.linkedin.com/company/%s"}`, strings.ReplaceAll(domain, ".", "-"))
		default:
			fmt.Fprintf(w, `{"name": "Company of %s", "company_size_on_linkedin": 12}`, r.URL.Query().Get("url"))
		}
	}))
	t.Cleanup(func() {
		v.open(replicas...)
		v.srv.Close()
	})
	return v
}

func (v *fakeVendor) open(replicas ...string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, r := range replicas {
		select {
		case <-v.gates[r]:
		default:
			close(v.gates[r])
		}
	}
}

// replicaHooks records every webhook delivery it gets: the delivery ids seen per task.
type replicaHooks struct {
	srv *httptest.Server
	mu  sync.Mutex
	ids map[string]map[string]int // task id -> delivery id -> times received
}

func newReplicaHooks(t *testing.T) *replicaHooks {
	h := &replicaHooks{ids: map[string]map[string]int{}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Task struct {
				ID string `json:"id"`
			} `json:"task"`
		}
		raw, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(raw, &body); err != nil || body.Task.ID == "" {
			http.Error(w, "no task in the body", http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		if h.ids[body.Task.ID] == nil {
			h.ids[body.Task.ID] = map[string]int{}
		}
		h.ids[body.Task.ID][r.Header.Get("X-Service-Delivery-Id")]++
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// enqueue posts a company lookup to base and returns the status and the task's id;
// an error is a request that got no answer (a replica killed meanwhile).
func enqueue(ctx context.Context, client *http.Client, base, key, body, idemKey string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/companies/enrich", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", err
	}
	var out apiResponse
	json.Unmarshal(raw, &out)
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted {
		return resp.StatusCode, "", fmt.Errorf("%d %s", resp.StatusCode, bytes.TrimSpace(raw))
	}
	return resp.StatusCode, out.Task.ID, nil
}

// TestReplicasSurviveAKill runs three serve processes on one PostgreSQL database, sends
// tasks of many organizations to them in turn, and kills one with SIGKILL while it
// holds tasks: the others take those tasks over once their lease runs out, every
// accepted task settles once, each organization's ledger adds up to its balance and
// to its tasks, every task's webhook arrives under one delivery id, and one
// Idempotency-Key sent to two replicas at once makes one task.
func TestReplicasSurviveAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs three serve processes")
	}
	t.Parallel()
	is := is.New(t)
	ctx := t.Context()
	dsn := storetest.PostgresURL(t)
	// Every replica is given the same secret key file, as on PostgreSQL it must be.
	keyFile := filepath.Join(t.TempDir(), "enrichd.secret-key")
	box, _, err := secret.LoadOrCreate(keyFile)
	is.NoErr(err)
	db, err := store.Open(ctx, dsn, schema, store.WithSubjectKey(box.SubjectKey()))
	is.NoErr(err)
	defer db.Close()
	bin := enrichdBinary(t)

	const orgs, perOrg, workers = 8, 12, 3
	hooks := newReplicaHooks(t)
	names := []string{"r0", "r1", "r2"}
	vendor := newFakeVendor(t, names...)

	keys := make([]string, orgs)
	loops := make([]string, orgs)
	for i := range orgs {
		name := fmt.Sprintf("org%d", i)
		key, k, err := db.CreateKey(ctx, store.BySystem, name, "ci", true)
		is.NoErr(err)
		keys[i] = key
		_, err = db.GrantCredits(ctx, name, 1000, nil)
		is.NoErr(err)
		loop, err := db.CreateLoop(ctx, store.NewLoop{OrgID: k.OrgID, Name: "crm", ObjectType: enrich.ObjectCompany,
			WebhookURL: hooks.srv.URL + "/" + name, Enabled: true})
		is.NoErr(err)
		loops[i] = loop.ID
	}

	var replicas []*serveProcess
	for _, name := range names {
		replicas = append(replicas, startReplica(t, bin, name, "--db", dsn, "--secret-key-file", keyFile,
			"--sources", "enrichlayer", "--enrichlayer-url", vendor.srv.URL+"/"+name,
			"--enrichlayer-rate", "0", "--enrichlayer-concurrency", "16",
			"--workers", fmt.Sprint(workers), "--lease", "1s", "--shutdown-grace", "1s",
			"--rate-ip", "0", "--rate-key", "0", "--allow-private-webhooks"))
	}
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()

	// accepted is every task a replica answered 200 or 202 for, with its organization.
	var mu sync.Mutex
	accepted := map[string]int{}
	burst := func(from, to int, targets []*serveProcess) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, orgs*perOrg)
		for o := range orgs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := from; n < to; n++ {
					domain := fmt.Sprintf("o%d-t%d.example", o, n)
					if n%5 == 4 {
						domain = "missing-" + domain
					}
					target := targets[(o+n)%len(targets)]
					body := fmt.Sprintf(`{"domain": %q, "loop_id": %q}`, domain, loops[o])
					_, id, err := enqueue(ctx, client, target.base, keys[o], body, "")
					if err != nil {
						errs <- fmt.Errorf("%s: %w", target.name, err)
						continue
					}
					mu.Lock()
					accepted[id] = o
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("enqueue: %v", err)
		}
	}

	// The first half goes to all three, whose lookups wait at the vendor: r0's workers
	// are all holding a task when it is killed.
	burst(0, perOrg/2, replicas)
	deadline := time.Now().Add(30 * time.Second)
	for vendor.waiting["r0"].Load() < workers {
		if time.Now().After(deadline) {
			t.Fatalf("r0 holds %d lookups at the vendor, want %d", vendor.waiting["r0"].Load(), workers)
		}
		time.Sleep(10 * time.Millisecond)
	}
	is.NoErr(replicas[0].cmd.Process.Signal(syscall.SIGKILL))
	<-replicas[0].exited
	vendor.open("r1", "r2")
	survivors := replicas[1:]
	burst(perOrg/2, perOrg, survivors)

	// The same Idempotency-Key to two replicas at once, for each organization.
	idem := map[int][2]string{}
	var wg sync.WaitGroup
	for o := range orgs {
		var ids [2]string
		var statuses [2]int
		var errs [2]error
		start := make(chan struct{})
		for i, r := range survivors {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				statuses[i], ids[i], errs[i] = enqueue(ctx, client, r.base, keys[o],
					fmt.Sprintf(`{"domain": "twice-%d.example", "loop_id": %q}`, o, loops[o]), fmt.Sprintf("same-key-%d", o))
			}()
		}
		close(start)
		wg.Wait()
		for i := range errs {
			if errs[i] != nil {
				t.Fatalf("org%d: the key sent to %s: %v", o, survivors[i].name, errs[i])
			}
		}
		if ids[0] != ids[1] {
			t.Errorf("org%d: one Idempotency-Key sent to two replicas made tasks %s (%d) and %s (%d)", o, ids[0], statuses[0], ids[1], statuses[1])
		}
		idem[o] = ids
		accepted[ids[0]] = o
	}

	pg, err := pgx.Connect(ctx, dsn)
	is.NoErr(err)
	defer pg.Close(context.WithoutCancel(ctx))
	waitFor := func(what, query string) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			var n int64
			is.NoErr(pg.QueryRow(ctx, query).Scan(&n))
			if n == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d %s after 2 minutes", n, what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("tasks unsettled", `SELECT count(*) FROM tasks WHERE status IN ('queued', 'running')`)
	waitFor("deliveries not delivered", `SELECT count(*) FROM deliveries WHERE status <> 'succeeded'`)

	// Every task accepted is there, settled, and no other.
	type task struct {
		org, status string
		charged     int64
		attempts    int64
		charges     int64
		refunds     int64
		deliveries  []string
	}
	tasks := map[string]*task{}
	rows, err := pg.Query(ctx, `SELECT t.id, t.org_id, t.status, t.credits_charged, t.attempts,
			(SELECT count(*) FROM credit_ledger l WHERE l.task_id = t.id AND l.kind = 'charge' AND l.amount = t.credits_charged),
			(SELECT count(*) FROM credit_ledger l WHERE l.task_id = t.id AND l.kind = 'refund' AND l.amount = t.credits_charged),
			coalesce((SELECT array_agg(d.id) FROM deliveries d WHERE d.task_id = t.id), '{}')
		FROM tasks t`)
	is.NoErr(err)
	for rows.Next() {
		var id string
		tk := &task{}
		is.NoErr(rows.Scan(&id, &tk.org, &tk.status, &tk.charged, &tk.attempts, &tk.charges, &tk.refunds, &tk.deliveries))
		tasks[id] = tk
	}
	is.NoErr(rows.Err())
	for id := range accepted {
		if tasks[id] == nil {
			t.Errorf("accepted task %s is not in the database", id)
		}
	}
	is.Equal(len(tasks), len(accepted)) // the kill came between requests: none went unanswered
	var reclaimed, failed int
	for id, tk := range tasks {
		switch tk.status {
		case store.StatusSucceeded:
			if tk.charges != 1 || tk.refunds != 0 {
				t.Errorf("succeeded task %s: %d charges and %d refunds, want 1 and 0", id, tk.charges, tk.refunds)
			}
		case store.StatusFailed:
			failed++
			if tk.charges != 1 || tk.refunds != 1 {
				t.Errorf("failed task %s: %d charges and %d refunds, want 1 and 1", id, tk.charges, tk.refunds)
			}
		default:
			t.Errorf("task %s is %s", id, tk.status)
		}
		if tk.attempts > 1 {
			reclaimed++
		}
		// One event, under one delivery id, received under that id alone.
		if len(tk.deliveries) != 1 {
			t.Errorf("task %s has %d deliveries, want 1: %v", id, len(tk.deliveries), tk.deliveries)
			continue
		}
		hooks.mu.Lock()
		got := hooks.ids[id]
		hooks.mu.Unlock()
		if len(got) != 1 || got[tk.deliveries[0]] == 0 {
			t.Errorf("task %s: the receiver got delivery ids %v, want %s alone", id, got, tk.deliveries[0])
		}
	}
	is.True(failed > 0)           // the missing- domains, refunded
	is.True(reclaimed >= workers) // the killed replica's tasks, taken over after their lease
	for o, ids := range idem {
		var n int64
		is.NoErr(pg.QueryRow(ctx, `SELECT count(*) FROM tasks t JOIN orgs o ON o.id = t.org_id
			WHERE o.name = $1 AND t.idempotency_key = $2`, fmt.Sprintf("org%d", o), fmt.Sprintf("same-key-%d", o)).Scan(&n))
		if n != 1 {
			t.Errorf("org%d: %d tasks for one Idempotency-Key (%v)", o, n, ids)
		}
	}

	// Each organization's ledger adds up to its balance, the grants' remainders, and
	// the charges and refunds of its tasks.
	for o := range orgs {
		name := fmt.Sprintf("org%d", o)
		b, err := db.CreditBalance(ctx, name)
		is.NoErr(err)
		var granted, charged, refunded, expired, remaining, taskCharges, taskRefunds int64
		is.NoErr(pg.QueryRow(ctx, `SELECT
				coalesce(sum(amount) FILTER (WHERE kind = 'grant'), 0), coalesce(sum(amount) FILTER (WHERE kind = 'charge'), 0),
				coalesce(sum(amount) FILTER (WHERE kind = 'refund'), 0), coalesce(sum(amount) FILTER (WHERE kind = 'expiry'), 0)
			FROM credit_ledger l JOIN orgs o ON o.id = l.org_id WHERE o.name = $1`, name).Scan(&granted, &charged, &refunded, &expired))
		is.NoErr(pg.QueryRow(ctx, `SELECT coalesce(sum(remaining), 0) FROM credit_grants g JOIN orgs o ON o.id = g.org_id
			WHERE o.name = $1 AND g.expired_at IS NULL`, name).Scan(&remaining))
		is.NoErr(pg.QueryRow(ctx, `SELECT coalesce(sum(credits_charged), 0), coalesce(sum(credits_charged) FILTER (WHERE status IN ('failed', 'canceled')), 0)
			FROM tasks t JOIN orgs o ON o.id = t.org_id WHERE o.name = $1`, name).Scan(&taskCharges, &taskRefunds))
		is.Equal(granted-charged+refunded-expired, b.Balance) // the ledger adds up to the balance
		is.Equal(remaining, b.Balance)                        // and to what the grants have left
		is.Equal(charged, taskCharges)                        // charges are the tasks'
		is.Equal(refunded, taskRefunds)                       // refunds the failed tasks'
		is.Equal(b.Granted, int64(1000))
	}
}
