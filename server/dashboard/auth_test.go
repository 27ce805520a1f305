package dashboard_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"enrichd/server"
	"enrichd/server/servertest"

	"github.com/matryer/is"
)

func TestDashboardSignInFromTheLink(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	token := e.NewUser("acme", "lead@acme.example", "admin")
	b := e.NewBrowser()

	p := b.Get("/dashboard/")
	is.Equal(p.Status, http.StatusSeeOther) // signed out, the dashboard sends to sign-in
	is.Equal(p.Location, "/dashboard/login")

	p = b.Get("/dashboard/setup?token=" + url.QueryEscape(token))
	is.Equal(p.Status, http.StatusOK)
	is.True(p.Has("lead@acme.example"))
	is.True(p.Has(`name="password"`))
	is.Equal(p.Header.Get("Referrer-Policy"), "no-referrer") // the token never leaves in a Referer

	p = b.Post("/dashboard/setup", url.Values{"token": {token}, "password": {"too short"}, "confirm": {"too short"}})
	is.Equal(p.Status, http.StatusBadRequest)
	is.True(p.Has("at least 12 characters"))
	p = b.Post("/dashboard/setup", url.Values{"token": {token}, "password": {servertest.DashPassword}, "confirm": {servertest.DashPassword + "!"}})
	is.Equal(p.Status, http.StatusBadRequest)
	is.True(p.Has("differ"))

	p = b.Post("/dashboard/setup", url.Values{"token": {token}, "password": {servertest.DashPassword}, "confirm": {servertest.DashPassword}})
	is.Equal(p.Status, http.StatusSeeOther)
	is.True(strings.HasPrefix(p.Location, "/dashboard/login?"))
	// The sign-in form it leads to carries the address, and asks for the password first.
	signIn := b.Get(p.Location)
	is.Equal(signIn.Status, http.StatusOK)
	is.True(signIn.Has(`name="email" value="lead@acme.example" autocomplete="username" required maxlength="254">`))
	is.True(signIn.Has(`name="password" autocomplete="current-password" required maxlength="256" autofocus>`))
	is.True(signIn.Has("Your password is set."))

	// The link is used up.
	p = b.Get("/dashboard/setup?token=" + url.QueryEscape(token))
	is.Equal(p.Status, http.StatusNotFound)
	is.True(p.Has("not valid"))
	p = b.Post("/dashboard/setup", url.Values{"token": {token}, "password": {"another long password"}, "confirm": {"another long password"}})
	is.Equal(p.Status, http.StatusNotFound)

	p = b.Get("/dashboard/login")
	is.Equal(p.Status, http.StatusOK)
	is.True(p.Has(`name="email"`) && p.Has(`name="password"`))
	b.Login("lead@acme.example", servertest.DashPassword)
	p = b.Get("/dashboard/")
	is.Equal(p.Status, http.StatusOK)
	is.True(p.Has("Overview"))
	is.True(p.Has(`id="balance">100<`)) // acme's 100 credits
	is.True(p.Has("<svg"))              // the chart is drawn on the server
}

func TestDashboardWrongSignInSaysNothingOfWhichPart(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.SignIn("acme", "admin") // admin@acme.example exists with DashPassword
	disabled := e.SignIn("acme", "viewer")
	if _, err := e.DB.DisableUser(t.Context(), disabled.Email); err != nil {
		t.Fatal(err)
	}
	unset := "unset@acme.example"
	e.NewUser("acme", unset, "viewer")

	var bodies []string
	for _, tc := range []struct{ email, password string }{
		{"admin@acme.example", "wrong password here"},
		{"nobody@acme.example", servertest.DashPassword},
		{disabled.Email, servertest.DashPassword},
		{unset, servertest.DashPassword},
		{"ADMIN@acme.example", "wrong password here"},
	} {
		p := e.NewBrowser().Post("/dashboard/login", url.Values{"email": {tc.email}, "password": {tc.password}})
		is.Equal(p.Status, http.StatusUnauthorized)
		is.True(p.Has("The email or the password is wrong."))
		bodies = append(bodies, p.Body)
	}
	for _, b := range bodies[1:] {
		is.Equal(b, strings.ReplaceAll(bodies[0], "admin@acme.example", emailIn(b))) // the same page but for the email echoed back
	}
	// Case does not matter in the email.
	e.NewBrowser().Login("Admin@ACME.example", servertest.DashPassword)
}

