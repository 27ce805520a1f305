package dashboard_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"image/png"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/matryer/is"

	"enrichd/server"
	"enrichd/server/servertest"
	"enrichd/store"
)

// TestDashboardFirstStartLink follows the link serve prints on a database with no
// user: every refusal leaves the database as it was, the good form creates the
// organization's admin and signs them in, and the link then works no more.
func TestDashboardFirstStartLink(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t) // acme, with a key and credits, and nobody to sign in
	ctx := context.Background()
	token, err := e.DB.NewInstallLink(ctx)
	is.NoErr(err)
	b := e.NewBrowser()
	link := "/dashboard/install?token=" + url.QueryEscape(token)

	p := b.Get("/dashboard/login") // nobody can sign in: the page says where the first admin comes from
	is.Equal(p.Status, http.StatusOK)
	is.True(p.Has(`id="first-start-hint"`))

	p = b.Get(link)
	is.Equal(p.Status, http.StatusOK)
	is.True(p.Has(`name="org"`) && p.Has(`name="email"`) && p.Has(`name="confirm"`))
	is.Equal(p.Header.Get("Referrer-Policy"), "no-referrer") // the token never leaves in a Referer
	is.Equal(p.Header.Get("Cache-Control"), "no-store")
	for _, bad := range []string{"", "nope", token + "x"} {
		p = b.Get("/dashboard/install?token=" + url.QueryEscape(bad))
		is.Equal(p.Status, http.StatusNotFound)
		is.True(p.Has("first-start link is not valid"))
	}

	good := url.Values{"token": {token}, "org": {"beta"}, "email": {" Owner@Beta.example "}, "password": {servertest.DashPassword}, "confirm": {servertest.DashPassword}}
	with := func(name, value string) url.Values {
		f := url.Values{}
		for k, v := range good {
			f[k] = v
		}
		f.Set(name, value)
		return f
	}
	for _, c := range []struct {
		form url.Values
		want string
	}{
		{with("org", ""), "organization name"},
		{with("org", "no spaces allowed"), "organization name"},
		{with("email", "not an address"), "email"},
		{with("password", "too short"), "at least 12 characters"},
		{with("confirm", servertest.DashPassword+"!"), "differ"},
	} {
		p = b.Post("/dashboard/install", c.form)
		is.Equal(p.Status, http.StatusBadRequest)
		is.True(strings.Contains(p.Body, c.want))
		is.True(p.Has(`role="alert"`))
		is.True(!p.Has(servertest.DashPassword)) // a password is never sent back
	}
	p = b.Post("/dashboard/install", with("token", "nope"))
	is.Equal(p.Status, http.StatusNotFound)
	// A form from another site is refused before anything is read.
	p = b.Do(http.MethodPost, "/dashboard/install", good, "Sec-Fetch-Site", "cross-site")
	is.Equal(p.Status, http.StatusForbidden)
	users, err := e.DB.ListUsers(ctx, "")
	is.NoErr(err)
	is.Equal(len(users), 0) // nothing refused made a user
	orgs, err := e.DB.ListOrgs(ctx)
	is.NoErr(err)
	is.Equal(len(orgs), 1) // nor an organization
	is.True(b.SessionCookie() == nil)

	p = b.Post("/dashboard/install", good)
	is.Equal(p.Status, http.StatusSeeOther)
	is.True(strings.HasPrefix(p.Location, "/dashboard/?notice="))
	is.True(b.SessionCookie() != nil) // signed in
	p = b.Get(p.Location)
	is.Equal(p.Status, http.StatusOK)
	is.True(p.Has("beta · admin"))
	is.True(p.Has("Welcome: beta and its admin owner@beta.example are set up"))
	users, err = e.DB.ListUsers(ctx, "")
	is.NoErr(err)
	is.Equal(len(users), 1)
	is.Equal(users[0].Role, "admin")

	// Used once: refused, and no new link is made.
	p = e.NewBrowser().Get(link)
	is.Equal(p.Status, http.StatusNotFound)
	p = e.NewBrowser().Post("/dashboard/install", with("email", "eve@beta.example"))
	is.Equal(p.Status, http.StatusNotFound)
	again, err := e.DB.NewInstallLink(ctx)
	is.NoErr(err)
	is.Equal(again, "")
	users, err = e.DB.ListUsers(ctx, "")
	is.NoErr(err)
	is.Equal(len(users), 1)

	// The password set is the one to sign in with, and the hint is gone.
	other := e.NewBrowser()
	p = other.Get("/dashboard/login")
	is.True(!p.Has(`id="first-start-hint"`))
	is.True(p.Has("enrichd users create"))
	other.Login("owner@beta.example", servertest.DashPassword)
}

