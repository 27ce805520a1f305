package server_test

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

	"github.com/matryer/is"
)

// sourceRow is the HTML of a source's row in the Sources page's keys.
func sourceRow(p *webPage, name string) string {
	_, after, ok := strings.Cut(p.body, `<tr class="source-key" id="key-`+name+`">`)
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
	is := is.New(t)
	ctx := context.Background()
	const installKey, ownKey, wrongKey = "pdl-install-key-00aa11bb", "pdl-dash-own-key-a1b2c3d4", "pdl-wrong-key-99990000"
	vendor := newByKeyPDL(t, installKey, ownKey)
	box, _, err := secret.LoadOrCreate(filepath.Join(t.TempDir(), "secret-key"))
	is.NoErr(err)
	e := newEnv(t, func(c *server.Config) {
		pdl, err := source.NewPDL(source.VendorConfig{APIKey: installKey, BaseURL: vendor.URL, Rate: 1000, Burst: 1000, Backoff: time.Millisecond, Logger: c.Logger})
		if err != nil {
			t.Fatal(err)
		}
		c.Sources = []enrich.Source{pdl}
		c.Secrets = box
	})
	admin, viewer := e.signIn("acme", "admin"), e.signIn("acme", "viewer")

	p := admin.get("/dashboard/sources")
	is.Equal(p.status, http.StatusOK)
	row := sourceRow(p, "pdl")
	is.True(strings.Contains(row, "the installation's"))
	is.True(strings.Contains(row, `action="/dashboard/settings/sources/pdl"`))
	is.True(sourceRow(p, "fake-network") == "") // only the sources that take a key

	p = admin.post("/dashboard/settings/sources/pdl", url.Values{"key": {wrongKey}})
	is.Equal(p.status, http.StatusUnprocessableEntity)
	is.True(p.has("pdl refused the key, so it was not stored"))
	is.True(!p.has(wrongKey))
	k, err := e.db.OrgSourceKey(ctx, e.orgID, "pdl")
	is.NoErr(err)
	is.True(k == nil)
	p = admin.post("/dashboard/settings/sources/pdl", url.Values{"key": {""}})
	is.Equal(p.status, http.StatusUnprocessableEntity)
	is.True(p.has("Paste the key first."))

	// A viewer can set nothing.
	p = viewer.post("/dashboard/settings/sources/pdl", url.Values{"key": {ownKey}})
	is.Equal(p.status, http.StatusForbidden)
	k, err = e.db.OrgSourceKey(ctx, e.orgID, "pdl")
	is.NoErr(err)
	is.True(k == nil)

	p = admin.post("/dashboard/settings/sources/pdl", url.Values{"key": {ownKey}, "allow_fallback": {"on"}})
	is.Equal(p.status, http.StatusSeeOther)
	sent := vendor.requests()
	is.Equal(sent[len(sent)-1], source.PDLKeyCheckDomain+" "+ownKey) // checked with the vendor
	k, err = e.db.OrgSourceKey(ctx, e.orgID, "pdl")
	is.NoErr(err)
	is.Equal(k.Last4, "…c3d4")
	is.True(k.AllowFallback)
	for _, b := range []*browser{admin, viewer} {
		p = b.get("/dashboard/sources")
		row = sourceRow(p, "pdl")
		is.True(strings.Contains(row, "your own key <code>…c3d4</code>"))
		is.True(strings.Contains(row, "the installation's key is used"))
		is.True(!p.has(ownKey))
		is.Equal(strings.Contains(row, "<form"), b == admin)
	}

	// Failing, as the vendor's refusal marks it.
	is.NoErr(e.db.MarkSourceKeyFailing(ctx, e.orgID, "pdl", k.Generation, "pdl refused the organization's own key (401)"))
	row = sourceRow(admin.get("/dashboard/sources"), "pdl")
	is.True(strings.Contains(row, `<span class="status failed">failing</span>`))
	is.True(strings.Contains(row, "refused the organization&#39;s own key (401)"))
	// The Sources page says so, to an admin and a viewer, and that the fallback the
	// organization allowed answers meanwhile.
	for _, b := range []*browser{admin, viewer} {
		p = b.get("/dashboard/sources")
		is.Equal(p.status, http.StatusOK)
		_, pdl, ok := strings.Cut(p.body, `id="source-pdl"`)
		is.True(ok)
		pdl, _, _ = strings.Cut(pdl, "</section>")
		is.True(strings.Contains(pdl, `your organization's own key ending in <code>…c3d4</code> — <span class="status failed">refused by the vendor</span>; the installation's key answers meanwhile`))
		is.True(!p.has(ownKey))
	}

	is.Equal(viewer.post("/dashboard/settings/sources/pdl/clear", url.Values{}).status, http.StatusForbidden)
	p = admin.post("/dashboard/settings/sources/pdl/clear", url.Values{})
	is.Equal(p.status, http.StatusSeeOther)
	k, err = e.db.OrgSourceKey(ctx, e.orgID, "pdl")
	is.NoErr(err)
	is.True(k == nil)
	is.True(strings.Contains(sourceRow(admin.get("/dashboard/sources"), "pdl"), "the installation's"))
	is.Equal(admin.post("/dashboard/settings/sources/web", url.Values{"key": {ownKey}}).status, http.StatusNotFound)
	is.True(!strings.Contains(e.logs.String(), ownKey))
}
