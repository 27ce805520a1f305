package storetest

import (
	"context"
	"testing"
	"time"

	"enrichd/enrich"

	"github.com/matryer/is"
)

// testClaimLooksPastALoopThatHasItsShare: a Loop with a long due backlog and all its
// share in flight must not hide another Loop's due delivery behind it.
func testClaimLooksPastALoopThatHasItsShare(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := newOrg(t, db, "acme")
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
