package server_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/matryer/is"
)

// Sources are in one place: one item of the navigation, whose page holds each
// source's month, the fill lists (a form for an admin) and the organization's own
// keys; Settings → Sources' old address leads there, and its forms come back there.
func TestDashboardSourcesInOnePlace(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, withPricedVendors("pdl"))
	admin, viewer := e.signIn("acme", "admin"), e.signIn("acme", "viewer")
	for role, b := range map[string]*browser{"admin": admin, "viewer": viewer} {
		p := b.get("/dashboard/sources")
		is.Equal(p.status, http.StatusOK)
		_, nav, _ := strings.Cut(p.body, "<nav")
		nav, _, _ = strings.Cut(nav, "</nav>")
		is.Equal(strings.Count(nav, "<a "), 12)
		is.Equal(strings.Count(nav, "Sources"), 1)
		is.True(strings.Contains(nav, `<a href="/dashboard/sources" aria-current="page">Sources</a>`))
		is.True(p.has(`id="source-pdl"`))                                                          // the month
		is.True(p.has(`<form id="fill-lists" method="post" action="/dashboard/settings/sources"`)) // the lists
		is.True(p.has(`id="source-keys-title"`))                                                   // the keys
		is.Equal(strings.Contains(p.body, `<fieldset class="stack plain" disabled>`), role == "viewer")

		// The old address, with what it carried.
		old := b.get("/dashboard/settings/sources?from=bookmark")
		is.Equal(old.status, http.StatusMovedPermanently)
		is.Equal(old.location, "/dashboard/sources?from=bookmark")
	}

	p := admin.post("/dashboard/settings/sources", url.Values{"company": {"slogan"}})
	is.Equal(p.status, http.StatusSeeOther)
	is.True(strings.HasPrefix(p.location, "/dashboard/sources?"))
	p = admin.get(p.location)
	is.True(p.has("Fill lists saved"))
	is.True(p.has(`id="fill-company-state">This organization's own list: <code>slogan</code>.`))
}

// Each source's chart on the Sources page has a title, what its bars count in, and
// an accessible name made of both, naming the source.
func TestDashboardSourcesChartIsTitled(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, withPricedVendors("pdl"))
	e.ask(e.orgID, enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeHit, VendorCalls: 1, Credits: 4})
	p := e.signIn("acme", "viewer").get("/dashboard/sources")
	is.Equal(p.status, http.StatusOK)
	_, pdl, ok := strings.Cut(p.body, `id="source-pdl"`)
	is.True(ok)
	pdl, _, _ = strings.Cut(pdl, "</section>")
	month := store.MonthStart(e.db.Now().UTC()).Format("January 2006")
	is.True(strings.Contains(pdl, `<figcaption id="chart-pdl-title">Vendor credits per day, `+month+` (UTC): 4 in all</figcaption>`))
	is.True(strings.Contains(pdl, `role="img" aria-labelledby="source-pdl-title chart-pdl-title"`))
	is.True(strings.Contains(pdl, `<text class="unit" x="0" y="18">credits</text>`))
}
