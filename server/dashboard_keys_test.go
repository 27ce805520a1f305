package server_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"enrichd/store"

	"github.com/matryer/is"
)

// keysOf lists an organization's keys straight from the store.
func (e *env) keysOf(org string) []store.APIKey {
	e.t.Helper()
	keys, err := e.db.ListKeys(context.Background(), org)
	if err != nil {
		e.t.Fatal(err)
	}
	return keys
}

// keyByPrefix is the organization's key whose plaintext starts as plain does.
func (e *env) keyByPrefix(org, plain string) store.APIKey {
	e.t.Helper()
	for _, k := range e.keysOf(org) {
		if strings.HasPrefix(plain, k.Prefix) {
			return k
		}
	}
	e.t.Fatalf("%s has no key %.12s…", org, plain)
	return store.APIKey{}
}

// keyRow is the HTML of a key's row on the keys page, "" when the page has none.
func keyRow(p *webPage, keyID string) string {
	_, after, ok := strings.Cut(p.body, `<tr class="key" id="key-`+keyID+`">`)
	if !ok {
		return ""
	}
	row, _, _ := strings.Cut(after, "</tr>")
	return row
}

// apiStatus is the status /v1 answers a request authenticated with key.
func (e *env) apiStatus(key string) int {
	e.t.Helper()
	return e.do("GET", "/v1/status", nil, "Authorization", "Bearer "+key).status
}

func TestDashboardKeysPageForBothRoles(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	acme := e.keyByPrefix("acme", e.key)
	for _, role := range []string{"admin", "viewer"} {
		p := e.signIn("acme", role).get("/dashboard/settings/keys")
		is.Equal(p.status, http.StatusOK)
		row := keyRow(p, acme.ID)
		is.True(row != "")                                              // the env's key is listed
		is.True(strings.Contains(row, "<code>"+acme.Prefix+"…</code>")) // by its prefix, as `keys list` shows it
		is.True(strings.Contains(row, "test"))                          // its name
		is.True(strings.Contains(row, `class="last-used">never<`))
		is.True(strings.Contains(row, `class="status active"`))
		is.True(!p.has(e.key)) // never the key itself
		is.Equal(p.has(`<form id="create-key"`), role == "admin")
		is.Equal(p.has(`class="danger"`), role == "admin")
		is.Equal(p.has(`action="/dashboard/settings/keys/`+acme.ID+`/revoke"`), role == "admin")
	}
}

func TestDashboardViewerCannotCreateOrRevokeKeys(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	v := e.signIn("acme", "viewer")
	acme := e.keyByPrefix("acme", e.key)

	p := v.post("/dashboard/settings/keys", url.Values{"name": {"sneaky"}})
	is.Equal(p.status, http.StatusForbidden)
	is.True(p.shownSecret() == "")
	is.Equal(len(e.keysOf("acme")), 1) // nothing created

	p = v.post("/dashboard/settings/keys/"+acme.ID+"/revoke", url.Values{})
	is.Equal(p.status, http.StatusForbidden)
	is.Equal(e.keyByPrefix("acme", e.key).RevokedAt, nil) // nothing revoked
	is.Equal(e.apiStatus(e.key), http.StatusOK)
}

// TestDashboardKeyLifecycle creates a key in the dashboard, uses it against /v1, and
// revokes it there: the key is exactly one `enrichd keys create` would make.
func TestDashboardKeyLifecycle(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	admin := e.signIn("acme", "admin")

	p := admin.post("/dashboard/settings/keys", url.Values{"name": {"  CRM sync  "}})
	is.Equal(p.status, http.StatusCreated) // the page itself: the key is in no URL
	is.Equal(p.location, "")
	plain := p.shownSecret()
	is.True(strings.HasPrefix(plain, "enr_"))
	is.True(p.has(`<code id="new-key">` + plain + `</code>`))
	is.True(p.has(`<button type="button" data-copy="#new-key">Copy</button>`))
	is.True(p.has("shown this once"))
	is.Equal(strings.Count(p.body, plain), 1)
	is.Equal(p.header.Get("Cache-Control"), "no-store")

	k := e.keyByPrefix("acme", plain)
	is.Equal(k.Name, "CRM sync") // trimmed
	is.Equal(k.OrgID, e.orgID)
	is.True(p.has("Key created."))
	row := keyRow(p, k.ID)
	is.True(strings.Contains(row, `class="last-used">never<`))
	is.True(strings.Contains(row, `class="status active"`))

	// It authenticates /v1 as acme.
	r := e.do("GET", "/v1/tasks", nil, "Authorization", "Bearer "+plain)
	is.Equal(r.status, http.StatusOK)
	// Closing the database waits for the write of the key's last use, which runs
	// beside the request; the browser's session lives in the database and survives.
	e.restart()

	p = admin.get("/dashboard/settings/keys")
	is.Equal(p.status, http.StatusOK)
	is.True(!p.has(plain)) // shown once, never again
	is.True(!p.has(`id="new-key"`))
	row = keyRow(p, k.ID)
	is.True(strings.Contains(row, "CRM sync"))
	is.True(!strings.Contains(row, `class="last-used">never<`)) // its use is recorded
	is.True(strings.Contains(row, `class="last-used" title="`))
	is.True(e.keyByPrefix("acme", plain).LastUsedAt != nil)

	// Revoked from the dashboard, it no longer authenticates.
	p = admin.post("/dashboard/settings/keys/"+k.ID+"/revoke", url.Values{})
	is.Equal(p.status, http.StatusSeeOther)
	to, err := url.Parse(p.location)
	is.NoErr(err)
	is.Equal(to.Path, "/dashboard/settings/keys")
	is.True(strings.Contains(to.Query().Get("notice"), k.Prefix+"… revoked"))
	is.Equal(e.apiStatus(plain), http.StatusUnauthorized)
	is.Equal(e.apiStatus(e.key), http.StatusOK) // the org's other key is untouched

	p = admin.get(p.location)
	is.Equal(p.status, http.StatusOK)
	is.True(p.has(k.Prefix + "… revoked"))
	row = keyRow(p, k.ID)
	is.True(strings.Contains(row, `class="status revoked"`))
	is.True(!strings.Contains(row, "/revoke")) // nothing left to revoke
	is.True(e.keyByPrefix("acme", plain).RevokedAt != nil)

	// Revoking it again changes nothing and is no error.
	revokedAt := *e.keyByPrefix("acme", plain).RevokedAt
	e.clock.Add(time.Minute)
	is.Equal(admin.post("/dashboard/settings/keys/"+k.ID+"/revoke", url.Values{}).status, http.StatusSeeOther)
	is.Equal(*e.keyByPrefix("acme", plain).RevokedAt, revokedAt)
}

