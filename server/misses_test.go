package server_test

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/secret"
	"enrichd/server"
	"enrichd/server/servertest"

	"github.com/matryer/is"
)

// TestAVendorsMissIsNotPaidTwice goes through the real handler and workers, against
// PDL, Enrich Layer and Apollo in their published shapes, none of which knows the
// company: asked once, each is remembered not to know it, and the repeat within the
// freshness window asks none of them, its task failing not_found and refunded with
// every vendor listed skipped, known_miss. A miss found with an organization's own key
// is that organization's: another organization with its own key still asks. Past the
// window the misses are purged and the vendors asked again.
func TestAVendorsMissIsNotPaidTwice(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pdl, el, apollo := fakePDLCompanies(t, nil), fakeEnrichLayerCompanies(t, nil), fakeApolloOrganizations(t, nil)
	box, _, err := secret.LoadOrCreate(filepath.Join(t.TempDir(), "secret-key"))
	is.NoErr(err)
	e := servertest.NewEnv(t, withVendors(t, pdl, el, apollo), func(c *server.Config) {
		c.Secrets = box
		c.OrgKeyRefresh = 20 * time.Millisecond
		c.MaintenanceInterval = 10 * time.Millisecond
	})
	ownKey := func(orgID, key string) {
		t.Helper()
		sealed, err := box.Seal([]byte(key), server.SourceKeyLabel(orgID, "pdl"))
		is.NoErr(err)
		is.NoErr(e.DB.SetSourceKey(ctx, orgID, "pdl", sealed, box.ID(), secret.Last4(key), false))
	}
	betaKey, betaID := e.NewOrg("beta", 100)
	gammaKey, gammaID := e.NewOrg("gamma", 100)
	ownKey(betaID, "pdl-beta-own-key-1a2b3c")
	ownKey(gammaID, "pdl-gamma-own-key-4d5e6f")
	e.StartWorkers()
	vendorCalls := func() [3]int { return [3]int{pdl.calls(), el.calls(), apollo.calls()} }
	enrichAs := func(domain, key string) *servertest.Response {
		t.Helper()
		r := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": domain}, "Authorization", "Bearer "+key)
		is.Equal(r.Status, http.StatusAccepted) // a miss is never served from the store
		return e.WaitSettled(r.Str("task.id"), "Authorization", "Bearer "+key)
	}
	asked := []string{"fake-network miss calls=0 credits=0", "dataset miss calls=0 credits=0", "pdl miss calls=1 credits=0", "enrichlayer miss calls=1 credits=0", "apollo miss calls=1 credits=0"}
	skipped := []string{"fake-network miss calls=0 credits=0", "dataset miss calls=0 credits=0",
		"pdl skipped/known_miss calls=0 credits=0", "enrichlayer skipped/known_miss calls=0 credits=0", "apollo skipped/known_miss calls=0 credits=0"}

	// Asked once: every vendor is asked, and paid, and none knows the company.
	first := enrichAs("nobody.example", e.Key)
	is.Equal(first.Str("task.status"), "failed")
	is.Equal(first.Str("error.code"), "not_found")
	is.Equal(sourcesOf(first), asked)
	is.Equal(vendorCalls(), [3]int{1, 1, 1})

	// Within the window, and after a restart (the misses are the database's, not the
	// process's): no vendor is asked; the task fails as a miss does, refunded.
	e.Restart()
	e.StartWorkers()
	e.Clock.Add(29 * 24 * time.Hour)
	before := e.Balance("acme")
	again := enrichAs("nobody.example", e.Key)
	is.Equal(again.Str("task.status"), "failed")
	is.Equal(again.Str("error.code"), "not_found")
	is.Equal(sourcesOf(again), skipped)
	is.Equal(vendorCalls(), [3]int{1, 1, 1}) // the fakes' counters stay
	after := e.Balance("acme")
	is.Equal(after.Charged, before.Charged+1)
	is.Equal(after.Refund, before.Refund+1) // refunded
	is.Equal(after.Balance, before.Balance)

	// A miss found with the installation's keys counts for every organization, whichever
	// key it asks with.
	is.Equal(sourcesOf(enrichAs("nobody.example", betaKey)), skipped)
	is.Equal(vendorCalls(), [3]int{1, 1, 1})

	// One found with beta's own PDL key is beta's: its repeat skips PDL, while gamma,
	// with its own key, and acme, with the installation's, still ask it.
	is.Equal(sourcesOf(enrichAs("private.example", betaKey)), asked)
	is.Equal(pdl.callsWith("pdl-beta-own-key-1a2b3c"), 1)
	is.Equal(sourcesOf(enrichAs("private.example", betaKey)), skipped)
	is.Equal(pdl.callsWith("pdl-beta-own-key-1a2b3c"), 1)
	is.Equal(sourcesOf(enrichAs("private.example", gammaKey)),
		[]string{"fake-network miss calls=0 credits=0", "dataset miss calls=0 credits=0", "pdl miss calls=1 credits=0", "enrichlayer skipped/known_miss calls=0 credits=0", "apollo skipped/known_miss calls=0 credits=0"})
	is.Equal(pdl.callsWith("pdl-gamma-own-key-4d5e6f"), 1)
	is.Equal(sourcesOf(enrichAs("private.example", e.Key)),
		[]string{"fake-network miss calls=0 credits=0", "dataset miss calls=0 credits=0", "pdl miss calls=1 credits=0", "enrichlayer skipped/known_miss calls=0 credits=0", "apollo skipped/known_miss calls=0 credits=0"})
	is.Equal(pdl.callsWith("pdl-key"), 2)
	is.Equal(vendorCalls(), [3]int{4, 2, 2})

	// Past the window the misses are purged, and the vendors asked again.
	e.Clock.Add(31 * 24 * time.Hour)
	e.WaitMetric(`enrichd_retention_deleted_total{kind="source_misses"}`, 8)
	for _, domain := range []string{"nobody.example", "private.example"} {
		left, err := e.DB.SourceMisses(ctx, enrich.Input{Lookup: enrich.LookupDomain, Target: domain}, time.Time{})
		is.NoErr(err)
		is.Equal(len(left), 0)
	}
	is.Equal(sourcesOf(enrichAs("nobody.example", e.Key)), asked)
	is.Equal(vendorCalls(), [3]int{5, 3, 3})
}

