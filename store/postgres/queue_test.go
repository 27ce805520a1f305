package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
)

// newOrg creates an organization with credits.
func newOrg(t *testing.T, db *DB, name string, credits int64) *store.Org {
	t.Helper()
	ctx := context.Background()
	org, err := facade(db).CreateOrg(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if credits > 0 {
		if _, err := facade(db).GrantCredits(ctx, name, credits, nil); err != nil {
			t.Fatal(err)
		}
	}
	return org
}

// domainTask is a company enrichment by domain, queued unless a stored record is
// fresh; Freshness 0 never takes a stored one.
func domainTask(orgID, domain string) store.NewTask {
	return store.NewTask{OrgID: orgID, Input: enrich.Input{Lookup: enrich.LookupDomain, Target: domain},
		RawInput: json.RawMessage(`{"domain":"` + domain + `"}`), TTL: 10 * time.Minute}
}

func enqueue(t *testing.T, db *DB, nt store.NewTask) *store.Task {
	t.Helper()
	e, err := facade(db).CreateTask(context.Background(), store.BySystem, nt)
	if err != nil {
		t.Fatal(err)
	}
	return e.Task
}

// ledgerOf counts a task's ledger rows by kind.
func ledgerOf(t *testing.T, db *DB, taskID string) map[string]int {
	t.Helper()
	rows, err := db.pool.Query(context.Background(), `SELECT kind, count(*) FROM credit_ledger WHERE task_id = $1 GROUP BY kind`, taskID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for rows.Next() {
		var kind string
		var n int
		if err := rows.Scan(&kind, &n); err != nil {
			t.Fatal(err)
		}
		out[kind] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func company(domain string) *enrich.Result {
	name := strings.TrimSuffix(domain, ".com")
	return &enrich.Result{Company: &enrich.Company{Name: name, Domain: &domain}}
}

func TestTaskIsQueuedClaimedAndSettledThenServedFromTheStore(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := newTestDB(t)
	org := newOrg(t, db, "acme", 10)

	task := enqueue(t, db, domainTask(org.ID, "stripe.com"))
	is.Equal(task.Status, store.StatusQueued)
	q, r, err := facade(db).QueueDepth(ctx)
	is.NoErr(err)
	is.Equal([]int64{q, r}, []int64{1, 0})

	c, err := facade(db).ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	is.Equal(c.TaskID, task.ID)
	is.Equal(c.Input.Target, "stripe.com")
	again, err := facade(db).ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	is.Equal(again, nil) // one task, claimed already

	ok, err := facade(db).ExtendLease(ctx, c, time.Minute)
	is.NoErr(err)
	is.True(ok)
	ok, err = facade(db).Settle(ctx, c, store.Outcome{Result: company("stripe.com"), Fetched: true})
	is.NoErr(err)
	is.True(ok)
	ok, err = facade(db).Settle(ctx, c, store.Outcome{Result: company("stripe.com")})
	is.NoErr(err)
	is.True(!ok) // settled once
	ok, err = facade(db).ExtendLease(ctx, c, time.Minute)
	is.NoErr(err)
	is.True(!ok)

	got, err := facade(db).GetTask(ctx, org.ID, task.ID)
	is.NoErr(err)
	is.Equal(got.Status, store.StatusSucceeded)
	var shown enrich.Company
	is.NoErr(json.Unmarshal(got.Data, &shown))
	is.Equal(shown.Name, "stripe")
	is.Equal(shown.EnrichmentStatus, enrich.StatusEnriched)

	// Fresh in the store: the next request is answered inside it, charged, not queued.
	clk.Add(time.Minute)
	nt := domainTask(org.ID, "stripe.com")
	nt.Freshness = time.Hour
	hit := enqueue(t, db, nt)
	is.Equal(hit.Status, store.StatusSucceeded)
	is.Equal(string(hit.Data), string(got.Data))
	is.Equal(ledgerOf(t, db, hit.ID), map[string]int{"charge": 1})
	var results int
	is.NoErr(db.pool.QueryRow(ctx, `SELECT count(*) FROM task_results WHERE refs = 2`).Scan(&results))
	is.Equal(results, 1) // both tasks point at one copy of the result

	stored, err := facade(db).FindStored(ctx, enrich.Input{Lookup: enrich.LookupDomain, Target: "stripe.com"})
	is.NoErr(err)
	is.Equal(stored.Company.Name, "stripe")
	n, err := facade(db).CountTasks(ctx, org.ID, store.StatusSucceeded)
	is.NoErr(err)
	is.Equal(n, int64(2))
	tasks, total, err := facade(db).ListTasks(ctx, org.ID, "", 0, 10)
	is.NoErr(err)
	is.Equal(total, int64(2))
	is.Equal(tasks[0].ID, hit.ID) // newest first
}

func TestClaimsTakeTurnsByOrganizationFIFOWithin(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := newTestDB(t)
	a, b := newOrg(t, db, "a", 10), newOrg(t, db, "b", 10)
	var want []string
	for _, d := range []string{"a1.com", "a2.com", "a3.com"} {
		want = append(want, enqueue(t, db, domainTask(a.ID, d)).ID)
		clk.Add(time.Millisecond)
	}
	b1 := enqueue(t, db, domainTask(b.ID, "b1.com")).ID
	want = []string{want[0], b1, want[1], want[2]}
	var got []string
	for {
		c, err := facade(db).ClaimTask(ctx, time.Minute)
		is.NoErr(err)
		if c == nil {
			break
		}
		got = append(got, c.TaskID)
	}
	is.Equal(got, want)
	var turns int
	is.NoErr(db.pool.QueryRow(ctx, `SELECT count(*) FROM queue_turns`).Scan(&turns))
	is.Equal(turns, 0) // nothing queued: every turn dropped
}

func TestBacklogLimitHoldsAgainstConcurrentEnqueues(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := migratedDSN(t)
	c := &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	a, b := openTest(t, dsn, c), openTest(t, dsn, c)
	org := newOrg(t, a, "acme", 100)
	var wg sync.WaitGroup
	var mu sync.Mutex
	refused := 0
	for i := range 12 {
		db := []*DB{a, b}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			nt := domainTask(org.ID, fmt.Sprintf("d%d.com", i))
			nt.MaxBacklog = 5
			_, err := facade(db).CreateTask(ctx, store.BySystem, nt)
			var e *enrich.Error
			if errorsAs(err, &e) && e.Code == "queue_full" {
				mu.Lock()
				refused++
				mu.Unlock()
			} else if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	is.Equal(refused, 7)
	n, err := facade(a).CountTasks(ctx, org.ID, store.StatusQueued)
	is.NoErr(err)
	is.Equal(n, int64(5))
	bal, err := facade(a).CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(bal.Charged, int64(5)) // a refusal charges nothing
}

// The same Idempotency-Key sent through two connections at once makes one task and
// one charge: the second waits for the first's transaction and replays its task.
func TestSameIdempotencyKeyFromTwoConnectionsMakesOneTask(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := migratedDSN(t)
	c := &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	a, b := openTest(t, dsn, c), openTest(t, dsn, c)
	org := newOrg(t, a, "acme", 100)
	nt := domainTask(org.ID, "stripe.com")
	nt.IdempotencyKey, nt.Endpoint, nt.BodyHash = "k1", "POST /v1/companies/enrich", strings.Repeat("ab", 32)

	// The first request's transaction is held open, its task made, until the second
	// waits for it.
	held := heldWrite{DB: a, made: make(chan struct{}), release: make(chan struct{})}
	firstDone := make(chan *store.Enqueued, 1)
	go func() {
		e, err := wrap(held, a.nowFn).CreateTask(ctx, store.BySystem, nt)
		if err != nil {
			t.Error(err)
		}
		firstDone <- e
	}()
	<-held.made
	second := make(chan *store.Enqueued, 1)
	go func() {
		e, err := facade(b).CreateTask(ctx, store.BySystem, nt)
		if err != nil {
			t.Error(err)
		}
		second <- e
	}()
	waitForLockWaits(t, a, 1)
	close(held.release)
	first := <-firstDone
	is.True(first != nil)
	is.True(!first.Replayed)
	replay := <-second
	is.True(replay != nil)
	is.True(replay.Replayed)
	is.Equal(replay.Task.ID, first.Task.ID)
	is.Equal(ledgerOf(t, a, first.Task.ID), map[string]int{"charge": 1})

	// A burst of the same new key over both connections: still one task, one charge.
	nt.IdempotencyKey = "k2"
	var wg sync.WaitGroup
	ids := make([]string, 10)
	fresh := make([]bool, 10)
	for i := range ids {
		db := []*DB{a, b}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := facade(db).CreateTask(ctx, store.BySystem, nt)
			if err != nil {
				t.Error(err)
				return
			}
			ids[i], fresh[i] = e.Task.ID, !e.Replayed
		}()
	}
	wg.Wait()
	created := 0
	for i := range ids {
		is.Equal(ids[i], ids[0])
		if fresh[i] {
			created++
		}
	}
	is.Equal(created, 1)
	is.Equal(ledgerOf(t, a, ids[0]), map[string]int{"charge": 1})
	var tasks int
	is.NoErr(a.pool.QueryRow(ctx, `SELECT count(*) FROM tasks`).Scan(&tasks))
	is.Equal(tasks, 2)

	// The key on another body is refused, charging nothing.
	nt.BodyHash = strings.Repeat("cd", 32)
	_, err := facade(b).CreateTask(ctx, store.BySystem, nt)
	var e *enrich.Error
	is.True(errorsAs(err, &e))
	is.Equal(e.Code, "idempotency_key_reused")
}

// Two claimers never get the same task: one holding an organization's turn makes the
// other pass to the next organization without waiting, and a burst of claimers on two
// connections claims every task exactly once.
func TestTwoClaimersNeverGetTheSameTask(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := migratedDSN(t)
	c := &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	a, b := openTest(t, dsn, c), openTest(t, dsn, c)
	x, y := newOrg(t, a, "x", 1000), newOrg(t, a, "y", 1000)
	tx1 := enqueue(t, a, domainTask(x.ID, "x1.com"))
	ty1 := enqueue(t, a, domainTask(y.ID, "y1.com"))

	// The first claim's transaction is held open once it has claimed.
	holder := heldWrite{DB: a, made: make(chan struct{}), release: make(chan struct{})}
	heldDone := make(chan *store.Claim, 1)
	go func() {
		cl, err := wrap(holder, a.nowFn).ClaimTask(ctx, time.Minute)
		if err != nil {
			t.Error(err)
		}
		heldDone <- cl
	}()
	<-holder.made
	other, err := facade(b).ClaimTask(ctx, time.Minute) // returns while the first is open
	is.NoErr(err)
	is.Equal(other.TaskID, ty1.ID)
	none, err := facade(b).ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	is.Equal(none, nil) // x's turn is held; y has nothing left
	close(holder.release)
	held := <-heldDone
	is.True(held != nil)
	is.Equal(held.TaskID, tx1.ID)

	const perOrg = 40
	want := map[string]bool{}
	for i := range perOrg {
		for _, org := range []*store.Org{x, y} {
			want[enqueue(t, a, domainTask(org.ID, fmt.Sprintf("%s-%d.com", org.Name, i))).ID] = true
		}
	}
	var mu sync.Mutex
	claimed := map[string]int{}
	var wg sync.WaitGroup
	for i := range 6 {
		db := []*DB{a, b}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			misses := 0
			for misses < 3 { // nil may mean "the rest is held by the others": look again
				cl, err := facade(db).ClaimTask(ctx, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if cl == nil {
					misses++
					continue
				}
				mu.Lock()
				claimed[cl.TaskID]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	// Whatever the burst left (all held at its last look) is claimed now.
	for {
		cl, err := facade(a).ClaimTask(ctx, time.Minute)
		is.NoErr(err)
		if cl == nil {
			break
		}
		claimed[cl.TaskID]++
	}
	is.Equal(len(claimed), len(want))
	for id, n := range claimed {
		is.True(want[id])
		is.Equal(n, 1)
	}
	q, r, err := facade(a).QueueDepth(ctx)
	is.NoErr(err)
	is.Equal([]int64{q, r}, []int64{0, 2*perOrg + 2})
}

// A claim whose lease ran out is put back once, however many replicas sweep at once,
// and its late holder can no longer settle it.
func TestExpiredLeaseIsReclaimedOnce(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := migratedDSN(t)
	c := &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	a, b := openTest(t, dsn, c), openTest(t, dsn, c)
	org := newOrg(t, a, "acme", 10)
	task := enqueue(t, a, domainTask(org.ID, "stripe.com"))
	old, err := facade(a).ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	c.Add(2 * time.Minute)

	// While one replica sweeps, another does nothing.
	txA, err := a.pool.Begin(ctx)
	is.NoErr(err)
	ok, err := exec{q: txA}.Hold(ctx, store.LockRequeueAbandoned, false)
	is.NoErr(err)
	is.True(ok)
	n, gaveUp, err := facade(b).RequeueAbandoned(ctx)
	is.NoErr(err)
	is.Equal(n, 0)
	is.Equal(len(gaveUp), 0)
	is.NoErr(txA.Rollback(ctx))

	var wg sync.WaitGroup
	counts := make([]int, 4)
	for i := range counts {
		db := []*DB{a, b}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, _, err := facade(db).RequeueAbandoned(ctx)
			if err != nil {
				t.Error(err)
			}
			counts[i] = n
		}()
	}
	wg.Wait()
	is.Equal(counts[0]+counts[1]+counts[2]+counts[3], 1)

	ok, err = facade(a).Settle(ctx, old, store.Outcome{Result: company("stripe.com")})
	is.NoErr(err)
	is.True(!ok) // the late holder lost it
	again, err := facade(b).ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	is.Equal(again.TaskID, task.ID)
	is.Equal(again.QueuedAt, old.QueuedAt) // a task put back keeps its place in time
	more, err := facade(a).ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	is.Equal(more, nil)
	var attempts int
	is.NoErr(a.pool.QueryRow(ctx, `SELECT attempts FROM tasks WHERE id = $1`, task.ID).Scan(&attempts))
	is.Equal(attempts, 2)

	// Released at a shutdown, it is put back without counting the attempt.
	is.NoErr(facade(b).ReleaseTask(ctx, again))
	is.NoErr(a.pool.QueryRow(ctx, `SELECT attempts FROM tasks WHERE id = $1`, task.ID).Scan(&attempts))
	is.Equal(attempts, 1)
	last, err := facade(a).ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	is.Equal(last.TaskID, task.ID)

	// Past the most attempts, the sweep fails it and refunds it, once.
	for range store.MaxTaskAttempts {
		c.Add(2 * time.Minute)
		if _, _, err := facade(a).RequeueAbandoned(ctx); err != nil {
			t.Fatal(err)
		}
		if cl, err := facade(a).ClaimTask(ctx, time.Minute); err != nil || cl == nil {
			break
		}
	}
	got, err := facade(a).GetTask(ctx, org.ID, task.ID)
	is.NoErr(err)
	is.Equal(got.Status, store.StatusFailed)
	is.Equal(got.Error.Code, enrich.CodeInternalError)
	is.Equal(ledgerOf(t, a, task.ID), map[string]int{"charge": 1, "refund": 1})
}

// Two replicas expiring the same tasks at once fail and refund each once.
func TestSweepsOfTwoReplicasRefundOnce(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := migratedDSN(t)
	c := &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	a, b := openTest(t, dsn, c), openTest(t, dsn, c)
	org := newOrg(t, a, "acme", 100)
	var ids []string
	for i := range 30 {
		ids = append(ids, enqueue(t, a, domainTask(org.ID, fmt.Sprintf("d%d.com", i))).ID)
	}
	for range 10 { // a third running, the rest queued
		if _, err := facade(a).ClaimTask(ctx, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	c.Add(11 * time.Minute)

	txA, err := a.pool.Begin(ctx)
	is.NoErr(err)
	ok, err := exec{q: txA}.Hold(ctx, store.LockExpireTasks, false)
	is.NoErr(err)
	is.True(ok)
	none, err := facade(b).ExpireTasks(ctx)
	is.NoErr(err)
	is.Equal(len(none), 0) // the other replica is at it
	is.NoErr(txA.Rollback(ctx))

	var wg sync.WaitGroup
	var mu sync.Mutex
	expired := map[string]int{}
	for i := range 4 {
		db := []*DB{a, b}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := facade(db).ExpireTasks(ctx)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			for _, e := range got {
				expired[e.ID]++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	// A sweep that found the lock taken did nothing; one more makes sure all are done.
	rest, err := facade(a).ExpireTasks(ctx)
	is.NoErr(err)
	for _, e := range rest {
		expired[e.ID]++
	}
	is.Equal(len(expired), len(ids))
	for _, id := range ids {
		is.Equal(expired[id], 1)
		is.Equal(ledgerOf(t, a, id), map[string]int{"charge": 1, "refund": 1})
	}
	bal, err := facade(a).CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(bal.Balance, int64(100))
	q, r, err := facade(a).QueueDepth(ctx)
	is.NoErr(err)
	is.Equal([]int64{q, r}, []int64{0, 0})
}

func TestCancelRefundsOnceAndTheTurnIsDropped(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, _ := newTestDB(t)
	org := newOrg(t, db, "acme", 10)
	task := enqueue(t, db, domainTask(org.ID, "stripe.com"))
	got, err := facade(db).CancelTask(ctx, org.ID, task.ID)
	is.NoErr(err)
	is.Equal(got.Status, store.StatusCanceled)
	_, err = facade(db).CancelTask(ctx, org.ID, task.ID)
	var e *enrich.Error
	is.True(errorsAs(err, &e))
	is.Equal(e.Code, "task_settled")
	is.Equal(ledgerOf(t, db, task.ID), map[string]int{"charge": 1, "refund": 1})
	other := newOrg(t, db, "other", 0)
	_, err = facade(db).CancelTask(ctx, other.ID, task.ID)
	is.True(errorsAs(err, &e))
	is.Equal(e.Code, "not_found")

	c, err := facade(db).ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	is.Equal(c, nil)
	var turns int
	is.NoErr(db.pool.QueryRow(ctx, `SELECT count(*) FROM queue_turns`).Scan(&turns))
	is.Equal(turns, 0)
}

func TestFailedOutcomeIsRefunded(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, _ := newTestDB(t)
	org := newOrg(t, db, "acme", 10)
	task := enqueue(t, db, domainTask(org.ID, "stripe.com"))
	c, err := facade(db).ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	ok, err := facade(db).Settle(ctx, c, store.Outcome{Err: &enrich.TaskError{Code: enrich.CodeNotFound, Message: "no such company"}})
	is.NoErr(err)
	is.True(ok)
	got, err := facade(db).GetTask(ctx, org.ID, task.ID)
	is.NoErr(err)
	is.Equal(got.Status, store.StatusFailed)
	is.Equal(got.Error.Code, enrich.CodeNotFound)
	is.Equal(ledgerOf(t, db, task.ID), map[string]int{"charge": 1, "refund": 1})

	// A task failed inside the request is created failed and refunded at once.
	nt := domainTask(org.ID, "x.com")
	nt.Fail = &enrich.TaskError{Code: enrich.CodeNotFound, Message: "refused"}
	failed := enqueue(t, db, nt)
	is.Equal(failed.Status, store.StatusFailed)
	is.Equal(ledgerOf(t, db, failed.ID), map[string]int{"charge": 1, "refund": 1})
}

func TestPurgeSettledDeletesTasksKeysAndResults(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := newTestDB(t)
	org := newOrg(t, db, "acme", 10)
	nt := domainTask(org.ID, "stripe.com")
	nt.IdempotencyKey, nt.BodyHash = "k", "h"
	task := enqueue(t, db, nt)
	c, err := facade(db).ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	_, err = facade(db).Settle(ctx, c, store.Outcome{Result: company("stripe.com")})
	is.NoErr(err)
	queued := enqueue(t, db, domainTask(org.ID, "queued.com"))
	clk.Add(time.Hour)

	p, err := facade(db).PurgeSettled(ctx, clk.Now().Add(-time.Minute), 100)
	is.NoErr(err)
	is.Equal(p.Tasks, 1)
	_, err = facade(db).GetTask(ctx, org.ID, task.ID)
	var e *enrich.Error
	is.True(errorsAs(err, &e))
	is.Equal(e.Code, "not_found")
	_, err = facade(db).GetTask(ctx, org.ID, queued.ID)
	is.NoErr(err) // unsettled: never purged
	var keys, results int
	is.NoErr(db.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM idempotency_keys), (SELECT count(*) FROM task_results)`).Scan(&keys, &results))
	is.Equal([]int{keys, results}, []int{0, 0})
	is.Equal(ledgerOf(t, db, task.ID), map[string]int{"charge": 1}) // the ledger keeps its rows

	// With another replica purging, this one deletes nothing.
	tx, err := db.pool.Begin(ctx)
	is.NoErr(err)
	defer tx.Rollback(ctx)
	ok, err := exec{q: tx}.Hold(ctx, store.LockPurgeSettled, false)
	is.NoErr(err)
	is.True(ok)
	other, err := facade(openTest(t, db.pool.Config().ConnString(), clk)).PurgeSettled(ctx, clk.Now(), 100)
	is.NoErr(err)
	is.Equal(other, store.Purged{})
}

func TestFindTasksPagesAndEachFilterWalksAnIndex(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := newTestDB(t)
	org := newOrg(t, db, "acme", 100)
	var ids []string
	for i := range 7 {
		ids = append(ids, enqueue(t, db, domainTask(org.ID, fmt.Sprintf("d%d.com", i))).ID)
		clk.Add(time.Second)
	}
	page, next, err := facade(db).FindTasks(ctx, org.ID, store.TaskFilter{Limit: 3})
	is.NoErr(err)
	is.Equal(len(page), 3)
	is.Equal(page[0].ID, ids[6])
	page, next, err = facade(db).FindTasks(ctx, org.ID, store.TaskFilter{Limit: 3, Before: next, Status: store.StatusQueued})
	is.NoErr(err)
	is.Equal(page[0].ID, ids[3])
	page, next, err = facade(db).FindTasks(ctx, org.ID, store.TaskFilter{Limit: 3, Before: next})
	is.NoErr(err)
	is.Equal(len(page), 1)
	is.Equal(next, nil)

	loop := "loop-1"
	for _, f := range []struct {
		filter store.TaskFilter
		index  string
	}{
		{store.TaskFilter{}, "tasks_org_created"},
		{store.TaskFilter{Status: store.StatusQueued, From: clk.Now().Add(-time.Hour)}, "tasks_org_queued"},
		{store.TaskFilter{Status: store.StatusFailed, From: clk.Now().Add(-time.Hour)}, "tasks_org_created"},
		{store.TaskFilter{ObjectType: enrich.ObjectCompany, To: clk.Now()}, "tasks_org_created"},
		{store.TaskFilter{LoopID: loop, Before: &store.TaskCursor{CreatedAt: clk.Now(), ID: ids[0]}}, "tasks_org_loop_created"},
	} {
		query, args := facade(db).FindTasksQuery(org.ID, f.filter, 10)
		plan := explain(t, db, rebind(query), args...)
		is.True(strings.Contains(plan, f.index))
		is.True(!strings.Contains(plan, "Sort")) // the index's order, walked backwards
	}
	plan := explain(t, db, rebind(store.ClaimQuery), int64(0), "t", int64(0), org.ID)
	is.True(strings.Contains(plan, "tasks_org_queued"))
}

// explain is the plan of query with sequential scans priced out: whether an index can
// serve it, whatever the planner picks for tables of a few rows.
func explain(t *testing.T, db *DB, query string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	var lines []string
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `EXPLAIN `+query, args...)
		if err != nil {
			return err
		}
		lines, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		return fmt.Errorf("rolled back") // EXPLAIN of an UPDATE changes nothing, but leave no trace
	})
	if err != nil && err.Error() != "rolled back" {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

func TestImportServesTheDatasetAndStaff(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := newTestDB(t)
	_, err := facade(db).Import(ctx, strings.NewReader(`{"type":"company","name":"Acme","domain":"acme.com","domains":["acme.io"]}
{"type":"bad"}`), enrich.Normalizer{})
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), "line 2"))
	stats, err := facade(db).Import(ctx, strings.NewReader(`{"type":"company","name":"Acme","domain":"acme.com","domains":["acme.io"]}
{"type":"person","network_url":"https://www.linkedin.com/in/jane-doe","full_name":"Jane Doe","emails":["Jane.Doe@Acme.com"],"positions":[{"title":"CEO","company_name":"ACME","is_current":true}]}`), enrich.Normalizer{})
	is.NoErr(err)
	is.Equal(stats, store.ImportStats{Companies: 1, People: 1})
	co, err := facade(db).Dataset().CompanyByDomain(ctx, nil, "acme.io")
	is.NoErr(err)
	is.Equal(*co.Redirect, enrich.Redirect{From: "acme.io", To: "acme.com", Confirmed: false})
	h, err := facade(db).Held().PersonByEmail(ctx, "jane.doe@acme.com")
	is.NoErr(err)
	is.Equal(*h.Person.FullName, "Jane Doe")
	_, err = facade(db).Held().CurrentStaff(ctx, enrich.Employer{Name: "acme"}, 10)
	is.NoErr(err)
	var staff []string
	rows, err := db.pool.Query(ctx, `SELECT r.origin FROM positions p JOIN records r ON r.id = p.record_id
		WHERE lower(p.company_name) = lower('acme') AND p.is_current = 1`)
	is.NoErr(err)
	staff, err = pgx.CollectRows(rows, pgx.RowTo[string])
	is.NoErr(err)
	is.Equal(staff, []string{"dataset"}) // the name found whatever its case
	found, err := facade(db).FindStaff(ctx, store.OriginDataset, store.StaffByName, "Acme", 10)
	is.NoErr(err)
	is.Equal(len(found), 1)

	g := &enrich.Gathering{Address: "j@acme.com", GatheredAt: clk.Now(), Company: &enrich.Company{Name: "Acme"},
		Candidates: []enrich.Candidate{{Method: "inferred", Pattern: "first", RetrievedAt: clk.Now()}}}
	// Kept twice for the address, by two lookups that ended ambiguous.
	org := newOrg(t, db, "acme", 10)
	for range 2 {
		enqueue(t, db, store.NewTask{OrgID: org.ID, Input: enrich.Input{Lookup: enrich.LookupEmail, Target: "j@acme.com"},
			RawInput: json.RawMessage(`{}`), TTL: time.Minute})
		c, err := facade(db).ClaimTask(ctx, time.Minute)
		is.NoErr(err)
		ambiguous := store.TimedOut
		_, err = facade(db).Settle(ctx, c, store.Outcome{Err: &ambiguous, Gathered: g, KeepGathered: time.Hour})
		is.NoErr(err)
	}
	got, err := facade(db).Held().Gathering(ctx, "j@acme.com", clk.Now().Add(-time.Hour))
	is.NoErr(err)
	is.Equal(len(got.Candidates), 1)
}

func TestMaintenanceOnPostgres(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, _ := newTestDB(t)
	org := newOrg(t, db, "acme", 10)
	err := db.Backup(ctx, t.TempDir()+"/x.db", false)
	var e *enrich.Error
	is.True(errorsAs(err, &e))
	is.True(strings.Contains(e.Message, "pg_dump"))
	done, err := db.Checkpoint(ctx)
	is.NoErr(err)
	is.True(!done)
	is.NoErr(db.ReleaseMemory(ctx))

	is.NoErr(facade(db).SeedTasks(ctx, org.ID, 7))
	is.NoErr(facade(db).SeedQueuedTasks(ctx, org.ID, 3))
	q, _, err := facade(db).QueueDepth(ctx)
	is.NoErr(err)
	is.Equal(q, int64(3))
	c, err := facade(db).ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	is.Equal(c.Input.Target, "queued-0.com")
	grants, err := facade(db).ListGrants(ctx, org.ID)
	is.NoErr(err)
	id, err := facade(db).CeilingWrite(ctx, org.ID, grants[0].ID)
	is.NoErr(err)
	is.NoErr(facade(db).CeilingRead(ctx, id))
	sp, err := db.SpaceUsage(ctx)
	is.NoErr(err)
	is.Equal(sp.Tasks, int64(11))
	is.True(sp.Bytes > 0)
	is.True(len(sp.Objects) > 5)
}

// A task with a Loop sends its event in the transaction that settles it, whichever way
// it settles: by a worker, inside the request (a store hit), or by the expiry sweep.
func TestSettledTasksOfALoopSendTheirEvent(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := newTestDB(t)
	org := newOrg(t, db, "acme", 100)
	loop, err := facade(db).CreateLoop(ctx, store.NewLoop{OrgID: org.ID, Name: "crm", ObjectType: enrich.ObjectCompany,
		WebhookURL: "https://example.com/hook", Enabled: true})
	is.NoErr(err)
	event := func(taskID string) (string, map[string]any) {
		t.Helper()
		ds, err := facade(db).TaskDeliveries(ctx, org.ID, taskID)
		is.NoErr(err)
		is.Equal(len(ds), 1)
		_, payload, err := facade(db).GetDelivery(ctx, org.ID, ds[0].ID)
		is.NoErr(err)
		var body map[string]any
		is.NoErr(json.Unmarshal(payload, &body))
		return ds[0].Event, body
	}

	nt := domainTask(org.ID, "stripe.com")
	nt.LoopID = &loop.ID
	worked := enqueue(t, db, nt)
	c, err := facade(db).ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	_, err = facade(db).Settle(ctx, c, store.Outcome{Result: company("stripe.com"), Fetched: true})
	is.NoErr(err)
	kind, body := event(worked.ID)
	is.Equal(kind, store.EventTaskSucceeded)
	is.Equal(body["data"].(map[string]any)["name"], "stripe")
	is.Equal(body["task"].(map[string]any)["loop_id"], loop.ID)

	nt.Freshness = time.Hour
	hit := enqueue(t, db, nt)
	is.Equal(hit.Status, store.StatusSucceeded)
	kind, _ = event(hit.ID)
	is.Equal(kind, store.EventTaskSucceeded)

	nt.Freshness = 0
	late := enqueue(t, db, nt)
	clk.Add(11 * time.Minute)
	expired, err := facade(db).ExpireTasks(ctx)
	is.NoErr(err)
	is.Equal(len(expired), 1)
	is.Equal(*expired[0].LoopID, loop.ID)
	kind, body = event(late.ID)
	is.Equal(kind, store.EventTaskFailed)
	is.Equal(body["error"].(map[string]any)["code"], string(enrich.CodeTimedOut))

	// A Loop of another type refuses the task, creating and charging nothing.
	pt := store.NewTask{OrgID: org.ID, Input: enrich.Input{Lookup: enrich.LookupPersonURL, Target: "https://www.linkedin.com/in/x"},
		RawInput: json.RawMessage(`{}`), TTL: time.Minute, LoopID: &loop.ID}
	_, err = facade(db).CreateTask(ctx, store.BySystem, pt)
	var e *enrich.Error
	is.True(errorsAs(err, &e))
	is.Equal(e.Kind, enrich.KindInvalid)
}

// An address on record answers an email lookup inside the request only while the
// person still works at the company behind the domain.
func TestEmailLookupIsAnsweredFromTheStoreWhileStillEmployed(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, _ := newTestDB(t)
	org := newOrg(t, db, "acme", 100)
	emailTask := func(addr string) store.NewTask {
		return store.NewTask{OrgID: org.ID, Input: enrich.Input{Lookup: enrich.LookupEmail, Target: addr},
			RawInput: json.RawMessage(`{"email":"` + addr + `"}`), TTL: 10 * time.Minute, Freshness: time.Hour}
	}
	enqueue(t, db, emailTask("jane@acme.com"))
	c, err := facade(db).ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	url, domain, name := "https://www.linkedin.com/in/jane", "acme.com", "Jane"
	person := &enrich.Person{NetworkURL: &url, FullName: &name, Positions: []enrich.Position{
		{CompanyName: &name, Company: &enrich.PositionCompany{Domain: &domain}, IsCurrent: true}}}
	ok, err := facade(db).Settle(ctx, c, store.Outcome{Result: &enrich.Result{Person: person}, Fetched: true})
	is.NoErr(err)
	is.True(ok)

	hit := enqueue(t, db, emailTask("jane@acme.com"))
	is.Equal(hit.Status, store.StatusSucceeded)
	var p enrich.Person
	is.NoErr(json.Unmarshal(hit.Data, &p))
	is.Equal(p.EmailMatch.Method, enrich.MatchExact)
	is.Equal(hit.CreditsCharged, int64(3))

	// Gone from the company: the workers resolve the address afresh.
	person.Positions[0].IsCurrent = false
	enqueue(t, db, store.NewTask{OrgID: org.ID, Input: enrich.Input{Lookup: enrich.LookupPersonURL, Target: url},
		RawInput: json.RawMessage(`{}`), TTL: time.Minute})
	c, err = facade(db).ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	ok, err = facade(db).Settle(ctx, c, store.Outcome{Result: &enrich.Result{Person: person}, Fetched: true})
	is.NoErr(err)
	is.True(ok)
	queued := enqueue(t, db, emailTask("jane@acme.com"))
	is.Equal(queued.Status, store.StatusQueued)
}

// Enqueues, claims, settles, cancels, releases and every sweep at once, from two
// replicas: afterwards every task was charged once and refunded at most once, the
// counts the triggers keep match the tasks, and no queued task is left without its
// organization's turn.
func TestMixedLoadOnTwoReplicasKeepsTheBooks(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := migratedDSN(t)
	c := &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	a, b := openTest(t, dsn, c), openTest(t, dsn, c)
	orgs := []*store.Org{newOrg(t, a, "o1", 10000), newOrg(t, a, "o2", 10000), newOrg(t, a, "o3", 10000)}
	var wg sync.WaitGroup
	fail := func(err error) {
		if err != nil {
			t.Error(err)
		}
	}
	for w := range 4 { // enqueuers, some with a short life so that expiry has work
		db := []*DB{a, b}[w%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				org := orgs[(w+i)%len(orgs)]
				nt := domainTask(org.ID, fmt.Sprintf("w%d-%d.com", w, i%10))
				nt.Freshness = time.Hour // repeats are store hits once one settled
				if i%7 == 0 {
					nt.TTL = 0
				}
				e, err := facade(db).CreateTask(ctx, store.BySystem, nt)
				fail(err)
				if err == nil && i%5 == 0 {
					_, err := facade(db).CancelTask(ctx, org.ID, e.Task.ID)
					var ee *enrich.Error
					if err != nil && !(errorsAs(err, &ee) && ee.Code == "task_settled") {
						t.Error(err)
					}
				}
			}
		}()
	}
	for w := range 4 { // workers: settle most, fail some, release some
		db := []*DB{a, b}[w%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				cl, err := facade(db).ClaimTask(ctx, time.Minute)
				fail(err)
				if cl == nil {
					continue
				}
				if i%4 == 1 {
					err = facade(db).ReleaseTask(ctx, cl)
				} else {
					_, err = facade(db).Settle(ctx, cl, mixedLoadOutcome(cl))
				}
				fail(err)
			}
		}()
	}
	for w := range 2 { // sweeps on both replicas
		db := []*DB{a, b}[w]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				_, err := facade(db).ExpireTasks(ctx)
				fail(err)
				_, _, err = facade(db).RequeueAbandoned(ctx)
				fail(err)
				_, err = facade(db).PurgeSettled(ctx, c.Now().Add(-time.Hour), 50)
				fail(err)
			}
		}()
	}
	wg.Wait()
	// What the workers left queued (they may have passed over an empty queue, or put
	// tasks back) is claimed and settled now: which tasks succeed and which fail depends
	// on their targets, not on how the load interleaved.
	for {
		cl, err := facade(a).ClaimTask(ctx, time.Minute)
		is.NoErr(err)
		if cl == nil {
			break
		}
		_, err = facade(a).Settle(ctx, cl, mixedLoadOutcome(cl))
		is.NoErr(err)
	}

	for _, status := range []string{store.StatusSucceeded, store.StatusFailed} {
		var n int
		is.NoErr(a.pool.QueryRow(ctx, `SELECT count(*) FROM tasks WHERE status = $1`, status).Scan(&n))
		is.True(n > 0) // the load did settle tasks both ways
	}
	var bad int
	is.NoErr(a.pool.QueryRow(ctx, `SELECT count(*) FROM tasks t WHERE
		(SELECT count(*) FROM credit_ledger l WHERE l.task_id = t.id AND kind = 'charge') <> 1
		OR (SELECT count(*) FROM credit_ledger l WHERE l.task_id = t.id AND kind = 'refund') > 1
		OR ((SELECT count(*) FROM credit_ledger l WHERE l.task_id = t.id AND kind = 'refund') = 1) <> (t.status IN ('failed', 'canceled'))`).Scan(&bad))
	is.Equal(bad, 0) // charged once; refunded once exactly when failed or canceled
	is.NoErr(a.pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT org_id, status, count(*) AS n FROM tasks GROUP BY org_id, status) t
		FULL JOIN (SELECT * FROM task_counts WHERE n <> 0) c USING (org_id, status) WHERE t.n IS DISTINCT FROM c.n`).Scan(&bad))
	is.Equal(bad, 0) // the counts match the tasks
	is.NoErr(a.pool.QueryRow(ctx, `SELECT count(DISTINCT org_id) FROM tasks WHERE status = 'queued'
		AND org_id NOT IN (SELECT org_id FROM queue_turns)`).Scan(&bad))
	is.Equal(bad, 0) // every queued task can be claimed
	is.NoErr(a.pool.QueryRow(ctx, `SELECT count(*) FROM task_results r WHERE refs <> (SELECT count(*) FROM tasks WHERE result_id = r.id)`).Scan(&bad))
	is.Equal(bad, 0)
	for _, org := range orgs {
		bal, err := facade(a).CreditBalance(ctx, org.Name)
		is.NoErr(err)
		var held int64
		is.NoErr(a.pool.QueryRow(ctx, `SELECT coalesce(sum(remaining), 0)::bigint FROM credit_grants WHERE org_id = $1`, org.ID).Scan(&held))
		is.Equal(bal.Balance, held) // the grants agree with the ledger
	}
}

// mixedLoadOutcome is how TestMixedLoadOnTwoReplicasKeepsTheBooks settles a task: the
// domains w*-1.com (never canceled at creation, and not repeats of one that succeeded)
// are not found, the others found.
func mixedLoadOutcome(cl *store.Claim) store.Outcome {
	if strings.HasSuffix(cl.Input.Target, "-1.com") {
		return store.Outcome{Err: &enrich.TaskError{Code: enrich.CodeNotFound, Message: "no"}}
	}
	return store.Outcome{Result: company(cl.Input.Target), Fetched: true}
}

// A claimer that finds every turn held by other claimers waits for one instead of
// reporting an empty queue: the organization has more queued tasks than the other
// claimer takes.
func TestAClaimWaitsForATurnAnotherClaimerHolds(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, _ := newTestDB(t)
	org := newOrg(t, db, "acme", 10)
	enqueue(t, db, domainTask(org.ID, "a.com"))
	enqueue(t, db, domainTask(org.ID, "b.com"))

	holder, err := db.pool.Begin(ctx) // what another claimer holds while it claims
	is.NoErr(err)
	defer holder.Rollback(ctx)
	var held string
	is.NoErr(holder.QueryRow(ctx, `SELECT org_id FROM queue_turns ORDER BY seq LIMIT 1 FOR UPDATE`).Scan(&held))

	claimed := make(chan *store.Claim, 1)
	go func() {
		c, err := facade(db).ClaimTask(ctx, time.Minute)
		if err != nil {
			t.Error(err)
		}
		claimed <- c
	}()
	select {
	case c := <-claimed:
		t.Fatalf("the claim returned %v while the only turn was held; it should wait for it", c)
	case <-time.After(200 * time.Millisecond):
	}
	is.NoErr(holder.Commit(ctx))
	c := <-claimed
	is.True(c != nil) // two tasks were queued
}

// heldWrite runs each write transaction as DB does but holds it open once its steps
// are done, until release is closed.
type heldWrite struct {
	*DB
	made, release chan struct{}
}

func (h heldWrite) Write(ctx context.Context, fn func(store.Tx) error) error {
	return h.DB.Write(ctx, func(tx store.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		close(h.made)
		<-h.release
		return nil
	})
}
