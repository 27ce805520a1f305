package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/enrich/source"
	"enrichd/secret"
	"enrichd/server"
	"enrichd/server/servertest"

	"github.com/matryer/is"
)

// sourceRow is the HTML of a source's row in the Sources page's keys.
func sourceRow(p *servertest.WebPage, name string) string {
	_, after, ok := strings.Cut(p.Body, `<tr class="source-key" id="key-`+name+`">`)
	if !ok {
		return ""
	}
	row, _, _ := strings.Cut(after, "</tr>")
	return row
}

// TestDashboardSourcesSetsAndClearsAnOrganizationsKey: an admin sets the
// organization's own key on the Sources page, checked with the vendor, shown by
// its last 4 characters only; a refused key is not stored and not echoed; a viewer
// sees whose key is used and can change nothing; clearing goes back to the
// installation's key.
func TestDashboardSourcesSetsAndClearsAnOrganizationsKey(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	const installKey, ownKey, wrongKey = "pdl-install-key-00aa11bb", "pdl-dash-own-key-a1b2c3d4", "pdl-wrong-key-99990000"
	vendor := servertest.NewByKeyPDL(t, installKey, ownKey)
	box, _, err := secret.LoadOrCreate(filepath.Join(t.TempDir(), "secret-key"))
	is.NoErr(err)
	e := servertest.NewEnv(t, func(c *server.Config) {
		pdl, err := source.NewPDL(source.VendorConfig{APIKey: installKey, BaseURL: vendor.URL, Rate: 1000, Burst: 1000, Backoff: time.Millisecond, Logger: c.Logger})
		if err != nil {
			t.Fatal(err)
		}
		c.Sources = []enrich.Source{pdl}
		c.Secrets = box
	})
	admin, viewer := e.SignIn("acme", "admin"), e.SignIn("acme", "viewer")

	p := admin.Get("/dashboard/sources")
	is.Equal(p.Status, http.StatusOK)
	row := sourceRow(p, "pdl")
	is.True(strings.Contains(row, "the installation's"))
	is.True(strings.Contains(row, `action="/dashboard/settings/sources/pdl"`))
	is.True(sourceRow(p, "fake-network") == "") // only the sources that take a key

	p = admin.Post("/dashboard/settings/sources/pdl", url.Values{"key": {wrongKey}})
	is.Equal(p.Status, http.StatusUnprocessableEntity)
	is.True(p.Has("pdl refused the key, so it was not stored"))
	is.True(!p.Has(wrongKey))
	k, err := e.DB.OrgSourceKey(ctx, e.OrgID, "pdl")
	is.NoErr(err)
	is.True(k == nil)
	p = admin.Post("/dashboard/settings/sources/pdl", url.Values{"key": {""}})
	is.Equal(p.Status, http.StatusUnprocessableEntity)
	is.True(p.Has("Paste the key first."))

	// A viewer can set nothing.
	p = viewer.Post("/dashboard/settings/sources/pdl", url.Values{"key": {ownKey}})
	is.Equal(p.Status, http.StatusForbidden)
	k, err = e.DB.OrgSourceKey(ctx, e.OrgID, "pdl")
	is.NoErr(err)
	is.True(k == nil)

	p = admin.Post("/dashboard/settings/sources/pdl", url.Values{"key": {ownKey}, "allow_fallback": {"on"}})
	is.Equal(p.Status, http.StatusSeeOther)
	sent := vendor.Requests()
	is.Equal(sent[len(sent)-1], source.PDLKeyCheckDomain+" "+ownKey) // checked with the vendor
	k, err = e.DB.OrgSourceKey(ctx, e.OrgID, "pdl")
	is.NoErr(err)
	is.Equal(k.Last4, "…c3d4")
	is.True(k.AllowFallback)
	for _, b := range []*servertest.Browser{admin, viewer} {
		p = b.Get("/dashboard/sources")
		row = sourceRow(p, "pdl")
		is.True(strings.Contains(row, "your own key <code>…c3d4</code>"))
		is.True(strings.Contains(row, "the installation's key is used"))
		is.True(!p.Has(ownKey))
		is.Equal(strings.Contains(row, "<form"), b == admin)
	}

	// Failing, as the vendor's refusal marks it.
	is.NoErr(e.DB.MarkSourceKeyFailing(ctx, e.OrgID, "pdl", k.Generation, "pdl refused the organization's own key (401)"))
	row = sourceRow(admin.Get("/dashboard/sources"), "pdl")
	is.True(strings.Contains(row, `<span class="status failed">failing</span>`))
	is.True(strings.Contains(row, "refused the organization&#39;s own key (401)"))
	// The Sources page says so, to an admin and a viewer, and that the fallback the
	// organization allowed answers meanwhile.
	for _, b := range []*servertest.Browser{admin, viewer} {
		p = b.Get("/dashboard/sources")
		is.Equal(p.Status, http.StatusOK)
		_, pdl, ok := strings.Cut(p.Body, `id="source-pdl"`)
		is.True(ok)
		pdl, _, _ = strings.Cut(pdl, "</section>")
		is.True(strings.Contains(pdl, `your organization's own key ending in <code>…c3d4</code> — <span class="status failed">refused by the vendor</span>; the installation's key answers meanwhile`))
		is.True(!p.Has(ownKey))
	}

	is.Equal(viewer.Post("/dashboard/settings/sources/pdl/clear", url.Values{}).Status, http.StatusForbidden)
	p = admin.Post("/dashboard/settings/sources/pdl/clear", url.Values{})
	is.Equal(p.Status, http.StatusSeeOther)
	k, err = e.DB.OrgSourceKey(ctx, e.OrgID, "pdl")
	is.NoErr(err)
	is.True(k == nil)
	is.True(strings.Contains(sourceRow(admin.Get("/dashboard/sources"), "pdl"), "the installation's"))
	is.Equal(admin.Post("/dashboard/settings/sources/web", url.Values{"key": {ownKey}}).Status, http.StatusNotFound)
	is.True(!strings.Contains(e.Logs.String(), ownKey))
}