// emailIn is the email a sign-in page echoes back in its form.
func emailIn(body string) string {
	_, after, _ := strings.Cut(body, `name="email" value="`)
	v, _, _ := strings.Cut(after, `"`)
	return v
}

func TestDashboardCookieFlags(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	token := e.NewUser("acme", "lead@acme.example", "admin")
	b := e.NewBrowser()
	b.Post("/dashboard/setup", url.Values{"token": {token}, "password": {servertest.DashPassword}, "confirm": {servertest.DashPassword}})
	p := b.Post("/dashboard/login", url.Values{"email": {"lead@acme.example"}, "password": {servertest.DashPassword}})
	is.Equal(p.Status, http.StatusSeeOther)
	set := p.Header.Get("Set-Cookie")
	is.True(strings.HasPrefix(set, "enrichd_session="))
	is.True(strings.Contains(set, "HttpOnly"))
	is.True(strings.Contains(set, "SameSite=Lax"))
	is.True(strings.Contains(set, "Path=/"))
	is.True(!strings.Contains(set, "Secure")) // plain http on loopback: a Secure cookie would never come back

	https := servertest.NewEnv(t, func(c *server.Config) { c.PublicURL = "https://enrich.example.com" })
	token = https.NewUser("acme", "lead@acme.example", "admin")
	b = https.NewBrowser()
	b.Post("/dashboard/setup", url.Values{"token": {token}, "password": {servertest.DashPassword}, "confirm": {servertest.DashPassword}})
	p = b.Post("/dashboard/login", url.Values{"email": {"lead@acme.example"}, "password": {servertest.DashPassword}})
	is.Equal(p.Status, http.StatusSeeOther)
	set = p.Header.Get("Set-Cookie")
	is.True(strings.HasPrefix(set, "__Host-enrichd_session="))
	is.True(strings.Contains(set, "Secure"))
	is.True(strings.Contains(set, "HttpOnly"))
	is.True(strings.Contains(set, "SameSite=Lax"))
}

func TestDashboardSessionsExpire(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, func(c *server.Config) { c.SessionIdle, c.SessionMax = time.Hour, 3*time.Hour })
	b := e.SignIn("acme", "viewer")
	is.Equal(b.Get("/dashboard/").Status, http.StatusOK)

	// Used every 50 minutes, the session lives on until its absolute end.
	for range 3 {
		e.Clock.Add(50 * time.Minute)
		is.Equal(b.Get("/dashboard/").Status, http.StatusOK)
	}
	e.Clock.Add(40 * time.Minute) // 3 h 10 min after sign-in
	p := b.Get("/dashboard/")
	is.Equal(p.Status, http.StatusSeeOther)
	is.Equal(p.Location, "/dashboard/login")

	b = e.NewBrowser()
	b.Login("viewer@acme.example", servertest.DashPassword)
	e.Clock.Add(61 * time.Minute) // idle past an hour
	p = b.Get("/dashboard/?notice=hello")
	is.Equal(p.Status, http.StatusSeeOther)
	is.Equal(p.Location, "/dashboard/login?next=%2Fdashboard%2F%3Fnotice%3Dhello") // and back there after signing in
}

func TestDashboardLogoutEndsTheSessionOnTheServer(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	b := e.SignIn("acme", "admin")
	stolen := *b.SessionCookie()
	p := b.Post("/dashboard/logout", nil)
	is.Equal(p.Status, http.StatusSeeOther)
	is.True(strings.HasPrefix(p.Location, "/dashboard/login"))
	is.Equal(b.SessionCookie(), nil) // the browser dropped it

	// A copy of the cookie kept from before is worth nothing now.
	thief := e.NewBrowser()
	req, _ := http.NewRequest(http.MethodGet, e.HTTP.URL+"/dashboard/", nil)
	req.AddCookie(&stolen)
	res, err := thief.Client.Do(req)
	is.NoErr(err)
	res.Body.Close()
	is.Equal(res.StatusCode, http.StatusSeeOther)
	is.Equal(res.Header.Get("Location"), "/dashboard/login")
}

