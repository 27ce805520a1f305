package server_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/server/servertest"
	"enrichd/store"
	"enrichd/wire"

	"github.com/matryer/is"
)

// Each ask of a source is counted against the organization whose task made it, per
// source and day, in the database: GET /v1/sources shows the key's organization its
// own figures, in the order of the sources, in money where a credit's price is set,
// the same after a restart.
func TestSourcesSpendPerOrganizationSurvivesARestart(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.WithPricedVendors("pdl", "enrichlayer"), func(c *server.Config) {
		c.CreditUSD = map[string]float64{"pdl": 0.25}
	})
	otherKey, otherID := e.NewOrg("other", 10)
	for range 3 {
		is.Equal(e.Ask(e.OrgID, enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeHit, VendorCalls: 1, Credits: 1}), "")
	}
	e.Ask(e.OrgID, enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeMiss, VendorCalls: 1})
	e.Ask(e.OrgID, enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeError, VendorCalls: 3})
	e.Ask(e.OrgID, enrich.SourceCall{Name: "enrichlayer", Outcome: enrich.OutcomeHit, VendorCalls: 2, Credits: 13})
	e.Ask(otherID, enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeHit, VendorCalls: 1, Credits: 1})

	check := func() {
		month, by, order := e.SourcesOf(e.Key)
		is.Equal(month, store.MonthStart(e.Clock.Now()).Format("2006-01"))
		is.Equal(order, []string{"fake-network", "dataset", "pdl", "enrichlayer"})
		pdl := by["pdl"]
		is.Equal(pdl.SourceUse, store.SourceUse{Calls: 7, Hits: 3, Misses: 1, Errors: 1, Credits: 3})
		is.Equal(*pdl.CreditUSD, 0.25)
		is.Equal(*pdl.USD, 0.75)
		is.Equal(len(pdl.Days), 1)
		is.Equal(pdl.Days[0].Day, e.Clock.Now().UTC().Format("2006-01-02"))
		is.Equal(pdl.Key, server.SourceKey{Owner: server.KeyOwnerInstallation})
		is.Equal(pdl.Budget, server.SourceBudget{})
		is.Equal(by["enrichlayer"].SourceUse, store.SourceUse{Calls: 2, Hits: 1, Credits: 13})
		is.True(by["enrichlayer"].USD == nil) // no price set
		is.Equal(by["dataset"].Key, server.SourceKey{Owner: server.KeyOwnerNone})
		is.Equal(by["dataset"].SourceUse, store.SourceUse{})

		_, theirs, _ := e.SourcesOf(otherKey)
		is.Equal(theirs["pdl"].SourceUse, store.SourceUse{Calls: 1, Hits: 1, Credits: 1})
		is.Equal(theirs["enrichlayer"].SourceUse, store.SourceUse{})
	}
	check()
	e.Restart()
	check()
}

// An ask of a source that costs nothing (the dataset's) writes nothing; one of a
// priced source that sent nothing upstream leaves nothing either, its booking gone
// with its answer.
func TestSourcesAFreeAskWritesNothing(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.WithPricedVendors("pdl"))
	rows := func() (n int) {
		t.Helper()
		var asks int
		is.NoErr(e.DB.Reader().QueryRow(context.Background(), `SELECT count(*) FROM source_spend`).Scan(&n))
		is.NoErr(e.DB.Reader().QueryRow(context.Background(), `SELECT count(*) FROM source_asks`).Scan(&asks))
		return n + asks
	}
	e.Ask(e.OrgID, enrich.SourceCall{Name: "dataset", Outcome: enrich.OutcomeHit})
	e.Ask(e.OrgID, enrich.SourceCall{Name: "dataset", Outcome: enrich.OutcomeMiss})
	e.Ask(e.OrgID, enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeMiss}) // a priced source that sent nothing
	is.Equal(rows(), 0)
	_, by, _ := e.SourcesOf(e.Key)
	is.Equal(by["dataset"].SourceUse, store.SourceUse{})
	// An ask that sent a request is one row: the count above could have seen one.
	e.Ask(e.OrgID, enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeMiss, VendorCalls: 1})
	is.Equal(rows(), 1)
}

