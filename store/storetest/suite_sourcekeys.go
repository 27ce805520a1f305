package storetest

import (
	"context"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/matryer/is"
)

// settleFetched claims the next task and settles it with a company fetched from a
// source, private to the task's organization when private is set.
func settleFetched(t *testing.T, db *store.DB, name string, private bool) *store.Claim {
	t.Helper()
	ctx := context.Background()
	c, err := db.ClaimTask(ctx, time.Minute)
	if err != nil || c == nil {
		t.Fatal(c, err)
	}
	res := enrich.Result{Company: &enrich.Company{Name: name, EnrichmentStatus: enrich.StatusEnriched, Domain: enrich.Ptr(c.Input.Target)}}
	if ok, err := db.Settle(ctx, c, store.Outcome{Result: &res, Fetched: true, Trace: enrich.Trace{Private: private}}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	return c
}

// testARecordFetchedWithAnOrgsKeyIsServedToItAlone: a record fetched with an
// organization's own key answers that organization's next request from the store and
// no other's; one fetched with the installation's keys answers everyone's.
func testARecordFetchedWithAnOrgsKeyIsServedToItAlone(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	a, b := NewOrg(t, db, "alpha"), NewOrg(t, db, "beta")
	for _, name := range []string{"alpha", "beta"} {
		_, err := db.GrantCredits(ctx, name, 100, nil)
		is.NoErr(err)
	}

	first, err := db.CreateTask(ctx, store.BySystem, NewTask(a, "private.com"))
	is.NoErr(err)
	is.Equal(first.Task.Status, store.StatusQueued)
	settleFetched(t, db, "Private Co", true)

	again, err := db.CreateTask(ctx, store.BySystem, NewTask(a, "private.com"))
	is.NoErr(err)
	is.Equal(again.Task.Status, store.StatusSucceeded) // the owner is served from the store
	other, err := db.CreateTask(ctx, store.BySystem, NewTask(b, "private.com"))
	is.NoErr(err)
	is.Equal(other.Task.Status, store.StatusQueued) // another organization is not
	stored, err := db.FindStored(ctx, enrich.Input{Lookup: enrich.LookupDomain, Target: "private.com"})
	is.NoErr(err)
	is.True(stored == nil)
	own, _, err := db.FindStoredFor(ctx, a, enrich.Input{Lookup: enrich.LookupDomain, Target: "private.com"})
	is.NoErr(err)
	is.Equal(own.Company.Name, "Private Co")
	// beta's task fetches it with the installation's keys: shared from then on, while
	// the owner keeps being served its own.
	env.Clock.Add(time.Minute)
	c := settleFetched(t, db, "Shared Co", false)
	is.Equal(c.OrgID, b)
	for org, want := range map[string]string{a: "Private Co", b: "Shared Co"} {
		res, _, err := db.FindStoredFor(ctx, org, enrich.Input{Lookup: enrich.LookupDomain, Target: "private.com"})
		is.NoErr(err)
		is.Equal(res.Company.Name, want)
	}

	shared, err := db.CreateTask(ctx, store.BySystem, NewTask(b, "shared.com"))
	is.NoErr(err)
	is.Equal(shared.Task.Status, store.StatusQueued)
	settleFetched(t, db, "Everyone's", false)
	for _, org := range []string{a, b} {
		hit, err := db.CreateTask(ctx, store.BySystem, NewTask(org, "shared.com"))
		is.NoErr(err)
		is.Equal(hit.Task.Status, store.StatusSucceeded)
	}
	var owned int
	is.NoErr(env.Raw().QueryRow(`SELECT count(*) FROM records WHERE org_id = ?`, a).Scan(&owned))
	is.Equal(owned, 1)
}

// testSourceKeysSetFailAndClear: a key set again clears its failing mark and a
// refusal of the key it replaced does not mark it.
func testSourceKeysSetFailAndClear(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	org := NewOrg(t, db, "alpha")
	is.Equal(enrich.KindOf(db.SetSourceKey(ctx, "no-such-org", "pdl", "s", "id", "…1234", false)), enrich.KindNotFound)

	k, err := db.OrgSourceKey(ctx, org, "pdl")
	is.NoErr(err)
	is.True(k == nil)
	is.NoErr(db.SetSourceKey(ctx, org, "pdl", "sealed-1", "kid", "…1111", false))
	k, err = db.OrgSourceKey(ctx, org, "pdl")
	is.NoErr(err)
	is.Equal(k.Last4, "…1111")
	is.Equal(k.Generation, int64(1))
	is.True(!k.Failing() && !k.AllowFallback)

	is.NoErr(db.MarkSourceKeyFailing(ctx, org, "pdl", 1, "pdl refused the API key (401)"))
	k, err = db.OrgSourceKey(ctx, org, "pdl")
	is.NoErr(err)
	is.True(k.Failing())
	is.Equal(k.FailingReason, "pdl refused the API key (401)")

	is.NoErr(db.SetSourceKey(ctx, org, "pdl", "sealed-2", "kid", "…2222", true))
	is.NoErr(db.MarkSourceKeyFailing(ctx, org, "pdl", 1, "late refusal of the old key"))
	k, err = db.OrgSourceKey(ctx, org, "pdl")
	is.NoErr(err)
	is.Equal(k.Generation, int64(2))
	is.True(!k.Failing())
	is.True(k.AllowFallback)
	is.Equal(k.Sealed, "sealed-2")

	ok, err := db.SetSourceKeyFallback(ctx, org, "pdl", false)
	is.NoErr(err)
	is.True(ok)
	ok, err = db.SetSourceKeyFallback(ctx, org, "apollo", false)
	is.NoErr(err)
	is.True(!ok)
	is.NoErr(db.SetSourceKey(ctx, org, "apollo", "sealed-3", "kid", "…3333", false))
	keys, err := db.OrgSourceKeys(ctx, org)
	is.NoErr(err)
	is.Equal(len(keys), 2)
	is.Equal(keys[0].Source, "apollo")
	is.Equal(keys[1].Source, "pdl")
	is.True(!keys[1].AllowFallback)

	cleared, err := db.ClearSourceKey(ctx, org, "pdl")
	is.NoErr(err)
	is.True(cleared)
	cleared, err = db.ClearSourceKey(ctx, org, "pdl")
	is.NoErr(err)
	is.True(!cleared)
}