func TestDashboardLoginIsRateLimited(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.SignIn("acme", "admin")

	// Per account: five tries (signing in above was the first), whatever the address.
	for i := range 4 {
		p := e.NewBrowser().Post("/dashboard/login", url.Values{"email": {"admin@acme.example"}, "password": {"guess number " + string(rune('a'+i))}})
		is.Equal(p.Status, http.StatusUnauthorized)
	}
	p := e.NewBrowser().Post("/dashboard/login", url.Values{"email": {"admin@acme.example"}, "password": {servertest.DashPassword}})
	is.Equal(p.Status, http.StatusTooManyRequests) // even the right password waits
	is.True(p.Header.Get("Retry-After") != "")
	is.True(p.Has("Too many sign-in attempts"))

	// Per address: the same client walking through accounts gets its ten tries, then
	// waits. A slow machine may earn a try back every 6 s meanwhile, so the test counts
	// the tries before the first refusal rather than expecting it at the eleventh.
	e2 := servertest.NewEnv(t)
	allowed := 0
	var last *servertest.WebPage
	for i := range 40 {
		last = e2.NewBrowser().Post("/dashboard/login", url.Values{"email": {fmt.Sprintf("someone%d@acme.example", i)}, "password": {"guess guess guess"}})
		if last.Status == http.StatusTooManyRequests {
			break
		}
		is.Equal(last.Status, http.StatusUnauthorized)
		allowed++
	}
	is.Equal(last.Status, http.StatusTooManyRequests)
	is.True(allowed >= 10)
}

func TestDashboardRefusesCrossSiteWrites(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	b := e.SignIn("acme", "admin")
	p := b.Do(http.MethodPost, "/dashboard/logout", url.Values{}, "Sec-Fetch-Site", "cross-site")
	is.Equal(p.Status, http.StatusForbidden)
	is.True(p.Has("another site"))
	p = b.Do(http.MethodPost, "/dashboard/logout", url.Values{}, "Origin", "https://evil.example")
	is.Equal(p.Status, http.StatusForbidden)
	is.Equal(b.Get("/dashboard/").Status, http.StatusOK) // still signed in

	// Signing in from another site's form is refused too.
	p = e.NewBrowser().Do(http.MethodPost, "/dashboard/login", url.Values{"email": {"admin@acme.example"}, "password": {servertest.DashPassword}},
		"Sec-Fetch-Site", "cross-site")
	is.Equal(p.Status, http.StatusForbidden)
}

func TestDashboardAndAPICredentialsDoNotMix(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	b := e.SignIn("acme", "admin")

	// An API key does not open the dashboard.
	p := e.NewBrowser().Get("/dashboard/", "Authorization", "Bearer "+e.Key)
	is.Equal(p.Status, http.StatusSeeOther)
	is.Equal(p.Location, "/dashboard/login")

	// A session cookie does not authenticate the API.
	p = b.Get("/v1/tasks")
	is.Equal(p.Status, http.StatusUnauthorized)
	is.Equal(strings.TrimSpace(p.Body), "Unauthorized")
}

func TestDashboardStaticFilesAreEmbedded(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	b := e.NewBrowser()
	for _, f := range []string{"htmx.min.js", "style.css", "dashboard.js"} {
		p := b.Get("/dashboard/static/" + f)
		is.Equal(p.Status, http.StatusOK)
		is.True(len(p.Body) > 100)
	}
	is.True(strings.Contains(b.Get("/dashboard/static/htmx.min.js").Body, `version:"2.0.11"`))
	is.True(strings.Contains(b.Get("/dashboard/static/style.css").Body, "prefers-color-scheme: dark"))
	is.Equal(b.Get("/dashboard/static/nothing.js").Status, http.StatusNotFound)
}

