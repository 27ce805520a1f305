package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"enrichd/server/servertest"

	"github.com/matryer/is"
)

// keyRow is the HTML of a key's row on the keys page, "" when the page has none.
func keyRow(p *servertest.WebPage, keyID string) string {
	_, after, ok := strings.Cut(p.Body, `<tr class="key" id="key-`+keyID+`">`)
	if !ok {
		return ""
	}
	row, _, _ := strings.Cut(after, "</tr>")
	return row
}

func TestDashboardKeysPageForBothRoles(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	acme := e.KeyByPrefix("acme", e.Key)
	for _, role := range []string{"admin", "viewer"} {
		p := e.SignIn("acme", role).Get("/dashboard/settings/keys")
		is.Equal(p.Status, http.StatusOK)
		row := keyRow(p, acme.ID)
		is.True(row != "")                                              // the env's key is listed
		is.True(strings.Contains(row, "<code>"+acme.Prefix+"…</code>")) // by its prefix, as `keys list` shows it
		is.True(strings.Contains(row, "test"))                          // its name
		is.True(strings.Contains(row, `class="last-used">never<`))
		is.True(strings.Contains(row, `class="status active"`))
		is.True(!p.Has(e.Key)) // never the key itself
		is.Equal(p.Has(`<form id="create-key"`), role == "admin")
		is.Equal(p.Has(`class="danger"`), role == "admin")
		is.Equal(p.Has(`action="/dashboard/settings/keys/`+acme.ID+`/revoke"`), role == "admin")
	}
}

func TestDashboardViewerCannotCreateOrRevokeKeys(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	v := e.SignIn("acme", "viewer")
	acme := e.KeyByPrefix("acme", e.Key)

	p := v.Post("/dashboard/settings/keys", url.Values{"name": {"sneaky"}})
	is.Equal(p.Status, http.StatusForbidden)
	is.True(p.ShownSecret() == "")
	is.Equal(len(e.KeysOf("acme")), 1) // nothing created

	p = v.Post("/dashboard/settings/keys/"+acme.ID+"/revoke", url.Values{})
	is.Equal(p.Status, http.StatusForbidden)
	is.Equal(e.KeyByPrefix("acme", e.Key).RevokedAt, nil) // nothing revoked
	is.Equal(e.APIStatus(e.Key), http.StatusOK)
}

// TestDashboardKeyLifecycle creates a key in the dashboard, uses it against /v1, and
// revokes it there: the key is exactly one `enrichd keys create` would make.
func TestDashboardKeyLifecycle(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	admin := e.SignIn("acme", "admin")

	p := admin.Post("/dashboard/settings/keys", url.Values{"name": {"  CRM sync  "}})
	is.Equal(p.Status, http.StatusCreated) // the page itself: the key is in no URL
	is.Equal(p.Location, "")
	plain := p.ShownSecret()
	is.True(strings.HasPrefix(plain, "enr_"))
	is.True(p.Has(`<code id="new-key">` + plain + `</code>`))
	is.True(p.Has(`<button type="button" data-copy="#new-key">Copy</button>`))
	is.True(p.Has("shown this once"))
	is.Equal(strings.Count(p.Body, plain), 1)
	is.Equal(p.Header.Get("Cache-Control"), "no-store")

	k := e.KeyByPrefix("acme", plain)
	is.Equal(k.Name, "CRM sync") // trimmed
	is.Equal(k.OrgID, e.OrgID)
	is.True(p.Has("Key created."))
	row := keyRow(p, k.ID)
	is.True(strings.Contains(row, `class="last-used">never<`))
	is.True(strings.Contains(row, `class="status active"`))

	// It authenticates /v1 as acme.
	r := e.Do("GET", "/v1/tasks", nil, "Authorization", "Bearer "+plain)
	is.Equal(r.Status, http.StatusOK)
	// Closing the database waits for the write of the key's last use, which runs
	// beside the request; the browser's session lives in the database and survives.
	e.Restart()

	p = admin.Get("/dashboard/settings/keys")
	is.Equal(p.Status, http.StatusOK)
	is.True(!p.Has(plain)) // shown once, never again
	is.True(!p.Has(`id="new-key"`))
	row = keyRow(p, k.ID)
	is.True(strings.Contains(row, "CRM sync"))
	is.True(!strings.Contains(row, `class="last-used">never<`)) // its use is recorded
	is.True(strings.Contains(row, `class="last-used" title="`))
	is.True(e.KeyByPrefix("acme", plain).LastUsedAt != nil)

	// Revoked from the dashboard, it no longer authenticates.
	p = admin.Post("/dashboard/settings/keys/"+k.ID+"/revoke", url.Values{})
	is.Equal(p.Status, http.StatusSeeOther)
	to, err := url.Parse(p.Location)
	is.NoErr(err)
	is.Equal(to.Path, "/dashboard/settings/keys")
	is.True(strings.Contains(to.Query().Get("notice"), k.Prefix+"… revoked"))
	is.Equal(e.APIStatus(plain), http.StatusUnauthorized)
	is.Equal(e.APIStatus(e.Key), http.StatusOK) // the org's other key is untouched

	p = admin.Get(p.Location)
	is.Equal(p.Status, http.StatusOK)
	is.True(p.Has(k.Prefix + "… revoked"))
	row = keyRow(p, k.ID)
	is.True(strings.Contains(row, `class="status revoked"`))
	is.True(!strings.Contains(row, "/revoke")) // nothing left to revoke
	is.True(e.KeyByPrefix("acme", plain).RevokedAt != nil)

	// Revoking it again changes nothing and is no error.
	revokedAt := *e.KeyByPrefix("acme", plain).RevokedAt
	e.Clock.Add(time.Minute)
	is.Equal(admin.Post("/dashboard/settings/keys/"+k.ID+"/revoke", url.Values{}).Status, http.StatusSeeOther)
	is.Equal(*e.KeyByPrefix("acme", plain).RevokedAt, revokedAt)
}

