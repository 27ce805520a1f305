package store_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"
	"enrichd/store/storetest"

	"github.com/matryer/is"
)

// onEachEngine runs test on a fresh SQLite file and a fresh PostgreSQL database.
func onEachEngine(t *testing.T, test func(t *testing.T, env *storetest.Env)) {
	t.Run("sqlite", func(t *testing.T) {
		test(t, storetest.NewEnv(t, filepath.Join(t.TempDir(), "enrichd.db")))
	})
	t.Run("postgres", func(t *testing.T) {
		test(t, storetest.NewEnv(t, storetest.PostgresMigratedURL(t)))
	})
}

func balanceOf(granted, charged, refunded, expired int64) store.Balance {
	return store.Balance{Balance: granted - charged + refunded - expired, Granted: granted, Charged: charged, Refund: refunded, Expired: expired}
}

func paymentCode(t *testing.T, err error) (string, int64) {
	t.Helper()
	var e *enrich.Error
	if !errors.As(err, &e) || e.Kind != enrich.KindPaymentRequired || e.CreditsRemaining == nil {
		t.Fatalf("got %v, want a refusal for credits", err)
	}
	return e.Code, *e.CreditsRemaining
}

func TestChargeTakesTheGrantThatExpiresFirstAndRefundGivesItBack(t *testing.T) {
	onEachEngine(t, func(t *testing.T, env *storetest.Env) {
		is := is.New(t)
		ctx := context.Background()
		db, c := env.DB, env.Clock
		org, err := db.CreateOrg(ctx, "acme")
		is.NoErr(err)
		late, soon := c.Now().Add(48*time.Hour), c.Now().Add(time.Hour)
		forever, err := db.GrantCredits(ctx, "acme", 10, nil)
		is.NoErr(err)
		lateID, err := db.GrantCredits(ctx, "acme", 10, &late)
		is.NoErr(err)
		soonID, err := db.GrantCredits(ctx, "acme", 3, &soon)
		is.NoErr(err)

		is.NoErr(db.Charge(ctx, org.ID, "t1", 5, nil)) // 3 from soon, 2 from late
		remaining := func() map[int64]int64 {
			gs, err := db.ListGrants(ctx, org.ID)
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
		_, err = db.CreditBalance(ctx, "acme")
		is.NoErr(err)
		is.NoErr(db.Refund(ctx, "t1"))
		is.Equal(remaining(), map[int64]int64{forever: 10, lateID: 10, soonID: 0})
		bal, err := db.CreditBalance(ctx, "acme")
		is.NoErr(err)
		is.Equal(bal, balanceOf(23, 5, 5, 3))
		// A second refund finds nothing owed.
		is.NoErr(db.Refund(ctx, "t1"))
		bal2, err := db.CreditBalance(ctx, "acme")
		is.NoErr(err)
		is.Equal(bal2, bal)

		// Past the late grant's expiry, a charge larger than what is left is refused as
		// credits_expired, the expiry being the last thing that took credits; the refusal
		// rolls the write-off back with the rest.
		c.Add(72 * time.Hour)
		code, left := paymentCode(t, db.Charge(ctx, org.ID, "t2", 11, nil))
		is.Equal(code, "credits_expired")
		is.Equal(left, int64(10))
		is.Equal(remaining(), map[int64]int64{forever: 10, lateID: 10, soonID: 0})

		days, err := db.DailyCredits(ctx, org.ID, 5, c.Now())
		is.NoErr(err)
		var granted, charged, refunded, expired int64
		for _, d := range days {
			granted, charged, refunded, expired = granted+d.Granted, charged+d.Charged, refunded+d.Refunded, expired+d.Expired
		}
		is.Equal([]int64{granted, charged, refunded, expired}, []int64{23, 5, 5, 3})
		page, err := db.LedgerPage(ctx, org.ID, 0, 2)
		is.NoErr(err)
		is.Equal(len(page), 2)
		is.Equal(page[0].Kind, "expiry")
		all, err := db.CreditLedger(ctx, "acme")
		is.NoErr(err)
		is.Equal(len(all), 3+2+2+1) // grants, charges, refunds, t1's expiry

		// Spent to the last credit, the next charge is insufficient_credits.
		is.NoErr(db.Charge(ctx, org.ID, "t3", 10, nil))
		code, left = paymentCode(t, db.Charge(ctx, org.ID, "t4", 1, nil))
		is.Equal(code, "insufficient_credits")
		is.Equal(left, int64(0))
	})
}

func TestManyConcurrentChargesSpendEachCreditOnce(t *testing.T) {
	onEachEngine(t, func(t *testing.T, env *storetest.Env) {
		is := is.New(t)
		ctx := context.Background()
		dbs := []*store.DB{env.DB, env.Open()}
		org, err := dbs[0].CreateOrg(ctx, "acme")
		is.NoErr(err)
		exp := env.Clock.Now().Add(time.Hour)
		_, err = dbs[0].GrantCredits(ctx, "acme", 7, &exp)
		is.NoErr(err)
		_, err = dbs[0].GrantCredits(ctx, "acme", 5, nil)
		is.NoErr(err)

		var mu sync.Mutex
		ok, refused := 0, 0
		var wg sync.WaitGroup
		for i := range 30 {
			db := dbs[i%2]
			wg.Go(func() {
				err := db.Charge(ctx, org.ID, fmt.Sprint("task-", i), 1, nil)
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
		grants, err := dbs[0].ListGrants(ctx, org.ID)
		is.NoErr(err)
		for _, g := range grants {
			is.Equal(g.Remaining, int64(0))
		}
		bal, err := dbs[1].CreditBalance(ctx, "acme")
		is.NoErr(err)
		is.Equal(bal, balanceOf(12, 12, 0, 0))
	})
}

// waitForLockWaiter returns once some session of db's database waits for a lock.
func waitForLockWaiter(t *testing.T, db *store.DB) {
	t.Helper()
	for waiting := 0; waiting == 0; time.Sleep(5 * time.Millisecond) {
		if err := db.Reader().QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
}

// TestARefundWaitsForAnExpiryOfItsGrant refunds a task while another replica's
// transaction has just written off the grant the task was charged from: the refund
// must wait for it and then expire what it gives back, not return credits to a grant
// that is no longer spendable.
func TestARefundWaitsForAnExpiryOfItsGrant(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	env := storetest.NewEnv(t, storetest.PostgresMigratedURL(t))
	a, b := env.DB, env.Open()
	org, err := a.CreateOrg(ctx, "acme")
	is.NoErr(err)
	soon := env.Clock.Now().Add(time.Hour)
	soonID, err := a.GrantCredits(ctx, "acme", 3, &soon)
	is.NoErr(err)
	_, err = a.GrantCredits(ctx, "acme", 10, nil)
	is.NoErr(err)
	is.NoErr(a.Charge(ctx, org.ID, "t1", 3, nil)) // all of soon

	// Past soon's expiry, a charge writes soon off and holds its lock while t1 is
	// refunded through the other replica.
	env.Clock.Add(2 * time.Hour)
	holding, release := make(chan struct{}), make(chan struct{})
	charged, refunded := make(chan error, 1), make(chan error, 1)
	go func() {
		charged <- a.Charge(ctx, org.ID, "t2", 1, func() { close(holding); <-release })
	}()
	<-holding
	go func() { refunded <- b.Refund(ctx, "t1") }()
	waitForLockWaiter(t, a)
	close(release)
	is.NoErr(<-charged)
	is.NoErr(<-refunded)

	grants, err := a.ListGrants(ctx, org.ID)
	is.NoErr(err)
	for _, g := range grants {
		if g.ID == soonID {
			is.Equal(g.Remaining, int64(0)) // expired: nothing comes back to it
		}
	}
	bal, err := a.CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(bal, balanceOf(13, 4, 3, 3))
}

// TestTwoReplicasChargingTheLastCredit holds a charge's transaction open while
// another replica charges the same organization: the second must wait for the
// grants' lock and then find nothing left, not charge the same credit.
func TestTwoReplicasChargingTheLastCredit(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	env := storetest.NewEnv(t, storetest.PostgresMigratedURL(t))
	a, b := env.DB, env.Open()
	org, err := a.CreateOrg(ctx, "acme")
	is.NoErr(err)
	_, err = a.GrantCredits(ctx, "acme", 1, nil)
	is.NoErr(err)

	holding, release := make(chan struct{}), make(chan struct{})
	first, second := make(chan error, 1), make(chan error, 1)
	go func() {
		first <- a.Charge(ctx, org.ID, "task-a", 1, func() { close(holding); <-release })
	}()
	<-holding
	go func() { second <- b.Charge(ctx, org.ID, "task-b", 1, nil) }()
	waitForLockWaiter(t, a)
	close(release)
	is.NoErr(<-first)
	code, left := paymentCode(t, <-second)
	is.Equal(code, "insufficient_credits")
	is.Equal(left, int64(0))

	bal, err := a.CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(bal, balanceOf(1, 1, 0, 0))
}
