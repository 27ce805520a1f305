package dashboard_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/server/servertest"
	"enrichd/store"

	"github.com/matryer/is"
)

// The Sources page shows every source in the order it is asked, with the signed-in
// organization's month: asks and calls, hit rate, vendor credits (in USD where priced)
// with a bar a day, budgets and what is left, and whose key it uses; another
// organization's spend is not on it.
func TestDashboardSourcesMonthPage(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.WithPricedVendors("pdl"), func(c *server.Config) {
		c.CreditUSD = map[string]float64{"pdl": 0.1}
		c.Fill = enrich.FillLists{Person: []string{"about"}}
	})
	ctx := context.Background()
	_, otherID := e.NewOrg("other", 10)
	is.NoErr(e.DB.SetSourceBudget(ctx, e.OrgID, "pdl", 50))
	company := []string{"slogan", "employee_count"}
	is.NoErr(e.DB.SetFillLists(ctx, e.OrgID, store.FillUpdate{Company: &company}))
	for range 3 {
		e.Ask(e.OrgID, enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeHit, VendorCalls: 1, Credits: 4})
	}
	e.Ask(e.OrgID, enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeMiss, VendorCalls: 1})
	e.Ask(otherID, enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeHit, VendorCalls: 1, Credits: 999})

	for _, role := range []string{"admin", "viewer"} {
		p := e.SignIn("acme", role).Get("/dashboard/sources")
		is.Equal(p.Status, http.StatusOK)
		is.True(p.Has(`<a href="/dashboard/sources" aria-current="page">Sources</a>`))
		is.True(p.Has(`id="fill-company-state">This organization's own list: <code>slogan</code>, <code>employee_count</code>.`))
		is.True(p.Has(`id="fill-person-state">The server's default: <code>about</code>.`))
		// In order: the fake network, the dataset, pdl.
		i, j, k := strings.Index(p.Body, `id="source-fake-network"`), strings.Index(p.Body, `id="source-dataset"`), strings.Index(p.Body, `id="source-pdl"`)
		is.True(i > 0 && i < j && j < k)
		pdl := p.Body[k:]
		is.True(strings.Contains(pdl, `<div class="n">4</div><div class="label">4 calls upstream</div>`))
		is.True(strings.Contains(pdl, `<div class="n">75%</div>`))
		is.True(strings.Contains(pdl, `<div class="n">12</div><div class="label">$1.20</div>`))
		is.True(strings.Contains(pdl, `<div class="n">38</div><div class="label">credits left</div>`))
		is.True(strings.Contains(pdl, `50 a month for your organization`))
		is.True(strings.Contains(pdl, `<dt>Key</dt><dd>the installation`))
		is.True(strings.Contains(pdl, `12 vendor credits</title>`)) // today's bar
		is.True(!p.Has(">999<") && !p.Has("999 vendor credits"))    // the other organization's
		is.True(strings.Contains(p.Body[j:k], "takes no key"))
	}
}

// An ask under way, and one whose process ended before its answer, count on the
// Sources page as asks, at their full price, and say so.
func TestDashboardSourcesMonthShowsAsksUnderWayAndUnknown(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.WithPricedVendors("pdl"))
	ctx := context.Background()
	e.Ask(e.OrgID, enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeHit, VendorCalls: 1, Credits: 1})
	gone := servertest.ReplicaOf(e)
	is.True(servertest.Admit(t, gone.Work.Spend(), e.OrgID, "pdl") != nil) // its process is gone before the answer
	is.True(servertest.Admit(t, e.Work.Spend(), e.OrgID, "pdl") != nil)    // under way here
	e.Clock.Add(time.Minute)
	e.Work.SettleDeadAsks(ctx)

	pdl := e.SignIn("acme", "viewer").Get("/dashboard/sources")
	is.Equal(pdl.Status, http.StatusOK)
	body := pdl.Body[strings.Index(pdl.Body, `id="source-pdl"`):]
	is.True(strings.Contains(body, `<div class="n">3</div><div class="label">3 calls upstream</div>`))
	is.True(strings.Contains(body, `1 hits · 0 misses · 0 errors · <span title="Their process ended before the answers came: counted at their full price">1 unknown</span> · <span title="Under way now: counted at their full price until answered">1 under way</span>`))
	is.True(strings.Contains(body, `<div class="n">3</div><div class="label">this month</div>`))
}