// A watch's check compares what the sources say now: it asks a vendor remembered not
// to know the subject all the same, where an ordinary task skips it.
func TestAWatchCheckAsksAVendorRememberedNotToKnow(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pdl := fakePDLCompanies(t, nil)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks, withVendors(t, pdl, fakeEnrichLayerCompanies(t, nil), fakeApolloOrganizations(t, nil)))
	rcv := servertest.NewReceiver(t)
	loopID, _ := e.CreateLoop("Companies", rcv.Srv.URL, "company")
	watch := e.CreateWatch(map[string]any{"object_type": "company", "domain": "nobody.example", "loop_id": loopID}).Str("data.id")
	e.StartWorkers()

	first := e.WaitSettled(e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "nobody.example"}).Str("task.id"))
	is.Equal(first.Str("error.code"), "not_found")
	is.Equal(pdl.calls(), 1)

	run := e.Do("POST", "/v1/watches/"+watch+"/run", nil)
	is.Equal(run.Status, http.StatusAccepted)
	check := e.WaitSettled(run.Str("task.id"))
	is.Equal(check.Str("error.code"), "not_found")
	is.Equal(sourcesOf(check), []string{"fake-network miss calls=0 credits=0", "dataset miss calls=0 credits=0", "pdl miss calls=1 credits=0", "enrichlayer miss calls=1 credits=0", "apollo miss calls=1 credits=0"})
	is.Equal(pdl.calls(), 2)

	// An ordinary task still skips it.
	again := e.WaitSettled(e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "nobody.example"}).Str("task.id"))
	is.Equal(sourcesOf(again)[2], "pdl skipped/known_miss calls=0 credits=0")
	is.Equal(pdl.calls(), 2)
}