func TestDashboardSignInReturnsToThePageAskedForOnThisSiteOnly(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	i := 0
	for next, want := range map[string]string{
		"/dashboard/?notice=hello":    "/dashboard/?notice=hello",
		"//evil.example/dashboard/":   "/dashboard/",
		"https://evil.example/":       "/dashboard/",
		"/dashboard/\\evil.example":   "/dashboard/",
		"/v1/tasks":                   "/dashboard/",
		"":                            "/dashboard/",
		"/dashboard//evil.example/x/": "/dashboard/evil.example/x/", // a path on this host, cleaned
	} {
		// One user a case: sign-ins are limited per account.
		i++
		email := fmt.Sprintf("user%d@acme.example", i)
		token := e.NewUser("acme", email, "viewer")
		e.NewBrowser().Post("/dashboard/setup", url.Values{"token": {token}, "password": {servertest.DashPassword}, "confirm": {servertest.DashPassword}})
		p := e.NewBrowser().Post("/dashboard/login", url.Values{"email": {email}, "password": {servertest.DashPassword}, "next": {next}})
		is.Equal(p.Status, http.StatusSeeOther)
		is.Equal(p.Location, want)
	}
}

func TestDashboardUnknownPageIsAPage(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	p := e.NewBrowser().Get("/dashboard/no-such-page")
	is.Equal(p.Status, http.StatusNotFound)
	is.True(strings.HasPrefix(p.Header.Get("Content-Type"), "text/html"))
	is.True(p.Has("There is no such page in the dashboard."))
	is.True(!p.Has(`<nav id="main-nav" aria-label="Main" popover>`)) // signed out: no navigation, nor anyone's name
	// Signed in, the page keeps the navigation, to go on from there; for a method the
	// address does not take, too.
	b := e.SignIn("acme", "viewer")
	p = b.Get("/dashboard/no-such-page")
	is.Equal(p.Status, http.StatusNotFound)
	is.True(p.Has(`<nav id="main-nav" aria-label="Main" popover>`))
	is.True(p.Has(`href="/dashboard/tasks"`))
	is.True(p.Has("acme · viewer"))
	p = b.Post("/dashboard/credits", url.Values{})
	is.Equal(p.Status, http.StatusMethodNotAllowed)
	is.True(p.Has(`<nav id="main-nav" aria-label="Main" popover>`))
	p = e.NewBrowser().Get("/v1/no-such-endpoint")
	is.Equal(p.Status, http.StatusNotFound)
	is.Equal(p.Header.Get("Content-Type"), "application/json") // the API keeps its JSON errors
}

// TestDashboardSessionOverTLS: a request that came over TLS gets the Secure, __Host-
// cookie even without an https public URL, and the cookie lasts the session's
// absolute length at most.
func TestDashboardSessionOverTLS(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, func(c *server.Config) { c.SessionMax = 2 * time.Hour })
	tlsSrv := httptest.NewTLSServer(e.Srv)
	defer tlsSrv.Close()
	token := e.NewUser("acme", "lead@acme.example", "admin")
	b := e.NewBrowser()
	b.Client.Transport = tlsSrv.Client().Transport
	b.E = &servertest.Env{T: t, HTTP: tlsSrv}
	b.Post("/dashboard/setup", url.Values{"token": {token}, "password": {servertest.DashPassword}, "confirm": {servertest.DashPassword}})
	p := b.Post("/dashboard/login", url.Values{"email": {"lead@acme.example"}, "password": {servertest.DashPassword}})
	is.Equal(p.Status, http.StatusSeeOther)
	set := p.Header.Get("Set-Cookie")
	is.True(strings.HasPrefix(set, "__Host-enrichd_session="))
	is.True(strings.Contains(set, "; Secure"))
	is.True(strings.Contains(set, "; HttpOnly"))
	is.True(strings.Contains(set, "; SameSite=Lax"))
	is.True(strings.Contains(set, "; Path=/"))
	is.True(!strings.Contains(set, "Domain="))
	is.True(strings.Contains(set, "; Max-Age=7200"))
	is.Equal(b.Get("/dashboard/").Status, http.StatusOK)
}

// TestDashboardDisabledUserIsSignedOut: `enrichd users disable` ends the sessions of
// a user signed in at that moment.
func TestDashboardDisabledUserIsSignedOut(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	b := e.SignIn("acme", "admin")
	is.Equal(b.Get("/dashboard/").Status, http.StatusOK)
	_, err := e.DB.DisableUser(t.Context(), b.Email)
	is.NoErr(err)
	p := b.Get("/dashboard/settings/keys")
	is.Equal(p.Status, http.StatusSeeOther)
	is.True(strings.HasPrefix(p.Location, "/dashboard/login"))
	p = b.Post("/dashboard/settings/keys", url.Values{"name": {"after"}})
	is.Equal(p.Status, http.StatusSeeOther)
	is.Equal(len(e.KeysOf("acme")), 1) // nothing created
}

