package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/matryer/is"
)

// testSourceSpendAddsUpPerOrgSourceDay: each ask adds to its organization's row of the
// source and UTC day, apart for the organization's own key; a month's figures, its
// days and the budgets' counts add them up, another organization's and another
// month's left out; a second handle (another process, a replica, a restart) reads the
// same.
func testSourceSpendAddsUpPerOrgSourceDay(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	acme, other := NewOrg(t, db, "acme"), NewOrg(t, db, "other")
	month := store.MonthStart(env.Clock.Now()) // 2026-11-01
	lastMonth := month.Add(-time.Hour)
	day2 := month.Add(36 * time.Hour)

	hit := store.UseOf(enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeHit, VendorCalls: 1, Credits: 1})
	miss := store.UseOf(enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeMiss, VendorCalls: 1})
	failed := store.UseOf(enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeError, VendorCalls: 3})
	search := store.UseOf(enrich.SourceCall{Name: "enrichlayer", Outcome: enrich.OutcomeHit, VendorCalls: 2, Credits: 11})
	for _, s := range []struct {
		org, source string
		own         bool
		at          time.Time
		use         store.SourceUse
	}{
		{acme, "pdl", false, month.Add(time.Hour), hit},
		{acme, "pdl", false, month.Add(2 * time.Hour), hit},
		{acme, "pdl", false, month.Add(3 * time.Hour), miss},
		{acme, "pdl", true, day2, hit},
		{acme, "pdl", false, day2, failed},
		{acme, "enrichlayer", false, day2, search},
		{acme, "pdl", false, lastMonth, hit}, // another month
		{other, "pdl", false, day2, hit},     // another organization
		{other, "pdl", true, day2, hit},      // its own key: not the installation's
	} {
		is.NoErr(db.AddSourceSpend(ctx, s.org, s.source, s.own, s.at, s.use))
	}

	for _, handle := range []*store.DB{db, env.Open()} {
		got, err := handle.SourceSpendSince(ctx, acme, month)
		is.NoErr(err)
		is.Equal(len(got), 2)
		pdl := got["pdl"]
		is.Equal(pdl.Total, store.SourceUse{Calls: 7, Hits: 3, Misses: 1, Errors: 1, Credits: 3})
		is.Equal(pdl.OwnKey, store.SourceUse{Calls: 1, Hits: 1, Credits: 1})
		is.Equal(len(pdl.Days), 2)
		is.True(pdl.Days[0].Day.Equal(month))
		is.Equal(pdl.Days[0].SourceUse, store.SourceUse{Calls: 3, Hits: 2, Misses: 1, Credits: 2})
		is.True(pdl.Days[1].Day.Equal(store.DayStart(day2)))
		is.Equal(pdl.Days[1].SourceUse, store.SourceUse{Calls: 4, Hits: 1, Errors: 1, Credits: 1})
		is.Equal(got["enrichlayer"].Total, store.SourceUse{Calls: 2, Hits: 1, Credits: 11})

		st, err := handle.SourceBudgetState(ctx, acme, "pdl", month, true)
		is.NoErr(err)
		// No cap in the database; the installation's count was asked for (a flag's cap).
		is.Equal(st, store.BudgetState{InstallationSpent: 3}) // acme's 2 and other's 1 with the installation's keys
	}

	is.NoErr(db.SetSourceBudget(ctx, acme, "pdl", 100))
	is.NoErr(db.SetSourceBudget(ctx, "", "pdl", 1000))
	st, err := db.SourceBudgetState(ctx, acme, "pdl", month, false)
	is.NoErr(err)
	is.Equal(st, store.BudgetState{OrgCap: 100, InstallationCap: 1000, OrgSpent: 3, InstallationSpent: 3})
	st, err = db.SourceBudgetState(ctx, other, "pdl", month, false)
	is.NoErr(err)
	is.Equal(st, store.BudgetState{InstallationCap: 1000, InstallationSpent: 3}) // acme's cap is acme's
}

