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

	"github.com/matryer/is"
)

// companyLoop is a Loop of company records for org.
func companyLoop(t *testing.T, db *DB, orgID string) *store.Loop {
	t.Helper()
	l, err := facade(db).CreateLoop(context.Background(), store.NewLoop{OrgID: orgID, Name: "crm", ObjectType: enrich.ObjectCompany,
		WebhookURL: "https://example.com/hook", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// domainWatch is a watch of a company by domain, due at first.
func domainWatch(orgID, loopID, domain string, first time.Time) store.NewWatch {
	return store.NewWatch{OrgID: orgID, ObjectType: enrich.ObjectCompany,
		Input: enrich.Input{Lookup: enrich.LookupDomain, Target: domain}, RawInput: json.RawMessage(`{"domain":"` + domain + `"}`),
		LoopID: loopID, EveryDays: 30, Enabled: true, FirstRunAt: first}
}

// waitForLockWaits returns once n backends of this database wait on a lock: the
// transactions a test started are then all queued behind the lock it holds. It polls
// (a condition, not a time: it fails only if they never get there).
func waitForLockWaits(t *testing.T, db *DB, n int) {
	t.Helper()
	for range 10000 {
		var waiting int
		if err := db.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%d transactions never came to wait on the lock", n)
}

func TestTwoSchedulersNeverClaimTheSameWatch(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := migratedDSN(t)
	c := &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	dbs := []*DB{openTest(t, dsn, c), openTest(t, dsn, c)}
	const orgs, each = 4, 15
	for i := range orgs {
		org := newOrg(t, dbs[0], fmt.Sprintf("org-%d", i), 0)
		loop := companyLoop(t, dbs[0], org.ID)
		for j := range each {
			_, err := facade(dbs[0]).CreateWatch(ctx, store.BySystem, domainWatch(org.ID, loop.ID, fmt.Sprintf("d%d.com", j), c.Now().Add(-time.Duration(j)*time.Minute)))
			is.NoErr(err)
		}
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for i := range 4 {
		db := dbs[i%2]
		wg.Go(func() {
			// The clock stands still: a claimed watch is due again only WatchRetry
			// later, so every watch is handed out once, whichever scheduler takes it.
			for range 5000 {
				got, err := facade(db).DueWatches(ctx, c.Now(), 5, 2)
				if err != nil {
					t.Error(err)
					return
				}
				perOrg := map[string]int{}
				mu.Lock()
				for _, d := range got {
					seen[d.Watch.ID]++
					perOrg[d.Watch.OrgID]++
				}
				done := len(seen) == orgs*each
				mu.Unlock()
				for org, n := range perOrg {
					if n > 2 {
						t.Errorf("one round claimed %d watches of %s, more than its 2", n, org)
					}
				}
				if done {
					return
				}
			}
		})
	}
	wg.Wait()
	is.Equal(len(seen), orgs*each) // every due watch claimed
	for id, n := range seen {
		if n != 1 {
			t.Errorf("watch %s claimed %d times", id, n)
		}
	}
	// Claimed, each is due WatchRetry later, and then again.
	got, err := facade(dbs[1]).DueWatches(ctx, c.Now(), 100, 100)
	is.NoErr(err)
	is.Equal(len(got), 0)
	got, err = facade(dbs[1]).DueWatches(ctx, c.Now().Add(store.WatchRetry), 100, 100)
	is.NoErr(err)
	is.Equal(len(got), orgs*each)
}

func TestASecondSchedulerReturnsNilWhileOneIsAtIt(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := newTestDB(t)
	org := newOrg(t, db, "acme", 0)
	loop := companyLoop(t, db, org.ID)
	first, err := facade(db).CreateWatch(ctx, store.BySystem, domainWatch(org.ID, loop.ID, "stripe.com", clk.Now().Add(-time.Hour)))
	is.NoErr(err)
	_, err = facade(db).CreateWatch(ctx, store.BySystem, domainWatch(org.ID, loop.ID, "acme.com", clk.Now()))
	is.NoErr(err)

	tx, err := db.pool.Begin(ctx)
	is.NoErr(err)
	_, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockBase|int64(store.LockDueWatches))
	is.NoErr(err)
	got, err := facade(db).DueWatches(ctx, clk.Now(), 10, 10)
	is.NoErr(err)
	is.Equal(got, nil) // another replica is scheduling
	is.NoErr(tx.Rollback(ctx))

	got, err = facade(db).DueWatches(ctx, clk.Now(), 10, 10)
	is.NoErr(err)
	is.Equal(len(got), 2)
	is.Equal(got[0].Watch.ID, first.ID)                          // oldest due first
	is.Equal(*got[0].Watch.NextRunAt, clk.Now().Add(-time.Hour)) // as it was due: NextRun plans from it
	is.Equal(got[0].MonthSpend, int64(0))
	is.Equal(got[0].MonthlyCap, nil)
	w, err := facade(db).GetWatch(ctx, org.ID, first.ID)
	is.NoErr(err)
	is.Equal(*w.NextRunAt, clk.Now().Add(store.WatchRetry)) // the claim

	// A watch a Settle or a patch holds is left for the next round.
	clk.Add(store.WatchRetry)
	tx, err = db.pool.Begin(ctx)
	is.NoErr(err)
	_, err = tx.Exec(ctx, `SELECT 1 FROM watches WHERE id = $1 FOR UPDATE`, first.ID)
	is.NoErr(err)
	got, err = facade(db).DueWatches(ctx, clk.Now(), 10, 10)
	is.NoErr(err)
	is.Equal(len(got), 1)
	is.True(got[0].Watch.ID != first.ID)
	is.NoErr(tx.Rollback(ctx))
}

// Two tasks of one watch settling at once take the watch in turn: the first keeps the
// baseline, the second is compared with it and sends the change. (Settles of one
// organization already queue on its task_counts row; settleWatch's own lock is tested
// apart below.)
func TestTwoTasksOfOneWatchSettleInTurn(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := migratedDSN(t)
	clk := &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	a, b := openTest(t, dsn, clk), openTest(t, dsn, clk)
	org := newOrg(t, a, "acme", 100)
	loop := companyLoop(t, a, org.ID)
	w, err := facade(a).CreateWatch(ctx, store.BySystem, domainWatch(org.ID, loop.ID, "stripe.com", clk.Now()))
	is.NoErr(err)

	var claims []*store.Claim
	for range 2 {
		nt := domainTask(org.ID, "stripe.com")
		nt.WatchID = &w.ID
		task := enqueue(t, a, nt)
		is.Equal(*task.WatchID, w.ID)
		c, err := facade(a).ClaimTask(ctx, time.Minute)
		is.NoErr(err)
		is.Equal(c.TaskID, task.ID)
		claims = append(claims, c)
	}
	names := []string{"Stripe", "Stripe, Inc."}

	// Hold the watch's row so that both settles get as far as waiting for it.
	hold, err := a.pool.Begin(ctx)
	is.NoErr(err)
	_, err = hold.Exec(ctx, `SELECT 1 FROM watches WHERE id = $1 FOR UPDATE`, w.ID)
	is.NoErr(err)
	var wg sync.WaitGroup
	for i, db := range []*DB{a, b} {
		wg.Go(func() {
			domain := "stripe.com"
			res := &enrich.Result{Company: &enrich.Company{Name: names[i], Domain: &domain}}
			ok, err := facade(db).Settle(ctx, claims[i], store.Outcome{Result: res, Fetched: true})
			if err != nil || !ok {
				t.Errorf("settle %d: %v %v", i, ok, err)
			}
		})
	}
	waitForLockWaits(t, a, 2)
	is.NoErr(hold.Rollback(ctx))
	wg.Wait()

	var deliveries []*store.Delivery
	for _, c := range claims {
		ds, err := facade(a).TaskDeliveries(ctx, org.ID, c.TaskID)
		is.NoErr(err)
		deliveries = append(deliveries, ds...)
	}
	is.Equal(len(deliveries), 1) // the first set the baseline, the second sent the change
	is.Equal(deliveries[0].Event, store.EventRecordChanged)
	_, payload, err := facade(a).GetDelivery(ctx, org.ID, deliveries[0].ID)
	is.NoErr(err)
	var body struct {
		Changes []struct {
			Path          string
			Before, After json.RawMessage
		}
	}
	is.NoErr(json.Unmarshal(payload, &body))
	is.Equal(len(body.Changes), 1)
	is.Equal(body.Changes[0].Path, "name")

	// The baseline is the result of the task that settled last, the one that sent.
	last, err := facade(a).GetTask(ctx, org.ID, *deliveries[0].TaskID)
	is.NoErr(err)
	var baseline string
	is.NoErr(a.pool.QueryRow(ctx, `SELECT baseline FROM watches WHERE id = $1`, w.ID).Scan(&baseline))
	is.Equal(baseline, string(last.Data))
	var data struct{ Name string }
	is.NoErr(json.Unmarshal(last.Data, &data))
	is.Equal(string(body.Changes[0].After), fmt.Sprintf("%q", data.Name))
}

func TestWatchQueriesUseTheirIndexes(t *testing.T) {
	is := is.New(t)
	db, _ := newTestDB(t)
	for _, q := range []struct {
		name, sql, index string
		args             []any
	}{
		{"list", `SELECT id FROM watches WHERE org_id = $1 ORDER BY created_at, id LIMIT 10`, "watches_org_created", []any{"o"}},
		{"list by Loop", `SELECT id FROM watches WHERE org_id = $1 AND loop_id = $2 ORDER BY created_at, id LIMIT 10`,
			"watches_org_loop_created", []any{"o", "l"}},
		{"due", rebind(store.WatchQueries["DueWatches"].Query), "watches_due", []any{int64(1), 10, 100}},
		{"spend", rebind(store.WatchQueries["WatchSpend"].Query), "tasks_org_watch_created", []any{"o", int64(1)}},
		{"Loop's delete", `SELECT id FROM watches WHERE loop_id = $1`, "watches_loop", []any{"l"}},
	} {
		plan := explain(t, db, q.sql, q.args...)
		if !strings.Contains(plan, q.index) {
			t.Errorf("%s does not use %s:\n%s", q.name, q.index, plan)
		}
		is.True(!strings.Contains(plan, "Seq Scan"))
	}
}

// A watch task's watch_id is kept and read back; the migration adds it to tasks.
func TestWatchTaskKeepsItsWatchID(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, _ := newTestDB(t)
	org := newOrg(t, db, "acme", 10)
	id := "0190a000-0000-7000-8000-000000000000" // no foreign key: a deleted watch leaves its tasks
	nt := domainTask(org.ID, "stripe.com")
	nt.WatchID = &id
	task := enqueue(t, db, nt)
	got, err := facade(db).GetTask(ctx, org.ID, task.ID)
	is.NoErr(err)
	is.Equal(*got.WatchID, id)
	c, err := facade(db).ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	ok, err := facade(db).Settle(ctx, c, store.Outcome{Result: company("stripe.com"), Fetched: true})
	is.NoErr(err)
	is.True(ok) // its watch gone, the task settles all the same
}

// A settle locks its watch rather than count on the settles of its tasks being
// ordered by another row: two at once, each in its own transaction, apply both. Were
// the watch read without its lock, both would find no baseline, each would keep its
// own, and neither would send the change.
func TestSettleWatchTakesTheWatchInTurn(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := newTestDB(t)
	org := newOrg(t, db, "acme", 100)
	loop := companyLoop(t, db, org.ID)
	w, err := facade(db).CreateWatch(ctx, store.BySystem, domainWatch(org.ID, loop.ID, "stripe.com", clk.Now()))
	is.NoErr(err)
	var claims []*store.Claim
	for range 2 {
		nt := domainTask(org.ID, "stripe.com")
		nt.WatchID = &w.ID
		enqueue(t, db, nt)
		c, err := facade(db).ClaimTask(ctx, time.Minute)
		is.NoErr(err)
		claims = append(claims, c)
	}

	hold, err := db.pool.Begin(ctx)
	is.NoErr(err)
	_, err = hold.Exec(ctx, `SELECT 1 FROM watches WHERE id = $1 FOR UPDATE`, w.ID)
	is.NoErr(err)
	var wg sync.WaitGroup
	for i, name := range []string{"Stripe", "Stripe, Inc."} {
		wg.Go(func() {
			domain := "stripe.com"
			out := store.Outcome{Result: &enrich.Result{Company: &enrich.Company{Name: name, Domain: &domain}}, Fetched: true}
			if _, err := facade(db).Settle(ctx, claims[i], out); err != nil {
				t.Error(err)
			}
		})
	}
	waitForLockWaits(t, db, 2)
	is.NoErr(hold.Rollback(ctx))
	wg.Wait()

	var events []string
	var sentBy string
	rows, err := db.pool.Query(ctx, `SELECT event, task_id FROM deliveries WHERE loop_id = $1`, loop.ID)
	is.NoErr(err)
	for rows.Next() {
		var event string
		is.NoErr(rows.Scan(&event, &sentBy))
		events = append(events, event)
	}
	is.NoErr(rows.Err())
	is.Equal(events, []string{store.EventRecordChanged})
	last, err := facade(db).GetTask(ctx, org.ID, sentBy)
	is.NoErr(err)
	var baseline string
	is.NoErr(db.pool.QueryRow(ctx, `SELECT baseline FROM watches WHERE id = $1`, w.ID).Scan(&baseline))
	is.Equal(baseline, string(last.Data))
}

// One replica schedules a round at a time, from its claims to its last task: a
// second replica is told no until the first releases its hold.
func TestOneReplicaHoldsTheWatchScheduler(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := migratedDSN(t)
	c := &testClock{t: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	a, b := openTest(t, dsn, c), openTest(t, dsn, c)

	release, ok, err := a.HoldWatchScheduler(ctx)
	is.NoErr(err)
	is.True(ok)
	_, ok, err = b.HoldWatchScheduler(ctx)
	is.NoErr(err)
	is.True(!ok) // a is scheduling
	release()
	releaseB, ok, err := b.HoldWatchScheduler(ctx)
	is.NoErr(err)
	is.True(ok) // a's round is over
	releaseB()
}