func TestDashboardKeyNamesAreBounded(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	admin := e.SignIn("acme", "admin")
	for _, name := range []string{strings.Repeat("x", 101), "two\nlines", "bell\a", "ab\xff\xfe"} {
		p := admin.Post("/dashboard/settings/keys", url.Values{"name": {name}})
		is.Equal(p.Status, http.StatusBadRequest)
		is.True(p.ShownSecret() == "")
	}
	is.Equal(len(e.KeysOf("acme")), 1)

	// 100 characters is the most; no name at all is fine, as with `keys create`.
	p := admin.Post("/dashboard/settings/keys", url.Values{"name": {strings.Repeat("é", 100)}})
	is.Equal(p.Status, http.StatusCreated)
	p = admin.Post("/dashboard/settings/keys", url.Values{})
	is.Equal(p.Status, http.StatusCreated)
	is.True(strings.Contains(keyRow(p, e.KeyByPrefix("acme", p.ShownSecret()).ID), "unnamed"))
	is.Equal(len(e.KeysOf("acme")), 3)
}

func TestDashboardKeysOfAnotherOrganization(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	otherKey, _ := e.NewOrg("other", 100)
	other := e.KeyByPrefix("other", otherKey)
	admin := e.SignIn("acme", "admin")

	p := admin.Get("/dashboard/settings/keys")
	is.Equal(p.Status, http.StatusOK)
	is.True(!p.Has(other.Prefix)) // another org's keys are not listed
	is.True(keyRow(p, other.ID) == "")

	for _, id := range []string{other.ID, other.Prefix, "no-such-key", strings.Repeat("a", 65)} {
		p = admin.Post("/dashboard/settings/keys/"+id+"/revoke", url.Values{})
		is.Equal(p.Status, http.StatusNotFound)
		is.True(p.Has("no such key"))
	}
	is.Equal(e.KeyByPrefix("other", otherKey).RevokedAt, nil)
	is.Equal(e.APIStatus(otherKey), http.StatusOK) // still works

	// A key made in acme's dashboard is acme's, never other's.
	plain := admin.Post("/dashboard/settings/keys", url.Values{"name": {"ci"}}).ShownSecret()
	is.Equal(len(e.KeysOf("other")), 1)
	is.Equal(e.KeyByPrefix("acme", plain).OrgID, e.OrgID)
	p = e.SignIn("other", "admin").Get("/dashboard/settings/keys")
	is.True(!p.Has(plain[:12]))
}

func TestDashboardKeysRefuseCrossSiteForms(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	admin := e.SignIn("acme", "admin")
	acme := e.KeyByPrefix("acme", e.Key)

	p := admin.Do(http.MethodPost, "/dashboard/settings/keys", url.Values{"name": {"evil"}}, "Sec-Fetch-Site", "cross-site")
	is.Equal(p.Status, http.StatusForbidden)
	is.True(p.ShownSecret() == "")
	p = admin.Do(http.MethodPost, "/dashboard/settings/keys", url.Values{"name": {"evil"}}, "Origin", "https://evil.example")
	is.Equal(p.Status, http.StatusForbidden)
	is.Equal(len(e.KeysOf("acme")), 1)

	p = admin.Do(http.MethodPost, "/dashboard/settings/keys/"+acme.ID+"/revoke", url.Values{}, "Sec-Fetch-Site", "cross-site")
	is.Equal(p.Status, http.StatusForbidden)
	is.Equal(e.APIStatus(e.Key), http.StatusOK)
}

// TestDashboardKeysAreNotForTheAPI: an API key does not open the keys page, so a
// leaked key cannot mint more keys.
func TestDashboardKeysAreNotForTheAPI(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	b := e.NewBrowser()
	p := b.Do(http.MethodPost, "/dashboard/settings/keys", url.Values{"name": {"minted"}},
		"Sec-Fetch-Site", "same-origin", "Authorization", "Bearer "+e.Key)
	is.Equal(p.Status, http.StatusSeeOther) // to sign-in
	is.True(strings.HasPrefix(p.Location, "/dashboard/login"))
	is.Equal(len(e.KeysOf("acme")), 1)
}
