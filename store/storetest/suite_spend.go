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