// An ask under way is on the books at its full price, in GET /v1/sources (pending)
// and against the caps, of this replica and of another on the same database; its
// answer settles it with what it cost, and frees what it held beyond that.
func TestSourcesAnAskUnderWayIsOnTheBooks(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.WithPricedVendors("pdl"))
	ctx := context.Background()
	is.NoErr(e.DB.SetSourceBudget(ctx, e.OrgID, "pdl", 3))
	replica := servertest.ReplicaOf(e)
	b := servertest.Admit(t, e.Work.Spend(), e.OrgID, "pdl")
	is.True(b != nil)
	// The adapter books its request at its full price, 3 credits, before sending it.
	is.NoErr(e.Work.Spend().Book(ctx, b, 1, 3))
	for _, r := range []*servertest.Env{e, replica} {
		_, by, _ := r.SourcesOf(e.Key)
		is.Equal(by["pdl"].SourceUse, store.SourceUse{Calls: 1, Pending: 1, Credits: 3})
		is.Equal(len(by["pdl"].Days), 1)
		is.Equal(by["pdl"].Days[0].SourceUse, store.SourceUse{Calls: 1, Pending: 1, Credits: 3})
		is.Equal(*by["pdl"].Budget.Remaining, int64(0))
	}
	// The cap is reached by the ask under way: neither replica admits another.
	is.True(servertest.Admit(t, replica.Work.Spend(), e.OrgID, "pdl") == nil)
	is.True(servertest.Admit(t, e.Work.Spend(), e.OrgID, "pdl") == nil)

	// Its answer cost 1 credit: 2 are free again.
	e.Work.Spend().Spent(ctx, e.OrgID, enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeHit, VendorCalls: 1, Credits: 1}, b)
	_, by, _ := replica.SourcesOf(e.Key)
	is.Equal(by["pdl"].SourceUse, store.SourceUse{Calls: 1, Hits: 1, Credits: 1})
	is.Equal(*by["pdl"].Budget.Remaining, int64(2))
	is.True(servertest.Admit(t, replica.Work.Spend(), e.OrgID, "pdl") != nil)
}

// The asks a process left on the books when it ended (killed while the vendors
// answered) are settled as unknown by the next sweep of a live one, at their full
// price: still counted, in the month's figures and against the caps. On SQLite the
// process before a restart is gone at once; on PostgreSQL a replica is gone when its
// heartbeat has run out. An ask of a live process is left alone unless it has lived
// longer than a task can, its settling lost; and a late answer to an ask settled as
// unknown is not counted twice.
func TestSourcesAsksOfAGoneProcessAreSettledUnknown(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.WithPricedVendors("pdl"))
	ctx := context.Background()
	is.NoErr(e.DB.SetSourceBudget(ctx, e.OrgID, "pdl", 7))
	gone := servertest.ReplicaOf(e)
	if _, err := gone.DB.Heartbeat(ctx, gone.Work.Replica(), 15*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := e.DB.Heartbeat(ctx, e.Work.Replica(), time.Hour); err != nil {
		t.Fatal(err)
	}
	cut := servertest.Admit(t, gone.Work.Spend(), e.OrgID, "pdl")
	is.NoErr(gone.Work.Spend().Book(ctx, cut, 2, 3)) // a second request, of 2 credits, sent
	lost := servertest.Admit(t, gone.Work.Spend(), e.OrgID, "pdl")
	mine := servertest.Admit(t, e.Work.Spend(), e.OrgID, "pdl")
	is.True(cut != nil && lost != nil && mine != nil)
	want := store.SourceUse{Calls: 4, Pending: 3, Credits: 5}
	_, by, _ := e.SourcesOf(e.Key)
	is.Equal(by["pdl"].SourceUse, want)

	// The other process is gone: on PostgreSQL once its heartbeat has run out (15 s)
	// and its asks are older than a replica's first heartbeat may be (15 s).
	e.Clock.Add(31 * time.Second)
	e.Work.SettleDeadAsks(ctx)
	_, by, _ = e.SourcesOf(e.Key)
	is.Equal(by["pdl"].SourceUse, store.SourceUse{Calls: 4, Unknown: 2, Pending: 1, Credits: 5})
	is.Equal(*by["pdl"].Budget.Remaining, int64(2))
	is.True(strings.Contains(e.Logs.String(), "counted at their full price, as unknown"))

	// A late answer to an ask settled as unknown changes nothing: counted once, at its
	// full price.
	gone.Work.Spend().Spent(ctx, e.OrgID, enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeMiss, VendorCalls: 2}, lost)
	_, by, _ = e.SourcesOf(e.Key)
	is.Equal(by["pdl"].SourceUse, store.SourceUse{Calls: 4, Unknown: 2, Pending: 1, Credits: 5})

	// This process's own ask under way is left alone, until it outlives any task: its
	// settling was lost.
	e.Work.SettleDeadAsks(ctx)
	_, by, _ = e.SourcesOf(e.Key)
	is.Equal(by["pdl"].Pending, int64(1))
	e.Clock.Add(e.Cfg.TaskTTL + time.Minute)
	e.Work.SettleDeadAsks(ctx)
	_, by, _ = e.SourcesOf(e.Key)
	is.Equal(by["pdl"].SourceUse, store.SourceUse{Calls: 4, Unknown: 3, Credits: 5})
}