// testSourceSpendFromManyWritersAddsUp: asks recorded at once from two handles are
// all counted, none lost to the other's write.
func testSourceSpendFromManyWritersAddsUp(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	acme := NewOrg(t, env.DB, "acme")
	handles := []*store.DB{env.DB, env.Open()}
	one := store.SourceUse{Calls: 1, Hits: 1, Credits: 2}
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- handles[i%2].AddSourceSpend(ctx, acme, "pdl", false, env.Clock.Now(), one)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		is.NoErr(err)
	}
	got, err := env.DB.SourceSpendSince(ctx, acme, store.MonthStart(env.Clock.Now()))
	is.NoErr(err)
	is.Equal(got["pdl"].Total, store.SourceUse{Calls: 40, Hits: 40, Credits: 80})
}

// testSourceBudgetsSetReplaceClearAndRefuse: a budget is set, replaced, cleared by 0;
// a bad one is refused and changes nothing.
func testSourceBudgetsSetReplaceClearAndRefuse(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	acme := NewOrg(t, db, "acme")
	is.NoErr(db.SetSourceBudget(ctx, acme, "pdl", 5000))
	is.NoErr(db.SetSourceBudget(ctx, acme, "pdl", 4000))
	is.NoErr(db.SetSourceBudget(ctx, acme, "apollo", 10))
	is.NoErr(db.SetSourceBudget(ctx, "", "pdl", 20000))
	for _, bad := range []struct {
		source  string
		credits int64
	}{{"pdl", -1}, {"pdl", store.MaxBudget + 1}, {"", 5}, {" ", 5}} {
		err := db.SetSourceBudget(ctx, acme, bad.source, bad.credits)
		is.True(err != nil)
		is.Equal(enrich.KindOf(err), enrich.KindInvalid)
	}
	org, inst, err := db.SourceBudgets(ctx, acme)
	is.NoErr(err)
	is.Equal(org, map[string]int64{"pdl": 4000, "apollo": 10})
	is.Equal(inst, map[string]int64{"pdl": 20000})

	is.NoErr(db.SetSourceBudget(ctx, acme, "apollo", 0))
	is.NoErr(db.SetSourceBudget(ctx, acme, "apollo", 0)) // clearing what is not set is no error
	org, _, err = db.SourceBudgets(ctx, acme)
	is.NoErr(err)
	is.Equal(org, map[string]int64{"pdl": 4000})
	other := NewOrg(t, db, "other")
	org, inst, err = db.SourceBudgets(ctx, other)
	is.NoErr(err)
	is.Equal(org, map[string]int64{})
	is.Equal(inst, map[string]int64{"pdl": 20000})
}

