package storetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/matryer/is"
)

// testSeedLedgerAddsUp seeds a month of charges: the ledger, the grants and the
// balance (read from the daily sums) agree, and every day of the month was charged.
func testSeedLedgerAddsUp(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	grant, err := db.GrantCredits(ctx, "acme", 10_000, nil)
	is.NoErr(err)
	is.NoErr(db.SeedLedger(ctx, org, grant, 3000, 30*24*time.Hour))

	b, err := db.CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(b.Charged, int64(3000))
	is.Equal(b.Refund, int64(300)) // one in ten
	is.Equal(b.Balance, int64(10_000-3000+300))
	is.Equal(ledgerAddsUp(t, env, org), b.Balance) // the raw ledger, and the grant's remaining

	days, err := db.DailyCredits(ctx, org, 30, clk.Now())
	is.NoErr(err)
	for _, d := range days {
		if d.Charged == 0 {
			t.Errorf("%s: nothing charged", d.Day.Format(time.DateOnly))
		}
	}
	page, err := db.LedgerPage(ctx, org, 0, 2)
	is.NoErr(err)
	is.True(page[0].CreatedAt.After(clk.Now().Add(-time.Hour))) // the newest first, just before now
	is.True(page[0].TaskID != nil)
}

// testSeedDeliveries seeds a Loop's history: listed newest first, all delivered, none
// due for the sender, and another organization cannot seed into the Loop.
func testSeedDeliveries(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	org := NewOrg(t, db, "acme")
	other := NewOrg(t, db, "other")
	loop, err := db.CreateLoop(ctx, store.NewLoop{OrgID: org, Name: "crm", ObjectType: "company", Enabled: true, WebhookURL: "https://example.com/hook"})
	is.NoErr(err)
	is.NoErr(db.SeedDeliveries(ctx, org, loop.ID, 120))

	page, total, err := db.ListDeliveries(ctx, org, loop.ID, 0, 50)
	is.NoErr(err)
	is.Equal(total, int64(120))
	is.Equal(len(page), 50)
	is.True(page[0].CreatedAt.After(page[49].CreatedAt)) // newest first
	for _, d := range page {
		is.Equal(d.Status, store.DeliverySucceeded)
		is.Equal(*d.LastStatusCode, 204)
	}
	_, payload, err := db.GetDelivery(ctx, org, page[0].ID)
	is.NoErr(err)
	is.True(json.Valid(payload))
	due, err := db.ClaimDeliveries(ctx, 10, 10, nil, time.Minute)
	is.NoErr(err)
	is.Equal(len(due), 0) // delivered already

	is.Equal(enrich.KindOf(db.SeedDeliveries(ctx, other, loop.ID, 1)), enrich.KindNotFound)
}