// A source whose month reached the organization's cap is refused for it, and for no
// other; the installation's cap (the lower of the database's and the flag's) binds
// the installation's keys, not an organization's own; a cap cleared admits again.
func TestSourcesBudgetsRefuseAtTheCap(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.WithPricedVendors("pdl"), func(c *server.Config) { c.SourceBudgets = map[string]int64{"pdl": 10} })
	ctx := context.Background()
	_, otherID := e.NewOrg("other", 10)
	is.NoErr(e.DB.SetSourceBudget(ctx, e.OrgID, "pdl", 3))
	paid := enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeHit, VendorCalls: 1, Credits: 1}
	for range 3 {
		is.Equal(e.Ask(e.OrgID, paid), "")
	}
	is.Equal(e.Ask(e.OrgID, paid), enrich.ReasonBudget)
	_, by, _ := e.SourcesOf(e.Key)
	is.Equal(*by["pdl"].Budget.Organization, int64(3))
	is.Equal(*by["pdl"].Budget.Installation, int64(10))
	is.Equal(*by["pdl"].Budget.Remaining, int64(0))
	is.Equal(by["pdl"].Hits, int64(3)) // the refused ask was not counted

	// Another organization goes on, up to the installation's cap of 10 in all.
	for range 7 {
		is.Equal(e.Ask(otherID, paid), "")
	}
	is.Equal(e.Ask(otherID, paid), enrich.ReasonBudget)
	// Its own key spends its own account: the installation's cap does not bind it.
	own := paid
	own.OwnKey = true
	is.Equal(e.Ask(otherID, own), "")

	// A lower cap in the database binds before the flag's; clearing it leaves the flag's.
	is.NoErr(e.DB.SetSourceBudget(ctx, "", "pdl", 12))
	is.Equal(e.Ask(otherID, paid), enrich.ReasonBudget)
	is.NoErr(e.DB.SetSourceBudget(ctx, e.OrgID, "pdl", 0))
	is.Equal(e.Ask(e.OrgID, paid), enrich.ReasonBudget) // now the installation's 10 binds
}

// Asks in flight count against the cap: as many are admitted at once as the cap
// leaves, never more, and each recorded releases its place.
func TestSourcesBudgetCountsAsksInFlight(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.WithPricedVendors("pdl"))
	ctx := context.Background()
	is.NoErr(e.DB.SetSourceBudget(ctx, e.OrgID, "pdl", 5))
	spend := e.Work.Spend()
	var mu sync.Mutex
	var admitted []*enrich.Booking
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if b := servertest.Admit(t, spend, e.OrgID, "pdl"); b != nil {
				mu.Lock()
				admitted = append(admitted, b)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	is.Equal(len(admitted), 5)
	// Each comes back having cost nothing (a miss): the places are free again.
	for _, b := range admitted {
		spend.Spent(ctx, e.OrgID, enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeMiss, VendorCalls: 1}, b)
	}
	is.True(servertest.Admit(t, spend, e.OrgID, "pdl") != nil)
}

// The month's credits are the database's: a second server on the same database (a
// replica) refuses once the first has spent the cap.
func TestSourcesBudgetHoldsAcrossReplicas(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.WithPricedVendors("pdl"))
	ctx := context.Background()
	is.NoErr(e.DB.SetSourceBudget(ctx, e.OrgID, "pdl", 4))
	_, replica := wire.New(e.DB, e.Cfg)
	for range 4 {
		is.Equal(e.Ask(e.OrgID, enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeHit, VendorCalls: 1, Credits: 1}), "")
	}
	_, skip := replica.Spend().Admit(ctx, e.OrgID, "pdl", false)
	is.Equal(skip, enrich.ReasonBudget)
}

