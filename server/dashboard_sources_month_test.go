package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/store"

	"github.com/matryer/is"
)

// The Sources page shows every source in the order it is asked, with the signed-in
// organization's month: asks and calls, hit rate, vendor credits (in USD where priced)
// with a bar a day, budgets and what is left, and whose key it uses; another
// organization's spend is not on it.
func TestDashboardSourcesMonthPage(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, withPricedVendors("pdl"), func(c *server.Config) {
		c.CreditUSD = map[string]float64{"pdl": 0.1}
		c.Fill = enrich.FillLists{Person: []string{"about"}}
	})
	ctx := context.Background()
	_, otherID := e.newOrg("other", 10)
	is.NoErr(e.db.SetSourceBudget(ctx, e.orgID, "pdl", 50))
	company := []string{"slogan", "employee_count"}
	is.NoErr(e.db.SetFillLists(ctx, e.orgID, store.FillUpdate{Company: &company}))
	for range 3 {
		e.ask(e.orgID, enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeHit, VendorCalls: 1, Credits: 4})
	}
	e.ask(e.orgID, enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeMiss, VendorCalls: 1})
	e.ask(otherID, enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeHit, VendorCalls: 1, Credits: 999})

	for _, role := range []string{"admin", "viewer"} {
		p := e.signIn("acme", role).get("/dashboard/sources")
		is.Equal(p.status, http.StatusOK)
		is.True(p.has(`<a href="/dashboard/sources" aria-current="page">Sources</a>`))
		is.True(p.has(`id="fill-company-state">This organization's own list: <code>slogan</code>, <code>employee_count</code>.`))
		is.True(p.has(`id="fill-person-state">The server's default: <code>about</code>.`))
		// In order: the fake network, the dataset, pdl.
		i, j, k := strings.Index(p.body, `id="source-fake-network"`), strings.Index(p.body, `id="source-dataset"`), strings.Index(p.body, `id="source-pdl"`)
		is.True(i > 0 && i < j && j < k)
		pdl := p.body[k:]
		is.True(strings.Contains(pdl, `<div class="n">4</div><div class="label">4 calls upstream</div>`))
		is.True(strings.Contains(pdl, `<div class="n">75%</div>`))
		is.True(strings.Contains(pdl, `<div class="n">12</div><div class="label">$1.20</div>`))
		is.True(strings.Contains(pdl, `<div class="n">38</div><div class="label">credits left</div>`))
		is.True(strings.Contains(pdl, `50 a month for your organization`))
		is.True(strings.Contains(pdl, `<dt>Key</dt><dd>the installation`))
		is.True(strings.Contains(pdl, `12 vendor credits</title>`)) // today's bar
		is.True(!p.has(">999<") && !p.has("999 vendor credits"))    // the other organization's
		is.True(strings.Contains(p.body[j:k], "takes no key"))
	}
}

// An ask under way, and one whose process ended before its answer, count on the
// Sources page as asks, at their full price, and say so.
func TestDashboardSourcesMonthShowsAsksUnderWayAndUnknown(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, withPricedVendors("pdl"))
	ctx := context.Background()
	e.ask(e.orgID, enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeHit, VendorCalls: 1, Credits: 1})
	gone := replicaOf(e)
	is.True(admit(t, gone.work.Spend(), e.orgID, "pdl") != nil) // its process is gone before the answer
	is.True(admit(t, e.work.Spend(), e.orgID, "pdl") != nil)    // under way here
	e.clock.Add(time.Minute)
	e.work.SettleDeadAsks(ctx)

	pdl := e.signIn("acme", "viewer").get("/dashboard/sources")
	is.Equal(pdl.status, http.StatusOK)
	body := pdl.body[strings.Index(pdl.body, `id="source-pdl"`):]
	is.True(strings.Contains(body, `<div class="n">3</div><div class="label">3 calls upstream</div>`))
	is.True(strings.Contains(body, `1 hits · 0 misses · 0 errors · <span title="Their process ended before the answers came: counted at their full price">1 unknown</span> · <span title="Under way now: counted at their full price until answered">1 under way</span>`))
	is.True(strings.Contains(body, `<div class="n">3</div><div class="label">this month</div>`))
}