// TestDashboardSigningInAgainEndsTheSessionBefore: signing in over a session, as
// another user or the same, ends the session the browser held; it is not left valid
// on the server with no one meant to hold it.
func TestDashboardSigningInAgainEndsTheSessionBefore(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	b := e.SignIn("acme", "admin")
	before := *b.SessionCookie()
	b.Login(b.Email, servertest.DashPassword)
	is.True(b.SessionCookie().Value != before.Value) // a new session, never the old one reused

	stale := e.NewBrowser()
	req, _ := http.NewRequest(http.MethodGet, e.HTTP.URL+"/dashboard/", nil)
	req.AddCookie(&before)
	res, err := stale.Client.Do(req)
	is.NoErr(err)
	res.Body.Close()
	is.Equal(res.StatusCode, http.StatusSeeOther) // the session before is over
	is.Equal(b.Get("/dashboard/").Status, http.StatusOK)
}

// TestDashboardNoticesAreOnlyTheServers: the one-line notice a page shows after a form
// is what the server said to that user, on that page; a link cannot make the dashboard
// say something else (a phishing line under the site's own name), nor carry a notice
// said to someone else.
func TestDashboardNoticesAreOnlyTheServers(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	admin := e.SignIn("acme", "admin")
	const forged = "Your session is compromised: call 555-0100 now"
	for _, path := range []string{"/dashboard/", "/dashboard/tasks", "/dashboard/settings/keys", "/dashboard/credits", "/dashboard/loops", "/dashboard/try"} {
		p := admin.Get(path + "?notice=" + url.QueryEscape(forged))
		is.Equal(p.Status, http.StatusOK)
		is.True(!p.Has("555-0100"))
		is.True(!p.Has(`class="notice"`))
	}
	p := e.NewBrowser().Get("/dashboard/login?notice=" + url.QueryEscape(forged))
	is.True(!p.Has("555-0100"))

	// The server's own notice shows where it sent the user.
	key := e.KeyByPrefix("acme", e.Key)
	p = admin.Post("/dashboard/settings/keys/"+key.ID+"/revoke", url.Values{})
	is.Equal(p.Status, http.StatusSeeOther)
	said := key.Prefix + "… revoked"
	is.True(admin.Get(p.Location).Has(said))

	// Not to someone else, nor on another page.
	is.True(!e.SignIn("acme", "viewer").Get(p.Location).Has(said))
	is.True(!e.SignIn("other", "admin").Get(p.Location).Has(said))
	moved, _ := url.Parse(p.Location)
	is.True(!admin.Get("/dashboard/?" + moved.RawQuery).Has(said))

	// Signed out, the sign-in page says so.
	p = admin.Post("/dashboard/logout", nil)
	is.True(admin.Get(p.Location).Has("You are signed out."))
}

// TestDashboardErrorPagesCarryTheDashboardsHeaders: the router's own answers under
// /dashboard/ (no such page, a method the page does not take) are dashboard pages,
// with the same policy headers as every other page.
func TestDashboardErrorPagesCarryTheDashboardsHeaders(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	b := e.SignIn("acme", "admin")
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/dashboard/no-such-page", http.StatusNotFound},
		{http.MethodGet, "/dashboard/logout", http.StatusMethodNotAllowed},
		{http.MethodPut, "/dashboard/settings/keys", http.StatusMethodNotAllowed},
	} {
		p := b.Do(tc.method, tc.path, nil)
		is.Equal(p.Status, tc.status)
		is.True(strings.HasPrefix(p.Header.Get("Content-Type"), "text/html"))
		is.True(strings.Contains(p.Header.Get("Content-Security-Policy"), "default-src 'self'"))
		is.Equal(p.Header.Get("X-Frame-Options"), "DENY")
		is.Equal(p.Header.Get("Cache-Control"), "no-store")
		is.Equal(p.Header.Get("X-Content-Type-Options"), "nosniff")
	}
	p := b.Do(http.MethodGet, "/dashboard/logout", nil)
	is.True(p.Has("This address takes POST only"))
	is.True(strings.Contains(p.Header.Get("Allow"), "POST"))
	// The API keeps its JSON.
	r := e.Do(http.MethodPut, "/v1/tasks", nil)
	is.Equal(r.Status, http.StatusMethodNotAllowed)
	is.Equal(r.Header.Get("Content-Type"), "application/json")
}

