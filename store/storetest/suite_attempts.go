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
