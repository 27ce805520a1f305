package storetest

import (
	"context"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/matryer/is"
)

// ledgerAddsUp is LedgerAddsUp on the test's database.
func ledgerAddsUp(t *testing.T, env *Env, orgID string) (balance int64) {
	t.Helper()
	return LedgerAddsUp(t, env.Raw(), orgID)
}

// LedgerAddsUp checks the invariants of the ledger of one organization: the balance
// derived from it, and the grants' spendable remainder that charges draw on, agree.
func LedgerAddsUp(t *testing.T, raw Querier, orgID string) (balance int64) {
	t.Helper()
	var granted, charged, refunded, expired, spendable int64
	if err := raw.QueryRow(`SELECT
		coalesce(sum(CASE kind WHEN 'grant' THEN amount END), 0), coalesce(sum(CASE kind WHEN 'charge' THEN amount END), 0),
		coalesce(sum(CASE kind WHEN 'refund' THEN amount END), 0), coalesce(sum(CASE kind WHEN 'expiry' THEN amount END), 0)
		FROM credit_ledger WHERE org_id = ?`, orgID).Scan(&granted, &charged, &refunded, &expired); err != nil {
		t.Fatal(err)
	}
	if err := raw.QueryRow(`SELECT coalesce(sum(remaining), 0) FROM credit_grants WHERE org_id = ? AND expired_at IS NULL`, orgID).Scan(&spendable); err != nil {
		t.Fatal(err)
	}
	balance = granted - charged + refunded - expired
	if balance != spendable {
		t.Fatalf("ledger says %d, grants hold %d", balance, spendable)
	}
	return balance
}

