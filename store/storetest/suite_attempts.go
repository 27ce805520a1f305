package storetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/matryer/is"
)

// A task whose claims keep being lost (its worker's process dies each time, so the
// lease runs out) is not claimed for ever: after MaxTaskAttempts it fails, refunded.
func testATaskWhoseClaimsKeepBeingLostFailsAfterTheLastAttempt(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 10, nil)
	is.NoErr(err)
	created, err := db.CreateTask(ctx, store.BySystem, NewTask(org, "a.com"))
	is.NoErr(err)

	for attempt := 1; attempt <= store.MaxTaskAttempts; attempt++ {
		c, err := db.ClaimTask(ctx, 30*time.Second)
		is.NoErr(err)
		is.True(c != nil)
		is.Equal(c.TaskID, created.Task.ID)
		clk.Add(31 * time.Second) // the process died holding it
		n, gaveUp, err := db.RequeueAbandoned(ctx)
		is.NoErr(err)
		if attempt < store.MaxTaskAttempts {
			is.Equal(n, 1) // claimed again
			is.Equal(len(gaveUp), 0)
			continue
		}
		is.Equal(n, 0)
		is.Equal(len(gaveUp), 1)
		is.Equal(gaveUp[0].ID, created.Task.ID)
		is.Equal(gaveUp[0].CreditsCharged, int64(1))
	}
	c, err := db.ClaimTask(ctx, 30*time.Second)
	is.NoErr(err)
	is.Equal(c, nil) // never claimed again

	task, err := db.GetTask(ctx, org, created.Task.ID)
	is.NoErr(err)
	is.Equal(task.Status, store.StatusFailed)
	is.Equal(task.Error.Code, enrich.CodeInternalError)
	is.True(strings.Contains(task.Error.Message, "started 5 times"))
	is.True(task.FinishedAt != nil)
	b, err := db.CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(b.Charged, int64(1))
	is.Equal(b.Refund, int64(1))
	is.Equal(b.Balance, int64(10))
}

// A claim given back at a shutdown is not a lost one: a task released any number of
// times is still claimed, and its lost claims are counted from zero.
func testReleasedClaimsDoNotCountAsAttempts(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 10, nil)
	is.NoErr(err)
	created, err := db.CreateTask(ctx, store.BySystem, NewTask(org, "a.com"))
	is.NoErr(err)
	for range 2 * store.MaxTaskAttempts {
		c, err := db.ClaimTask(ctx, 30*time.Second)
		is.NoErr(err)
		is.NoErr(db.ReleaseTask(ctx, c))
	}
	for range store.MaxTaskAttempts - 1 {
		_, err := db.ClaimTask(ctx, 30*time.Second)
		is.NoErr(err)
		clk.Add(31 * time.Second)
		n, gaveUp, err := db.RequeueAbandoned(ctx)
		is.NoErr(err)
		is.Equal(n, 1)
		is.Equal(len(gaveUp), 0)
	}
	task, err := db.GetTask(ctx, org, created.Task.ID)
	is.NoErr(err)
	is.Equal(task.Status, store.StatusQueued)
}

// testASettleClaimsTheNextTaskInItsWrite: where one writer runs every write,
// SettleAndClaim settles the task and claims the next in that write, the organizations
// in turn as ClaimTask's; after a lost claim too (the next organization's task, then
// the one the sweep put back); nothing when nothing is queued. Elsewhere it settles alone and claims
// nothing, and the worker claims in a write of its own.
func testASettleClaimsTheNextTaskInItsWrite(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	acme, globex := NewOrg(t, db, "acme"), NewOrg(t, db, "globex")
	for _, org := range []string{"acme", "globex"} {
		_, err := db.GrantCredits(ctx, org, 10, nil)
		is.NoErr(err)
	}
	a1, err := db.CreateTask(ctx, store.BySystem, NewTask(acme, "a1.com"))
	is.NoErr(err)
	a2, err := db.CreateTask(ctx, store.BySystem, NewTask(acme, "a2.com"))
	is.NoErr(err)
	g1, err := db.CreateTask(ctx, store.BySystem, NewTask(globex, "g1.com"))
	is.NoErr(err)
	res := enrich.Result{Company: &enrich.Company{Name: "A", Domain: enrich.Ptr("a1.com")}}
	done := store.Outcome{Result: &res, Fetched: true}
	// settleAndClaim is SettleAndClaim, with the worker's claim of its own where the
	// engine claims nothing in the settle.
	settleAndClaim := func(c *store.Claim) (bool, *store.Claim) {
		t.Helper()
		settled, next, err := db.SettleAndClaim(ctx, c, done, time.Minute)
		is.NoErr(err)
		if !db.SingleWriter() {
			is.Equal(next, nil)
			next, err = db.ClaimTask(ctx, time.Minute)
			is.NoErr(err)
		}
		return settled, next
	}
	status := func(org, id string) string {
		t.Helper()
		task, err := db.GetTask(ctx, org, id)
		is.NoErr(err)
		return task.Status
	}

	c, err := db.ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	is.Equal(c.TaskID, a1.Task.ID)
	settled, next := settleAndClaim(c)
	is.True(settled)
	is.Equal(status(acme, a1.Task.ID), store.StatusSucceeded)
	is.Equal(next.TaskID, g1.Task.ID) // globex's turn, then acme's
	is.Equal(status(globex, g1.Task.ID), store.StatusRunning)
	is.True(next.Token != c.Token)

	// globex's claim is lost: its settle changes nothing, and the next task is acme's
	// second, then globex's, put back by the sweep.
	clk.Add(2 * time.Minute)
	n, _, err := db.RequeueAbandoned(ctx)
	is.NoErr(err)
	is.Equal(n, 1)
	settled, next = settleAndClaim(next)
	is.True(!settled)
	is.Equal(next.TaskID, a2.Task.ID)
	settled, next = settleAndClaim(next)
	is.True(settled)
	is.Equal(next.TaskID, g1.Task.ID)
	settled, next = settleAndClaim(next)
	is.True(settled)
	is.Equal(next, nil) // nothing queued
	for org, id := range map[string]string{acme: a2.Task.ID, globex: g1.Task.ID} {
		is.Equal(status(org, id), store.StatusSucceeded)
	}
}