// testAsksOnTheBooksCountUntilSettled: an ask booked is in the month's figures
// (Pending) and against the caps at what it is booked at, for every handle; a booking
// past a cap is refused and writes nothing; the organization's own key is bound by its
// cap alone; an ask settled counts what it cost, on the day it was booked on, and is
// settled once; one that sent nothing leaves nothing.
func testAsksOnTheBooksCountUntilSettled(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, other := env.DB, env.Open()
	acme, globex := NewOrg(t, db, "acme"), NewOrg(t, db, "globex")
	month := store.MonthStart(env.Clock.Now())
	is.NoErr(db.SetSourceBudget(ctx, acme, "pdl", 5))
	is.NoErr(db.AddSourceSpend(ctx, acme, "pdl", false, env.Clock.Now(), store.SourceUse{Calls: 2, Hits: 2, Credits: 2}))

	book := func(handle *store.DB, org string, own bool, credits, flagCap int64) (store.SourceAsk, bool) {
		t.Helper()
		a := store.SourceAsk{OrgID: org, Source: "pdl", OwnKey: own, Owner: "p1", Calls: 1, Credits: credits}
		ok, err := handle.BookSourceAsk(ctx, &a, flagCap)
		is.NoErr(err)
		is.Equal(a.ID != "", ok)
		return a, ok
	}
	first, ok := book(db, acme, false, 1, 0)
	is.True(ok)
	is.NoErr(db.AddToSourceAsk(ctx, first, 1, 2)) // a second request, of 2 credits, about to leave
	for _, handle := range []*store.DB{db, other} {
		got, err := handle.SourceSpendSince(ctx, acme, month)
		is.NoErr(err)
		is.Equal(got["pdl"].Total, store.SourceUse{Calls: 4, Hits: 2, Pending: 1, Credits: 5})
		is.Equal(got["pdl"].Days[0].SourceUse, store.SourceUse{Calls: 4, Hits: 2, Pending: 1, Credits: 5})
		st, err := handle.SourceBudgetState(ctx, acme, "pdl", month, true)
		is.NoErr(err)
		is.Equal(st, store.BudgetState{OrgCap: 5, OrgSpent: 5, InstallationSpent: 5})
	}
	// The cap of 5 is reached by the ask on the books: no handle books another.
	_, ok = book(other, acme, false, 1, 0)
	is.True(!ok)
	_, ok = book(other, acme, true, 1, 0) // its own key is bound by its own cap too
	is.True(!ok)
	var rows int
	is.NoErr(db.Reader().QueryRow(ctx, `SELECT count(*) FROM source_asks`).Scan(&rows))
	is.Equal(rows, 1) // a refused booking writes nothing
	// The installation's cap, the flag's here, binds the installation's keys, every
	// organization's, and not an organization's own.
	_, ok = book(other, globex, false, 1, 5)
	is.True(!ok)
	own, ok := book(other, globex, true, 1, 5)
	is.True(ok)

	// Settled: what the ask cost replaces what it was booked at, on the day it was
	// booked on, though the answer came the next day.
	env.Clock.Add(24 * time.Hour)
	settled, err := other.SettleSourceAsk(ctx, first.ID, store.SourceUse{Calls: 2, Hits: 1, Credits: 1})
	is.NoErr(err)
	is.True(settled)
	settled, err = db.SettleSourceAsk(ctx, first.ID, store.SourceUse{Calls: 2, Hits: 1, Credits: 1})
	is.NoErr(err)
	is.True(!settled) // once
	got, err := db.SourceSpendSince(ctx, acme, month)
	is.NoErr(err)
	is.Equal(got["pdl"].Total, store.SourceUse{Calls: 4, Hits: 3, Credits: 3})
	is.Equal(len(got["pdl"].Days), 1)
	_, ok = book(db, acme, false, 1, 0) // 3 of 5: room again
	is.True(ok)

	// An ask that sent nothing leaves nothing but its going.
	settled, err = db.SettleSourceAsk(ctx, own.ID, store.SourceUse{Misses: 1})
	is.NoErr(err)
	is.True(settled)
	got, err = db.SourceSpendSince(ctx, globex, month)
	is.NoErr(err)
	is.Equal(len(got), 0)

	// An ask a sweep took off the books is put back on by its next request, with that
	// request alone.
	gone := store.SourceAsk{ID: "taken-off", OrgID: globex, Source: "pdl", Owner: "p1"}
	is.NoErr(db.AddToSourceAsk(ctx, gone, 1, 10))
	got, err = db.SourceSpendSince(ctx, globex, month)
	is.NoErr(err)
	is.Equal(got["pdl"].Total, store.SourceUse{Calls: 1, Pending: 1, Credits: 10})
}

// testBookingsFromManyWritersKeepTheCap: asks booked at once from two handles (two
// processes, two replicas) against one cap take exactly the room it leaves, and
// those settled free theirs.
func testBookingsFromManyWritersKeepTheCap(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	acme := NewOrg(t, env.DB, "acme")
	is.NoErr(env.DB.SetSourceBudget(ctx, acme, "pdl", 12))
	handles := []*store.DB{env.DB, env.Open()}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var booked []store.SourceAsk
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := store.SourceAsk{OrgID: acme, Source: "pdl", Owner: "p", Calls: 1, Credits: 2}
			ok, err := handles[i%2].BookSourceAsk(ctx, &a, 0)
			if ok {
				mu.Lock()
				booked = append(booked, a)
				mu.Unlock()
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		is.NoErr(err)
	}
	is.Equal(len(booked), 6) // 6 asks of 2 credits under a cap of 12
	settled, err := handles[1].SettleSourceAsk(ctx, booked[0].ID, store.SourceUse{Calls: 1, Misses: 1})
	is.NoErr(err)
	is.True(settled)
	a := store.SourceAsk{OrgID: acme, Source: "pdl", Owner: "p", Calls: 1, Credits: 2}
	ok, err := handles[0].BookSourceAsk(ctx, &a, 0)
	is.NoErr(err)
	is.True(ok) // the miss cost nothing: its 2 credits are free again
}