// testRetentionDeletesOnlyOldSettledRows settles tasks and deliveries, moves the clock
// past the retention window, adds recent ones, and purges in small batches: the old
// settled rows go, with their idempotency keys; unsettled tasks, pending deliveries
// and recent rows stay; the ledger keeps every row and still adds up.
func testRetentionDeletesOnlyOldSettledRows(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 100, nil)
	is.NoErr(err)
	loop, err := db.CreateLoop(ctx, store.NewLoop{OrgID: org, Name: "crm", ObjectType: "company", Enabled: true, WebhookURL: "https://example.com/hook"})
	is.NoErr(err)

	// create makes a task; with settle it is claimed and settled (failed when fail).
	create := func(domain, key string) string {
		nt := NewTask(org, domain)
		nt.LoopID, nt.IdempotencyKey, nt.BodyHash = &loop.ID, key, "h-"+domain
		nt.TTL = 365 * 24 * time.Hour
		res, err := db.CreateTask(ctx, store.BySystem, nt)
		is.NoErr(err)
		return res.Task.ID
	}
	settleNext := func(fail bool) {
		c, err := db.ClaimTask(ctx, time.Minute)
		is.NoErr(err)
		out := store.Outcome{Result: &enrich.Result{Company: &enrich.Company{Name: "X", Domain: enrich.Ptr(c.Input.Target)}}, Fetched: true}
		if fail {
			out = store.Outcome{Err: &enrich.TaskError{Code: enrich.CodeNotFound, Message: "no"}}
		}
		ok, err := db.Settle(ctx, c, out)
		is.NoErr(err)
		is.True(ok)
	}
	// deliverAll sends every due delivery once: acknowledged, or failed for good.
	deliverAll := func(ack bool) {
		ds, err := db.ClaimDeliveries(ctx, 100, 100, map[string]int{}, time.Minute)
		is.NoErr(err)
		var done []store.Attempted
		for _, d := range ds {
			a := &store.Attempt{At: clk.Now(), StatusCode: 200}
			if !ack {
				d.Attempt, a.StatusCode, a.Err = store.MaxAttempts, 500, "the receiver answered 500"
			}
			done = append(done, store.Attempted{Dispatch: d, Attempt: a})
		}
		is.NoErr(db.RecordAttempts(ctx, done))
	}

	oldOK := create("old-ok.com", "k-old")
	settleNext(false)
	deliverAll(true)
	oldFailed := create("old-failed.com", "")
	settleNext(true)
	deliverAll(false)
	oldCanceled := create("old-canceled.com", "")
	_, err = db.CancelTask(ctx, org, oldCanceled)
	is.NoErr(err)
	oldQueued := create("old-queued.com", "k-queued")
	pending, err := db.CreateTestDelivery(ctx, org, loop.ID) // never sent
	is.NoErr(err)

	clk.Add(100 * 24 * time.Hour)
	recent := create("recent.com", "k-recent")
	_, err = db.CancelTask(ctx, org, recent)
	is.NoErr(err)
	recentDelivery, err := db.CreateTestDelivery(ctx, org, loop.ID)
	is.NoErr(err)
	// Sends recentDelivery, and the old pending one too: its last attempt is recent,
	// so it stays, however old it is.
	deliverAll(true)
	stillPending, err := db.CreateTestDelivery(ctx, org, loop.ID)
	is.NoErr(err)

	ledgerBefore, err := db.CreditLedger(ctx, "acme")
	is.NoErr(err)
	balanceBefore := ledgerAddsUp(t, env, org)

	cutoff := clk.Now().Add(-90 * 24 * time.Hour)
	var total store.Purged
	for batches := 0; ; batches++ {
		p, err := db.PurgeSettled(ctx, cutoff, 2)
		is.NoErr(err)
		is.True(p.Tasks <= 2 && p.Deliveries <= 2) // each batch stays small
		total.Tasks += p.Tasks
		total.Deliveries += p.Deliveries
		if p.Tasks < 2 && p.Deliveries < 2 {
			break
		}
		is.True(batches < 10)
	}
	is.Equal(total, store.Purged{Tasks: 3, Deliveries: 2}) // old ok, failed, canceled; their two deliveries

	for _, id := range []string{oldOK, oldFailed, oldCanceled} {
		_, err := db.GetTask(ctx, org, id)
		is.Equal(enrich.KindOf(err), enrich.KindNotFound)
	}
	for _, id := range []string{oldQueued, recent} {
		_, err := db.GetTask(ctx, org, id)
		is.NoErr(err) // unsettled or recent: kept
	}
	list, n, err := db.ListDeliveries(ctx, org, loop.ID, 0, 10)
	is.NoErr(err)
	is.Equal(n, int64(3))
	kept := map[string]string{}
	for _, d := range list {
		kept[d.ID] = d.Status
	}
	is.Equal(kept, map[string]string{pending.ID: "succeeded", recentDelivery.ID: "succeeded", stillPending.ID: "pending"})

	// The ledger lost nothing: same rows, same balance, still adding up.
	ledgerAfter, err := db.CreditLedger(ctx, "acme")
	is.NoErr(err)
	is.Equal(ledgerAfter, ledgerBefore)
	is.Equal(ledgerAddsUp(t, env, org), balanceBefore)
	b, err := db.CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(b.Balance, balanceBefore)

	// A purged task's idempotency key went with it: the same key starts a new task.
	// The unsettled task's key still replays.
	nt := NewTask(org, "old-ok.com")
	nt.LoopID, nt.IdempotencyKey, nt.BodyHash = &loop.ID, "k-old", "h-old-ok.com"
	res, err := db.CreateTask(ctx, store.BySystem, nt)
	is.NoErr(err)
	is.True(!res.Replayed)
	nt = NewTask(org, "old-queued.com")
	nt.LoopID, nt.IdempotencyKey, nt.BodyHash = &loop.ID, "k-queued", "h-old-queued.com"
	res, err = db.CreateTask(ctx, store.BySystem, nt)
	is.NoErr(err)
	is.True(res.Replayed)
	is.Equal(res.Task.ID, oldQueued)
}
