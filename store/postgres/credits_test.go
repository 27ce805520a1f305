package postgres

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"enrichd/enrich"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
)

// waitForLockWaiter returns once some backend of db's database waits for a lock: the
// second transaction of a test has reached the row the first one holds.
func waitForLockWaiter(t *testing.T, db *DB) {
	t.Helper()
	for {
		var n int
		err := db.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestTwoConnectionsChargingTheLastCredit(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := freshDSN(t)
	c := &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	a, b := openTest(t, dsn, c), openTest(t, dsn, c)
	org, err := facade(a).CreateOrg(ctx, "acme")
	is.NoErr(err)
	_, err = facade(a).GrantCredits(ctx, "acme", 1, nil)
	is.NoErr(err)

	// The first charge holds its grants while the second starts: the second must wait
	// for it and then find nothing left, not charge the same credit.
	txA, err := a.pool.Begin(ctx)
	is.NoErr(err)
	is.NoErr(chargeCredits(ctx, txA, org.ID, "task-a", 1, a.now()))
	second := make(chan error, 1)
	go func() {
		second <- b.inTx(ctx, func(tx pgx.Tx) error { return chargeCredits(ctx, tx, org.ID, "task-b", 1, b.now()) })
	}()
	waitForLockWaiter(t, a)
	is.NoErr(txA.Commit(ctx))
	err = <-second
	var e *enrich.Error
	is.True(errorsAs(err, &e))
	is.Equal(e.Code, "insufficient_credits")
	is.Equal(*e.CreditsRemaining, int64(0))

	bal, err := facade(a).CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(bal.Balance, int64(0))
	is.Equal(bal.Charged, int64(1))
}

func TestManyConcurrentChargesSpendEachCreditOnce(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := freshDSN(t)
	c := &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	dbs := []*DB{openTest(t, dsn, c), openTest(t, dsn, c)}
	org, err := facade(dbs[0]).CreateOrg(ctx, "acme")
	is.NoErr(err)
	exp := c.Now().Add(time.Hour)
	_, err = facade(dbs[0]).GrantCredits(ctx, "acme", 7, &exp)
	is.NoErr(err)
	_, err = facade(dbs[0]).GrantCredits(ctx, "acme", 5, nil)
	is.NoErr(err)

	var mu sync.Mutex
	ok, refused := 0, 0
	var wg sync.WaitGroup
	for i := range 30 {
		db := dbs[i%2]
		wg.Go(func() {
			err := db.inTx(ctx, func(tx pgx.Tx) error { return chargeCredits(ctx, tx, org.ID, fmt.Sprint("task-", i), 1, db.now()) })
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case enrich.KindOf(err) == enrich.KindPaymentRequired:
				refused++
			default:
				t.Errorf("charge %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	is.Equal(ok, 12)
	is.Equal(refused, 18)
	grants, err := facade(dbs[0]).ListGrants(ctx, org.ID)
	is.NoErr(err)
	for _, g := range grants {
		is.Equal(g.Remaining, int64(0))
	}
	bal, err := facade(dbs[1]).CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(bal, storeBalance(12, 12, 0, 0))
}

func TestChargeTakesTheGrantThatExpiresFirstAndRefundGivesItBack(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, c := newTestDB(t)
	org, err := facade(db).CreateOrg(ctx, "acme")
	is.NoErr(err)
	late, soon := c.Now().Add(48*time.Hour), c.Now().Add(time.Hour)
	forever, err := facade(db).GrantCredits(ctx, "acme", 10, nil)
	is.NoErr(err)
	lateID, err := facade(db).GrantCredits(ctx, "acme", 10, &late)
	is.NoErr(err)
	soonID, err := facade(db).GrantCredits(ctx, "acme", 3, &soon)
	is.NoErr(err)

	charge := func(task string, n int64) error {
		return db.inTx(ctx, func(tx pgx.Tx) error { return chargeCredits(ctx, tx, org.ID, task, n, db.now()) })
	}
	is.NoErr(charge("t1", 5)) // 3 from soon, 2 from late
	remaining := func() map[int64]int64 {
		gs, err := facade(db).ListGrants(ctx, org.ID)
		is.NoErr(err)
		m := map[int64]int64{}
		for _, g := range gs {
			m[g.ID] = g.Remaining
		}
		return m
	}
	is.Equal(remaining(), map[int64]int64{forever: 10, lateID: 8, soonID: 0})

	// The soon grant expires (written off by a balance, with nothing left on it); the
	// refund of t1 gives its 3 back and expires them at once.
	c.Add(2 * time.Hour)
	_, err = facade(db).CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.NoErr(db.inTx(ctx, func(tx pgx.Tx) error { return refundCredits(ctx, tx, "t1", db.now()) }))
	is.Equal(remaining(), map[int64]int64{forever: 10, lateID: 10, soonID: 0})
	bal, err := facade(db).CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(bal, storeBalance(23, 5, 5, 3))
	// A second refund finds nothing owed.
	is.NoErr(db.inTx(ctx, func(tx pgx.Tx) error { return refundCredits(ctx, tx, "t1", db.now()) }))
	bal2, err := facade(db).CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(bal2, bal)

	// Past the late grant's expiry, a charge larger than what is left is refused as
	// credits_expired, the expiry being the last thing that took credits; the refusal
	// rolls the write-off back with the rest, as in SQLite.
	c.Add(72 * time.Hour)
	err = charge("t2", 11)
	var e *enrich.Error
	is.True(errorsAs(err, &e))
	is.Equal(e.Code, "credits_expired")
	is.Equal(*e.CreditsRemaining, int64(10))

	days, err := facade(db).DailyCredits(ctx, org.ID, 5, c.Now())
	is.NoErr(err)
	var granted, charged, refunded, expired int64
	for _, d := range days {
		granted, charged, refunded, expired = granted+d.Granted, charged+d.Charged, refunded+d.Refunded, expired+d.Expired
	}
	is.Equal([]int64{granted, charged, refunded, expired}, []int64{23, 5, 5, 3})
	page, err := facade(db).LedgerPage(ctx, org.ID, 0, 2)
	is.NoErr(err)
	is.Equal(len(page), 2)
	is.Equal(page[0].Kind, "expiry")
	all, err := facade(db).CreditLedger(ctx, "acme")
	is.NoErr(err)
	is.Equal(len(all), 3+2+2+1) // grants, charges, refunds, t1's expiry
}