// testAsksOfAGoneProcessAreSettledUnknown: a sweep settles as unknown, at what they are
// booked at, the asks of processes that are gone, and not those of live ones. With
// replicas that heartbeat (PostgreSQL), one is gone once its heartbeat has run out,
// and only its asks booked before the cutoff are taken; where one process serves
// (SQLite), every process but the sweeper is. Anyone's ask booked before the stale
// cutoff is settled too; a late settling of a swept ask changes nothing.
func testAsksOfAGoneProcessAreSettledUnknown(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	acme := NewOrg(t, db, "acme")
	month := store.MonthStart(env.Clock.Now())
	book := func(owner string, calls, credits int64) store.SourceAsk {
		t.Helper()
		a := store.SourceAsk{OrgID: acme, Source: "pdl", Owner: owner, Calls: calls, Credits: credits}
		ok, err := db.BookSourceAsk(ctx, &a, 0)
		is.NoErr(err)
		is.True(ok)
		return a
	}
	if env.Postgres() { // the sweeper's and a live replica's heartbeats last
		_, err := db.Heartbeat(ctx, "sweeper", time.Hour)
		is.NoErr(err)
		_, err = db.Heartbeat(ctx, "live", time.Hour)
		is.NoErr(err)
		_, err = db.Heartbeat(ctx, "killed", 15*time.Second)
		is.NoErr(err)
	}
	killed := book("killed", 2, 3)
	book("killed", 1, 1)
	book("sweeper", 1, 1)
	live := book("live", 1, 1)
	figures := func() store.SourceUse {
		t.Helper()
		got, err := db.SourceSpendSince(ctx, acme, month)
		is.NoErr(err)
		return got["pdl"].Total
	}
	is.Equal(figures(), store.SourceUse{Calls: 5, Pending: 4, Credits: 6})

	env.Clock.Add(20 * time.Second) // the killed replica's heartbeat is out
	now := env.Clock.Now()
	n, err := db.SettleDeadSourceAsks(ctx, "sweeper", now.Add(-30*time.Second), now.Add(-time.Hour))
	is.NoErr(err)
	if env.Postgres() {
		// Booked within the last 30 s: a replica's asks may come before its first
		// heartbeat is in. Once that is past, the killed replica's are taken.
		is.Equal(n, 0)
		n, err = db.SettleDeadSourceAsks(ctx, "sweeper", now, now.Add(-time.Hour))
		is.NoErr(err)
		is.Equal(n, 2)
		is.Equal(figures(), store.SourceUse{Calls: 5, Unknown: 2, Pending: 2, Credits: 6})
	} else {
		is.Equal(n, 3) // at once, every process's but the sweeper's, "live" among them
		is.Equal(figures(), store.SourceUse{Calls: 5, Unknown: 3, Pending: 1, Credits: 6})
	}
	st, err := db.SourceBudgetState(ctx, acme, "pdl", month, true)
	is.NoErr(err)
	is.Equal(st.InstallationSpent, int64(6)) // still counted, at full price

	// A late answer to a swept ask: not counted again.
	settled, err := db.SettleSourceAsk(ctx, killed.ID, store.SourceUse{Calls: 2, Hits: 1, Credits: 1})
	is.NoErr(err)
	is.True(!settled)
	if env.Postgres() {
		settled, err = db.SettleSourceAsk(ctx, live.ID, store.SourceUse{Calls: 1, Hits: 1, Credits: 1})
		is.NoErr(err)
		is.True(settled) // a live replica's ask was left to it
	}

	// Older than a task lives: settled, the sweeper's own included.
	env.Clock.Add(time.Hour)
	now = env.Clock.Now()
	n, err = db.SettleDeadSourceAsks(ctx, "sweeper", now, now.Add(-30*time.Minute))
	is.NoErr(err)
	is.Equal(n, 1)
	want := store.SourceUse{Calls: 5, Unknown: 4, Credits: 6}
	if env.Postgres() {
		want = store.SourceUse{Calls: 5, Hits: 1, Unknown: 3, Credits: 6}
	}
	is.Equal(figures(), want)
	n, err = db.SettleDeadSourceAsks(ctx, "sweeper", now, now.Add(-30*time.Minute))
	is.NoErr(err)
	is.Equal(n, 0) // nothing left: a read, no write
}

