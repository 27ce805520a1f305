package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"enrichd/enrich"
	"enrichd/server/servertest"
	"enrichd/store"

	"github.com/matryer/is"
)

// Sources are in one place: one item of the navigation, whose page holds each
// source's month, the fill lists (a form for an admin) and the organization's own
// keys; Settings → Sources' old address leads there, and its forms come back there.
func TestDashboardSourcesInOnePlace(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.WithPricedVendors("pdl"))
	admin, viewer := e.SignIn("acme", "admin"), e.SignIn("acme", "viewer")
	for role, b := range map[string]*servertest.Browser{"admin": admin, "viewer": viewer} {
		p := b.Get("/dashboard/sources")
		is.Equal(p.Status, http.StatusOK)
		_, nav, _ := strings.Cut(p.Body, "<nav")
		nav, _, _ = strings.Cut(nav, "</nav>")
		is.Equal(strings.Count(nav, "<a "), 12)
		is.Equal(strings.Count(nav, "Sources"), 1)
		is.True(strings.Contains(nav, `<a href="/dashboard/sources" aria-current="page">Sources</a>`))
		is.True(p.Has(`id="source-pdl"`))                                                          // the month
		is.True(p.Has(`<form id="fill-lists" method="post" action="/dashboard/settings/sources"`)) // the lists
		is.True(p.Has(`id="source-keys-title"`))                                                   // the keys
		is.Equal(strings.Contains(p.Body, `<fieldset class="stack plain" disabled>`), role == "viewer")

		// The old address, with what it carried.
		old := b.Get("/dashboard/settings/sources?from=bookmark")
		is.Equal(old.Status, http.StatusMovedPermanently)
		is.Equal(old.Location, "/dashboard/sources?from=bookmark")
	}

	p := admin.Post("/dashboard/settings/sources", url.Values{"company": {"slogan"}})
	is.Equal(p.Status, http.StatusSeeOther)
	is.True(strings.HasPrefix(p.Location, "/dashboard/sources?"))
	p = admin.Get(p.Location)
	is.True(p.Has("Fill lists saved"))
	is.True(p.Has(`id="fill-company-state">This organization's own list: <code>slogan</code>.`))
}

// Each source's chart on the Sources page has a title, what its bars count in, and
// an accessible name made of both, naming the source.
func TestDashboardSourcesChartIsTitled(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.WithPricedVendors("pdl"))
	e.Ask(e.OrgID, enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeHit, VendorCalls: 1, Credits: 4})
	p := e.SignIn("acme", "viewer").Get("/dashboard/sources")
	is.Equal(p.Status, http.StatusOK)
	_, pdl, ok := strings.Cut(p.Body, `id="source-pdl"`)
	is.True(ok)
	pdl, _, _ = strings.Cut(pdl, "</section>")
	month := store.MonthStart(e.DB.Now().UTC()).Format("January 2006")
	is.True(strings.Contains(pdl, `<figcaption id="chart-pdl-title">Vendor credits per day, `+month+` (UTC): 4 in all</figcaption>`))
	is.True(strings.Contains(pdl, `role="img" aria-labelledby="source-pdl-title chart-pdl-title"`))
	is.True(strings.Contains(pdl, `<text class="unit" x="0" y="18">credits</text>`))
}