// Two replicas, each with its own handle on the database, admit and record paid asks
// at the same time: each sees the other's asks under way, on the books, so the
// month's credits come to the cap exactly, never past it, and both replicas report
// the same month.
func TestSourcesBudgetHoldsAcrossConcurrentReplicas(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.WithPricedVendors("pdl"))
	const budget, askers, attempts = 20, 6, 12 // askers per replica
	is.NoErr(e.DB.SetSourceBudget(context.Background(), e.OrgID, "pdl", budget))
	replica := servertest.ReplicaOf(e)
	is.True(replica.DB != e.DB) // a second handle, as another process would open

	var inFlight, peak, admitted atomic.Int64
	var wg sync.WaitGroup
	for _, r := range []*servertest.Env{e, replica} {
		spend := r.Work.Spend()
		for range askers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := context.Background()
				for range attempts {
					b, skip := spend.Admit(ctx, e.OrgID, "pdl", false)
					if skip != "" {
						time.Sleep(time.Millisecond)
						continue
					}
					admitted.Add(1)
					n := inFlight.Add(1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
					time.Sleep(2 * time.Millisecond) // the vendor's answer
					spend.Spent(ctx, e.OrgID, enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeHit, VendorCalls: 1, Credits: 1}, b)
					inFlight.Add(-1)
				}
			}()
		}
	}
	wg.Wait()
	t.Logf("%d asks admitted under a cap of %d, at most %d in flight at once", admitted.Load(), budget, peak.Load())

	_, here, _ := e.SourcesOf(e.Key)
	_, there, _ := replica.SourcesOf(e.Key)
	is.Equal(here["pdl"], there["pdl"]) // both replicas read the same month
	credits := here["pdl"].Credits
	is.Equal(credits, admitted.Load()) // every admitted ask recorded, once
	is.Equal(credits, int64(budget))   // the cap was reached, and not passed
	is.Equal(here["pdl"].Pending, int64(0))
	is.Equal(*here["pdl"].Budget.Remaining, int64(0))
	// Spent: neither replica admits another.
	is.True(servertest.Admit(t, e.Work.Spend(), e.OrgID, "pdl") == nil)
	is.True(servertest.Admit(t, replica.Work.Spend(), e.OrgID, "pdl") == nil)
}

// /metrics counts each source's asks by outcome, its vendor credits and the asks its
// budget refused.
func TestSourcesMetrics(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.WithPricedVendors("pdl"))
	e.Ask(e.OrgID, enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeHit, VendorCalls: 1, Credits: 2})
	e.Ask(e.OrgID, enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeMiss, VendorCalls: 1})
	is.NoErr(e.DB.SetSourceBudget(context.Background(), e.OrgID, "pdl", 2))
	is.Equal(e.Ask(e.OrgID, enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeHit, VendorCalls: 1, Credits: 2}), enrich.ReasonBudget)
	r := e.Do("GET", "/metrics", nil)
	is.Equal(r.Status, 200)
	for series, want := range map[string]int{
		`enrichd_source_asks_total{source="pdl",outcome="hit"}`:      1,
		`enrichd_source_asks_total{source="pdl",outcome="miss"}`:     1,
		`enrichd_source_vendor_credits_total{source="pdl"}`:          2,
		`enrichd_source_skipped_total{source="pdl",reason="budget"}`: 1,
	} {
		m := regexp.MustCompile(regexp.QuoteMeta(series) + ` (\d+)`).FindSubmatch(r.Raw)
		if m == nil {
			t.Fatalf("%s missing from /metrics", series)
		}
		got, _ := strconv.Atoi(string(m[1]))
		is.Equal(got, want)
	}
}

// Many asks at once never pass a cap by more than the asks in flight: each costs
// what an admitted ask reserves (1 credit), so no more than the cap are admitted,
// however the asks' reads of the month and their recording interleave.
func TestSourcesConcurrentAsksStayUnderTheCap(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.WithPricedVendors("pdl"))
	const budget = 5
	is.NoErr(e.DB.SetSourceBudget(context.Background(), e.OrgID, "pdl", budget))
	paid := enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeHit, VendorCalls: 1, Credits: 1}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				if e.Ask(e.OrgID, paid) == "" {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	is.Equal(admitted.Load(), int64(budget))
	_, by, _ := e.SourcesOf(e.Key)
	is.Equal(by["pdl"].Credits, int64(budget))
}