// testAsksSettleWithTheirTask: the asks a task answered are settled by the write that
// settles it (Outcome.Asks), each as SettleSourceAsk would, one a sweep took first
// marked Unbooked and not counted twice; and a task whose claim was lost still has
// its asks settled, the vendor having answered them.
func testAsksSettleWithTheirTask(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	acme := NewOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 10, nil)
	is.NoErr(err)
	month := store.MonthStart(env.Clock.Now())
	book := func(credits int64) store.SourceAsk {
		t.Helper()
		a := store.SourceAsk{OrgID: acme, Source: "pdl", Owner: "p1", Calls: 1, Credits: credits}
		ok, err := db.BookSourceAsk(ctx, &a, 0)
		is.NoErr(err)
		is.True(ok)
		return a
	}
	spent := func() store.SourceUse {
		t.Helper()
		got, err := db.SourceSpendSince(ctx, acme, month)
		is.NoErr(err)
		return got["pdl"].Total
	}
	first, err := db.CreateTask(ctx, store.BySystem, NewTask(acme, "a.com"))
	is.NoErr(err)
	second, err := db.CreateTask(ctx, store.BySystem, NewTask(acme, "b.com"))
	is.NoErr(err)
	c, err := db.ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	is.Equal(c.TaskID, first.Task.ID)

	hit, swept := book(3), book(2)
	settled, err := db.SettleSourceAsk(ctx, swept.ID, store.SourceUse{Unknown: 1, Calls: 1, Credits: 2}) // as a sweep would
	is.NoErr(err)
	is.True(settled)
	is.Equal(spent(), store.SourceUse{Calls: 2, Unknown: 1, Pending: 1, Credits: 5}) // the hit at its booking
	other := store.SourceAsk{OrgID: acme, Source: "apollo", Owner: "p1", Calls: 1, Credits: 1}
	ok, err := db.BookSourceAsk(ctx, &other, 0)
	is.NoErr(err)
	is.True(ok)
	asks := []store.AnsweredAsk{
		{ID: other.ID, Use: store.SourceUse{Calls: 1, Misses: 1}}, // of another source: its own row
		{ID: hit.ID, Use: store.SourceUse{Calls: 1, Hits: 1, Credits: 1}},
		{ID: swept.ID, Use: store.SourceUse{Calls: 1, Hits: 1, Credits: 2}},
	}
	res := enrich.Result{Company: &enrich.Company{Name: "A", Domain: enrich.Ptr("a.com")}}
	settled, err = db.Settle(ctx, c, store.Outcome{Result: &res, Fetched: true, Asks: asks})
	is.NoErr(err)
	is.True(settled)
	is.Equal(asks[0].Unbooked, false)
	is.Equal(asks[1].Unbooked, false)
	is.Equal(asks[2].Unbooked, true) // the sweep's unknown stands; the answer adds nothing
	is.Equal(spent(), store.SourceUse{Calls: 2, Hits: 1, Unknown: 1, Credits: 3})
	got, err := db.SourceSpendSince(ctx, acme, month)
	is.NoErr(err)
	is.Equal(got["apollo"].Total, store.SourceUse{Calls: 1, Misses: 1})
	task, err := db.GetTask(ctx, acme, first.Task.ID)
	is.NoErr(err)
	is.Equal(task.Status, store.StatusSucceeded)

	// The second task's claim is lost (its lease ran out and the sweep put it back):
	// its settle writes no result, but its answered ask is settled all the same.
	next, err := db.ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	is.Equal(next.TaskID, second.Task.ID)
	lost := book(4)
	env.Clock.Add(2 * time.Minute)
	n, _, err := db.RequeueAbandoned(ctx)
	is.NoErr(err)
	is.Equal(n, 1)
	settled, err = db.Settle(ctx, next, store.Outcome{Result: &res, Fetched: true,
		Asks: []store.AnsweredAsk{{ID: lost.ID, Use: store.SourceUse{Calls: 1, Misses: 1}}}})
	is.NoErr(err)
	is.True(!settled)
	is.Equal(spent(), store.SourceUse{Calls: 3, Hits: 1, Misses: 1, Unknown: 1, Credits: 3})
	task, err = db.GetTask(ctx, acme, second.Task.ID)
	is.NoErr(err)
	is.Equal(task.Status, store.StatusQueued)
}