func TestDashboardKeyNamesAreBounded(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	admin := e.signIn("acme", "admin")
	for _, name := range []string{strings.Repeat("x", 101), "two\nlines", "bell\a", "ab\xff\xfe"} {
		p := admin.post("/dashboard/settings/keys", url.Values{"name": {name}})
		is.Equal(p.status, http.StatusBadRequest)
		is.True(p.shownSecret() == "")
	}
	is.Equal(len(e.keysOf("acme")), 1)

	// 100 characters is the most; no name at all is fine, as with `keys create`.
	p := admin.post("/dashboard/settings/keys", url.Values{"name": {strings.Repeat("é", 100)}})
	is.Equal(p.status, http.StatusCreated)
	p = admin.post("/dashboard/settings/keys", url.Values{})
	is.Equal(p.status, http.StatusCreated)
	is.True(strings.Contains(keyRow(p, e.keyByPrefix("acme", p.shownSecret()).ID), "unnamed"))
	is.Equal(len(e.keysOf("acme")), 3)
}

func TestDashboardKeysOfAnotherOrganization(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	otherKey, _ := e.newOrg("other", 100)
	other := e.keyByPrefix("other", otherKey)
	admin := e.signIn("acme", "admin")

	p := admin.get("/dashboard/settings/keys")
	is.Equal(p.status, http.StatusOK)
	is.True(!p.has(other.Prefix)) // another org's keys are not listed
	is.True(keyRow(p, other.ID) == "")

	for _, id := range []string{other.ID, other.Prefix, "no-such-key", strings.Repeat("a", 65)} {
		p = admin.post("/dashboard/settings/keys/"+id+"/revoke", url.Values{})
		is.Equal(p.status, http.StatusNotFound)
		is.True(p.has("no such key"))
	}
	is.Equal(e.keyByPrefix("other", otherKey).RevokedAt, nil)
	is.Equal(e.apiStatus(otherKey), http.StatusOK) // still works

	// A key made in acme's dashboard is acme's, never other's.
	plain := admin.post("/dashboard/settings/keys", url.Values{"name": {"ci"}}).shownSecret()
	is.Equal(len(e.keysOf("other")), 1)
	is.Equal(e.keyByPrefix("acme", plain).OrgID, e.orgID)
	p = e.signIn("other", "admin").get("/dashboard/settings/keys")
	is.True(!p.has(plain[:12]))
}

func TestDashboardKeysRefuseCrossSiteForms(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	admin := e.signIn("acme", "admin")
	acme := e.keyByPrefix("acme", e.key)

	p := admin.do(http.MethodPost, "/dashboard/settings/keys", url.Values{"name": {"evil"}}, "Sec-Fetch-Site", "cross-site")
	is.Equal(p.status, http.StatusForbidden)
	is.True(p.shownSecret() == "")
	p = admin.do(http.MethodPost, "/dashboard/settings/keys", url.Values{"name": {"evil"}}, "Origin", "https://evil.example")
	is.Equal(p.status, http.StatusForbidden)
	is.Equal(len(e.keysOf("acme")), 1)

	p = admin.do(http.MethodPost, "/dashboard/settings/keys/"+acme.ID+"/revoke", url.Values{}, "Sec-Fetch-Site", "cross-site")
	is.Equal(p.status, http.StatusForbidden)
	is.Equal(e.apiStatus(e.key), http.StatusOK)
}

// TestDashboardKeysAreNotForTheAPI: an API key does not open the keys page, so a
// leaked key cannot mint more keys.
func TestDashboardKeysAreNotForTheAPI(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	b := e.newBrowser()
	p := b.do(http.MethodPost, "/dashboard/settings/keys", url.Values{"name": {"minted"}},
		"Sec-Fetch-Site", "same-origin", "Authorization", "Bearer "+e.key)
	is.Equal(p.status, http.StatusSeeOther) // to sign-in
	is.True(strings.HasPrefix(p.location, "/dashboard/login"))
	is.Equal(len(e.keysOf("acme")), 1)
}