// TestDashboardFormsThroughAProxy: behind a proxy that passes its own Host on, a
// browser too old to send Sec-Fetch-Site still sends its forms from the public URL's
// origin, which is this site, while any other origin stays refused.
func TestDashboardFormsThroughAProxy(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, func(c *server.Config) { c.PublicURL = "https://enrich.example.com/" })
	token := e.NewUser("acme", "lead@acme.example", "admin")
	b := e.NewBrowser()
	form := url.Values{"token": {token}, "password": {servertest.DashPassword}, "confirm": {servertest.DashPassword}}
	p := b.Do(http.MethodPost, "/dashboard/setup", form, "Origin", "https://evil.example")
	is.Equal(p.Status, http.StatusForbidden)
	p = b.Do(http.MethodPost, "/dashboard/setup", form, "Origin", "https://enrich.example.com")
	is.Equal(p.Status, http.StatusSeeOther) // the Host is the loopback listener's, the origin the public one
}

func TestDashboardErrorsAnsweredToHtmxAreTheMessageAlone(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	loopID, _ := e.CreateLoop("Hooks", "http://127.0.0.1:1/hook", "company")
	b := e.SignIn("acme", "viewer")

	// The layout tells htmx to swap error answers too, so a refusal shows where the
	// answer was awaited.
	is.True(b.Get("/dashboard/").Has(`{"code": "[45]..", "swap": true, "error": true}`))

	p := b.Post("/dashboard/loops/"+loopID+"/test", url.Values{}, "HX-Request", "true", "HX-Target", "test-result")
	is.Equal(p.Status, http.StatusForbidden)
	is.Equal(strings.TrimSpace(p.Body), `<div id="test-result"><p class="error" role="alert">Your role is viewer: you can read everything here but change nothing. An admin of your organization can do this.</p></div>`)

	// Without htmx, the same refusal is a whole page.
	p = b.Post("/dashboard/loops/"+loopID+"/test", url.Values{})
	is.Equal(p.Status, http.StatusForbidden)
	is.True(p.Has("<html") && p.Has("Your role is viewer"))

	// A target is only ever an id, escaped.
	p = b.Post("/dashboard/loops/"+loopID+"/test", url.Values{}, "HX-Request", "true", "HX-Target", `x"><script>`)
	is.True(!p.Has("<script>"))
}

func TestDashboardSessionsOutliveARestart(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	b := e.SignIn("acme", "admin")
	ended := e.SignIn("acme", "viewer")
	is.Equal(ended.Post("/dashboard/logout", nil).Status, http.StatusSeeOther)

	e.Restart() // a new process on the same file: sessions live in the database
	is.Equal(b.Get("/dashboard/").Status, http.StatusOK)
	p := ended.Get("/dashboard/")
	is.Equal(p.Status, http.StatusSeeOther) // and one ended before stays ended
	is.Equal(p.Location, "/dashboard/login")
}

// The sign-in page fills in an address from its link only when it is one: anything
// else is left out rather than shown.
func TestDashboardSignInPrefillsOnlyAnAddress(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	b := e.NewBrowser()
	for email, want := range map[string]string{
		"lead@acme.example":                 `value="lead@acme.example"`,
		"<script>@x":                        `value="&lt;script&gt;@x"`, // escaped, as any value
		"no-at-sign":                        `value=""`,
		"lead@acme.example\nBcc: x@y":       `value=""`, // a control character
		strings.Repeat("a", 250) + "@b.com": `value=""`,
	} {
		p := b.Get("/dashboard/login?email=" + url.QueryEscape(email))
		is.Equal(p.Status, http.StatusOK)
		is.True(p.Has(want))
	}
	p := b.Get("/dashboard/login?email=" + url.QueryEscape("a@b\x00c"))
	is.True(p.Has(`value=""`))
}