// TestDashboardGettingStarted: an organization without credits or a key sees the
// list with the exact commands, each ticked once done, and the list goes away once
// nothing is left to do.
func TestDashboardGettingStarted(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	ctx := context.Background()
	b := e.SignIn("fresh", "admin") // fresh has 100 credits and a key
	p := b.Get("/dashboard/")
	is.Equal(p.Status, http.StatusOK)
	is.True(!p.Has("Getting started")) // credits, a key, and the fake network as a source

	e.NewOrg("bare", 0)
	k := e.KeysOf("bare")
	is.Equal(len(k), 1)
	is.NoErr(e.DB.RevokeKey(ctx, store.BySystem, "bare", k[0].ID))
	bare := e.SignIn("bare", "viewer")
	p = bare.Get("/dashboard/")
	is.Equal(p.Status, http.StatusOK)
	is.True(p.Has("Getting started"))
	is.True(strings.Contains(pageText(p), "./enrichd credits grant --org bare --amount 1000"))
	is.True(strings.Contains(pageText(p), "./enrichd keys create --org bare --name first"))
	is.Equal(strings.Count(p.Body, `<li class="todo">`), 2)
	is.Equal(strings.Count(p.Body, `<li class="done">`), 1) // the source: the fake network finds things

	_, err := e.DB.GrantCredits(ctx, "bare", 10, nil)
	is.NoErr(err)
	p = bare.Get("/dashboard/")
	is.Equal(strings.Count(p.Body, `<li class="todo">`), 1)
	is.Equal(strings.Count(p.Body, `<li class="done">`), 2)

	_, _, err = e.DB.CreateKey(ctx, store.BySystem, "bare", "first", false)
	is.NoErr(err)
	p = bare.Get("/dashboard/")
	is.Equal(p.Status, http.StatusOK)
	is.True(!p.Has("Getting started"))
}

// TestRootAndFavicon: the site's root leads to the dashboard, and /favicon.ico is an
// icon browsers read.
func TestRootAndFavicon(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	b := e.NewBrowser()
	p := b.Get("/")
	is.Equal(p.Status, http.StatusFound)
	is.Equal(p.Location, "/dashboard/")

	res, err := servertest.Client.Get(e.HTTP.URL + "/favicon.ico")
	is.NoErr(err)
	defer res.Body.Close()
	ico, err := io.ReadAll(res.Body)
	is.NoErr(err)
	is.Equal(res.StatusCode, http.StatusOK)
	is.Equal(res.Header.Get("Content-Type"), "image/x-icon")
	is.True(len(ico) > 22)
	// An ICO directory of one 32×32 image, a PNG at the offset it names.
	is.Equal(ico[:6], []byte{0, 0, 1, 0, 1, 0})
	is.Equal(ico[6], byte(32))
	is.Equal(ico[7], byte(32))
	size, offset := binary.LittleEndian.Uint32(ico[14:]), binary.LittleEndian.Uint32(ico[18:])
	is.Equal(int(offset)+int(size), len(ico))
	img, err := png.Decode(bytes.NewReader(ico[offset:]))
	is.NoErr(err)
	is.Equal(img.Bounds().Dx(), 32)
	is.Equal(img.Bounds().Dy(), 32)
	_, _, _, cornerAlpha := img.At(0, 0).RGBA()
	is.Equal(cornerAlpha, uint32(0)) // the rounded corner is transparent
	r, g, bl, a := img.At(16, 16).RGBA()
	is.True(r > 0xf000 && g > 0xf000 && bl > 0xf000 && a == 0xffff) // the E's middle bar is white
	r, _, bl, _ = img.At(28, 16).RGBA()
	is.True(bl > r) // beside it, the blue square
}

// pageText is the page's HTML without its tags, as a reader copies its text: a
// command's words are each in an element of their own.
func pageText(p *servertest.WebPage) string {
	return regexp.MustCompile(`<[^>]*>`).ReplaceAllString(p.Body, "")
}

// TestDashboardGettingStartedNamesTheDatabase: a service on a database other than the
// default file shows commands that reach that database, since without --db they would
// act on ./enrichd.db; a PostgreSQL URL is shown without its password.
//
// The commands that write data about people (import, serve) name the secret key file
// serve was given, since they must hash it under the same key.
func TestDashboardGettingStartedNamesTheDatabase(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ db, keyFile, want, never string }{
		{"", "", "./enrichd credits grant --org bare --amount 1000", "--db"},
		{"/var/lib/enrichd/prod.db", "", "./enrichd credits grant --db /var/lib/enrichd/prod.db --org bare --amount 1000", "--secret-key-file"},
		{"/srv/my data/e.db", "", "./enrichd import --db &#39;/srv/my data/e.db&#39; examples/people-and-companies.jsonl", ""},
		{"postgres://enrichd:s3cret@db.internal:5432/enrichd?sslmode=require", "/etc/enrichd/secret key",
			"./enrichd keys create --db &#39;postgres://enrichd@db.internal:5432/enrichd?sslmode=require&#39; --org bare --name first", "s3cret"},
		{"postgres://enrichd@db.internal/enrichd", "/etc/enrichd/secret key",
			"./enrichd import --db postgres://enrichd@db.internal/enrichd --secret-key-file &#39;/etc/enrichd/secret key&#39; examples/people-and-companies.jsonl", ""},
	} {
		t.Run("db="+c.db, func(t *testing.T) {
			is := is.New(t)
			e := servertest.NewEnv(t, func(cfg *server.Config) { cfg.Database, cfg.SecretKeyFile = c.db, c.keyFile })
			e.NewOrg("bare", 0)
			bare := e.SignIn("bare", "viewer")
			p := bare.Get("/dashboard/")
			is.Equal(p.Status, http.StatusOK)
			if !strings.Contains(pageText(p), c.want) {
				t.Fatalf("the overview lacks %q:\n%s", c.want, p.Body)
			}
			if c.never != "" {
				is.True(!p.Has(c.never))
			}
		})
	}
}
