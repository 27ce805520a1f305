package storetest

import (
	"context"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/matryer/is"
)

// testClaimLooksPastALoopThatHasItsShare: a Loop with a long due backlog and all its
// share in flight must not hide another Loop's due delivery behind it.
func testClaimLooksPastALoopThatHasItsShare(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	slow := newLoop(t, db, org, "slow", enrich.ObjectCompany)
	fast := newLoop(t, db, org, "fast", enrich.ObjectCompany)
	var backlog []string
	for range 300 {
		d, err := db.CreateTestDelivery(ctx, org, slow.ID)
		is.NoErr(err)
		backlog = append(backlog, d.ID)
		clk.Add(time.Millisecond)
	}
	waiting, err := db.CreateTestDelivery(ctx, org, fast.ID)
	is.NoErr(err)
	clk.Add(time.Second)

	got, err := db.ClaimDeliveries(ctx, 1, 2, map[string]int{slow.ID: 2}, time.Minute)
	is.NoErr(err)
	is.Equal(len(got), 1)
	is.Equal(got[0].ID, waiting.ID)

	// Nothing in flight: oldest first, the slow Loop up to its share.
	got, err = db.ClaimDeliveries(ctx, 5, 2, nil, time.Minute)
	is.NoErr(err)
	is.Equal(len(got), 2)
	is.Equal(got[0].ID, backlog[0])
	is.Equal(got[1].ID, backlog[1])
	is.Equal(got[0].LoopID, slow.ID)
}

// A sender whose lease ran out mid-send (a slow receiver, a paused process) records
// its attempt after another sender claimed the same delivery again, sent it and
// recorded the receiver's acknowledgement: the late failure must not turn that
// success back into a pending delivery, to be sent once more.
func testALateAttemptDoesNotOverwriteANewerOutcome(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	clk := env.Clock
	a, b := env.DB, env.Open()
	org := NewOrg(t, a, "acme")
	loop := newLoop(t, a, org, "crm", enrich.ObjectCompany)
	_, err := a.CreateTestDelivery(ctx, org, loop.ID)
	is.NoErr(err)

	slow, err := a.ClaimDeliveries(ctx, 1, 8, nil, 30*time.Second)
	is.NoErr(err)
	is.Equal(len(slow), 1)
	clk.Add(31 * time.Second) // a's lease runs out while its receiver is slow
	fast, err := b.ClaimDeliveries(ctx, 1, 8, nil, 30*time.Second)
	is.NoErr(err)
	is.Equal(len(fast), 1)
	is.Equal(fast[0].ID, slow[0].ID)

	now := clk.Now()
	is.NoErr(b.RecordAttempts(ctx, []store.Attempted{{Dispatch: fast[0], Attempt: &store.Attempt{At: now, Ended: now, StatusCode: 204}}}))
	is.NoErr(a.RecordAttempts(ctx, []store.Attempted{{Dispatch: slow[0],
		Attempt: &store.Attempt{At: now.Add(-31 * time.Second), Ended: now, Err: "timeout"}}}))
	d, _, err := a.GetDelivery(ctx, org, fast[0].ID)
	is.NoErr(err)
	is.Equal(d.Status, store.DeliverySucceeded) // the receiver's acknowledgement stands
	is.Equal(d.Attempts, 1)
	is.True(d.LastStatusCode != nil && *d.LastStatusCode == 204)
	is.Equal(d.LastError, (*string)(nil))

	// Nor does the late sender's release of its claim free the delivery.
	_, err = a.CreateTestDelivery(ctx, org, loop.ID)
	is.NoErr(err)
	first, err := a.ClaimDeliveries(ctx, 1, 8, nil, 30*time.Second)
	is.NoErr(err)
	is.Equal(len(first), 1)
	clk.Add(31 * time.Second)
	second, err := b.ClaimDeliveries(ctx, 1, 8, nil, 30*time.Second)
	is.NoErr(err)
	is.Equal(len(second), 1)
	is.NoErr(a.RecordAttempts(ctx, []store.Attempted{{Dispatch: first[0]}})) // released unsent
	again, err := a.ClaimDeliveries(ctx, 1, 8, nil, 30*time.Second)
	is.NoErr(err)
	is.Equal(len(again), 0) // still b's
}
