package worker

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"
	"enrichd/store/storetest"

	"github.com/matryer/is"
)

// A worker that finds tasks queued claims the next in the write that settles the one
// before (store.DB.SettleAndClaim): five tasks of a priced vendor take one claim of its
// own, five bookings and five settles, eleven writes where the claims of their own
// made sixteen. On PostgreSQL, where the settle claims nothing, each claim is a write.
func TestABusyWorkerClaimsItsNextTaskInTheSettlesWrite(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, org := openDB(t)
	_, err := db.GrantCredits(ctx, "acme", 10, nil)
	is.NoErr(err)
	ids := queueTasks(t, db, org, "a.com", "b.com", "c.com", "d.com", "e.com")
	var logs bytes.Buffer
	vendor := &pricedVendor{}
	// No poll while the test runs: a tick would have the worker claim after the last
	// settle found the queue empty.
	pool := New(db, Config{Workers: 1, Sources: []enrich.Source{vendor}, PollInterval: time.Hour,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})

	before, _ := db.WriteStats()
	stop := working(ctx, pool)
	for _, id := range ids {
		waitSucceeded(t, db, org, id, &logs)
	}
	stop()
	after, _ := db.WriteStats()
	is.Equal(vendor.asked.Load(), int64(5))
	is.Equal(after-before, int64(11))  // a claim, and a booking and a settle a task
	is.Equal(asksOnTheBooks(t, db), 0) // each ask settled with its task
}

// queueTasks queues a task of org for each domain, and returns their ids.
func queueTasks(t *testing.T, db *store.DB, org string, domains ...string) []string {
	t.Helper()
	var ids []string
	for _, domain := range domains {
		created, err := db.CreateTask(context.Background(), store.BySystem, storetest.NewTask(org, domain))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, created.Task.ID)
	}
	return ids
}

// working runs pool's worker loop until stop, which waits for it to end.
func working(ctx context.Context, pool *Pool) (stop func()) {
	workCtx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		pool.work(workCtx, ctx)
	}()
	return func() {
		cancel()
		<-stopped
	}
}

// waitSucceeded waits up to 10 s for the task id to succeed, and fails with the
// pool's log if it does not.
func waitSucceeded(t *testing.T, db *store.DB, org, id string, logs *bytes.Buffer) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		task, err := db.GetTask(context.Background(), org, id)
		if err != nil {
			t.Fatal(err)
		}
		if task.Status == store.StatusSucceeded {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: %s after 10 s; log: %s", id, task.Status, logs.String())
		}
	}
}

// A stop that comes while the settle's write waits for the writer does not settle the
// task a second time: the write that claimed as the worker stopped stands (the loop
// gives its claim back), and the task's asks are not taken for ones a sweep settled.
func TestAStopDuringTheSettlesWriteSettlesOnce(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	real, org := openDB(t)
	_, err := real.GrantCredits(ctx, "acme", 10, nil)
	is.NoErr(err)
	for _, domain := range []string{"a.com", "b.com"} {
		_, err := real.CreateTask(ctx, store.BySystem, storetest.NewTask(org, domain))
		is.NoErr(err)
	}
	claiming, stop := context.WithCancel(ctx)
	stopper := &stopOnWrite{Driver: real.Driver, stop: stop}
	db := &store.DB{Driver: stopper, Now: real.Now}
	db.SetSubjects(real.Subjects())
	var logs bytes.Buffer
	vendor := &pricedVendor{}
	pool := New(db, Config{Workers: 1, Sources: []enrich.Source{vendor}, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	c, err := real.ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	asks := &answeredAsks{}
	b, skip := pool.spend.Admit(ctx, org, "pdl", false)
	is.Equal(skip, "")
	hit := enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeHit, VendorCalls: 1, Credits: 1}
	pool.spend.forTask(asks).Spent(ctx, org, hit, b)

	before, _ := real.WriteStats()
	res := enrich.Result{Company: &enrich.Company{Name: "A", Domain: enrich.Ptr("a.com")}}
	var next nextClaim
	stopper.armed.Store(true)
	pool.settle(ctx, claiming, c, store.Outcome{Result: &res, Fetched: true}, asks, &next, nil)
	after, _ := real.WriteStats()
	is.Equal(after-before, int64(1)) // one write
	is.True(next.written)
	is.True(next.claim != nil) // claimed as it stopped: the loop gives it back
	is.True(!strings.Contains(logs.String(), "settled as unknown"))
	task, err := real.GetTask(ctx, org, c.TaskID)
	is.NoErr(err)
	is.Equal(task.Status, store.StatusSucceeded)
	got, err := real.SourceSpendSince(ctx, org, store.MonthStart(real.Now()))
	is.NoErr(err)
	is.Equal(got["pdl"].Total, store.SourceUse{Calls: 1, Hits: 1, Credits: 1})
	is.Equal(pool.metrics.counter("enrichd_tasks_settled_total", "object_type", "company", "status", store.StatusSucceeded).Get(), uint64(1))
}

// stopOnWrite is a database whose writes, once armed, first stop the worker's
// claiming, as a shutdown that comes while the write waits for the writer.
type stopOnWrite struct {
	store.Driver
	stop  context.CancelFunc
	armed atomic.Bool
}

func (d *stopOnWrite) Write(ctx context.Context, fn func(store.Tx) error) error {
	if d.armed.Load() {
		d.stop()
	}
	return d.Driver.Write(ctx, fn)
}

// A worker whose store's settle claims nothing (PostgreSQL's) claims again as a task
// settles only if more was queued as it claimed it (store.Claim.More); a task queued
// later wakes it. Three tasks and then a fourth take four claims, four bookings and
// four settles, and the fourth's creation: thirteen writes. Claiming again after each
// settle made at least one more, a claim that found nothing.
func TestAWorkerClaimsAgainOnlyIfMoreWasQueued(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	real, org := openDB(t)
	_, err := real.GrantCredits(ctx, "acme", 10, nil)
	is.NoErr(err)
	ids := queueTasks(t, real, org, "a.com", "b.com", "c.com")
	db := &store.DB{Driver: manyWriters{real.Driver}, Now: real.Now}
	db.SetSubjects(real.Subjects())
	var logs bytes.Buffer
	vendor := &pricedVendor{}
	pool := New(db, Config{Workers: 1, Sources: []enrich.Source{vendor}, PollInterval: time.Hour,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})

	before, _ := real.WriteStats()
	stop := working(ctx, pool)
	for _, id := range ids {
		waitSucceeded(t, db, org, id, &logs)
	}
	fourth := queueTasks(t, db, org, "d.com")[0]
	pool.wakeWorker()
	waitSucceeded(t, db, org, fourth, &logs)
	stop()
	after, _ := real.WriteStats()
	is.Equal(vendor.asked.Load(), int64(4))
	is.Equal(after-before, int64(13))
}

// manyWriters is a store whose writes run side by side, as PostgreSQL's do: a settle
// claims nothing (store.DB.SettleAndClaim).
type manyWriters struct{ store.Driver }

func (manyWriters) SingleWriter() bool { return false }
