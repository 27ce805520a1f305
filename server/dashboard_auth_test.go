package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"enrichd/server"

	"github.com/matryer/is"
)

func TestDashboardSignInFromTheLink(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	token := e.newUser("acme", "lead@acme.example", "admin")
	b := e.newBrowser()

	p := b.get("/dashboard/")
	is.Equal(p.status, http.StatusSeeOther) // signed out, the dashboard sends to sign-in
	is.Equal(p.location, "/dashboard/login")

	p = b.get("/dashboard/setup?token=" + url.QueryEscape(token))
	is.Equal(p.status, http.StatusOK)
	is.True(p.has("lead@acme.example"))
	is.True(p.has(`name="password"`))
	is.Equal(p.header.Get("Referrer-Policy"), "no-referrer") // the token never leaves in a Referer

	p = b.post("/dashboard/setup", url.Values{"token": {token}, "password": {"too short"}, "confirm": {"too short"}})
	is.Equal(p.status, http.StatusBadRequest)
	is.True(p.has("at least 12 characters"))
	p = b.post("/dashboard/setup", url.Values{"token": {token}, "password": {dashPassword}, "confirm": {dashPassword + "!"}})
	is.Equal(p.status, http.StatusBadRequest)
	is.True(p.has("differ"))

	p = b.post("/dashboard/setup", url.Values{"token": {token}, "password": {dashPassword}, "confirm": {dashPassword}})
	is.Equal(p.status, http.StatusSeeOther)
	is.True(strings.HasPrefix(p.location, "/dashboard/login?"))
	// The sign-in form it leads to carries the address, and asks for the password first.
	signIn := b.get(p.location)
	is.Equal(signIn.status, http.StatusOK)
	is.True(signIn.has(`name="email" value="lead@acme.example" autocomplete="username" required maxlength="254">`))
	is.True(signIn.has(`name="password" autocomplete="current-password" required maxlength="256" autofocus>`))
	is.True(signIn.has("Your password is set."))

	// The link is used up.
	p = b.get("/dashboard/setup?token=" + url.QueryEscape(token))
	is.Equal(p.status, http.StatusNotFound)
	is.True(p.has("not valid"))
	p = b.post("/dashboard/setup", url.Values{"token": {token}, "password": {"another long password"}, "confirm": {"another long password"}})
	is.Equal(p.status, http.StatusNotFound)

	p = b.get("/dashboard/login")
	is.Equal(p.status, http.StatusOK)
	is.True(p.has(`name="email"`) && p.has(`name="password"`))
	b.login("lead@acme.example", dashPassword)
	p = b.get("/dashboard/")
	is.Equal(p.status, http.StatusOK)
	is.True(p.has("Overview"))
	is.True(p.has(`id="balance">100<`)) // acme's 100 credits
	is.True(p.has("<svg"))              // the chart is drawn on the server
}

func TestDashboardWrongSignInSaysNothingOfWhichPart(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.signIn("acme", "admin") // admin@acme.example exists with dashPassword
	disabled := e.signIn("acme", "viewer")
	if _, err := e.db.DisableUser(t.Context(), disabled.email); err != nil {
		t.Fatal(err)
	}
	unset := "unset@acme.example"
	e.newUser("acme", unset, "viewer")

	var bodies []string
	for _, tc := range []struct{ email, password string }{
		{"admin@acme.example", "wrong password here"},
		{"nobody@acme.example", dashPassword},
		{disabled.email, dashPassword},
		{unset, dashPassword},
		{"ADMIN@acme.example", "wrong password here"},
	} {
		p := e.newBrowser().post("/dashboard/login", url.Values{"email": {tc.email}, "password": {tc.password}})
		is.Equal(p.status, http.StatusUnauthorized)
		is.True(p.has("The email or the password is wrong."))
		bodies = append(bodies, p.body)
	}
	for _, b := range bodies[1:] {
		is.Equal(b, strings.ReplaceAll(bodies[0], "admin@acme.example", emailIn(b))) // the same page but for the email echoed back
	}
	// Case does not matter in the email.
	e.newBrowser().login("Admin@ACME.example", dashPassword)
}

// emailIn is the email a sign-in page echoes back in its form.
func emailIn(body string) string {
	_, after, _ := strings.Cut(body, `name="email" value="`)
	v, _, _ := strings.Cut(after, `"`)
	return v
}

func TestDashboardCookieFlags(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	token := e.newUser("acme", "lead@acme.example", "admin")
	b := e.newBrowser()
	b.post("/dashboard/setup", url.Values{"token": {token}, "password": {dashPassword}, "confirm": {dashPassword}})
	p := b.post("/dashboard/login", url.Values{"email": {"lead@acme.example"}, "password": {dashPassword}})
	is.Equal(p.status, http.StatusSeeOther)
	set := p.header.Get("Set-Cookie")
	is.True(strings.HasPrefix(set, "enrichd_session="))
	is.True(strings.Contains(set, "HttpOnly"))
	is.True(strings.Contains(set, "SameSite=Lax"))
	is.True(strings.Contains(set, "Path=/"))
	is.True(!strings.Contains(set, "Secure")) // plain http on loopback: a Secure cookie would never come back

	https := newEnv(t, func(c *server.Config) { c.PublicURL = "https://enrich.example.com" })
	token = https.newUser("acme", "lead@acme.example", "admin")
	b = https.newBrowser()
	b.post("/dashboard/setup", url.Values{"token": {token}, "password": {dashPassword}, "confirm": {dashPassword}})
	p = b.post("/dashboard/login", url.Values{"email": {"lead@acme.example"}, "password": {dashPassword}})
	is.Equal(p.status, http.StatusSeeOther)
	set = p.header.Get("Set-Cookie")
	is.True(strings.HasPrefix(set, "__Host-enrichd_session="))
	is.True(strings.Contains(set, "Secure"))
	is.True(strings.Contains(set, "HttpOnly"))
	is.True(strings.Contains(set, "SameSite=Lax"))
}

func TestDashboardSessionsExpire(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, func(c *server.Config) { c.SessionIdle, c.SessionMax = time.Hour, 3*time.Hour })
	b := e.signIn("acme", "viewer")
	is.Equal(b.get("/dashboard/").status, http.StatusOK)

	// Used every 50 minutes, the session lives on until its absolute end.
	for range 3 {
		e.clock.Add(50 * time.Minute)
		is.Equal(b.get("/dashboard/").status, http.StatusOK)
	}
	e.clock.Add(40 * time.Minute) // 3 h 10 min after sign-in
	p := b.get("/dashboard/")
	is.Equal(p.status, http.StatusSeeOther)
	is.Equal(p.location, "/dashboard/login")

	b = e.newBrowser()
	b.login("viewer@acme.example", dashPassword)
	e.clock.Add(61 * time.Minute) // idle past an hour
	p = b.get("/dashboard/?notice=hello")
	is.Equal(p.status, http.StatusSeeOther)
	is.Equal(p.location, "/dashboard/login?next=%2Fdashboard%2F%3Fnotice%3Dhello") // and back there after signing in
}

func TestDashboardLogoutEndsTheSessionOnTheServer(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	b := e.signIn("acme", "admin")
	stolen := *b.sessionCookie()
	p := b.post("/dashboard/logout", nil)
	is.Equal(p.status, http.StatusSeeOther)
	is.True(strings.HasPrefix(p.location, "/dashboard/login"))
	is.Equal(b.sessionCookie(), nil) // the browser dropped it

	// A copy of the cookie kept from before is worth nothing now.
	thief := e.newBrowser()
	req, _ := http.NewRequest(http.MethodGet, e.http.URL+"/dashboard/", nil)
	req.AddCookie(&stolen)
	res, err := thief.client.Do(req)
	is.NoErr(err)
	res.Body.Close()
	is.Equal(res.StatusCode, http.StatusSeeOther)
	is.Equal(res.Header.Get("Location"), "/dashboard/login")
}

func TestDashboardLoginIsRateLimited(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.signIn("acme", "admin")

	// Per account: five tries (signing in above was the first), whatever the address.
	for i := range 4 {
		p := e.newBrowser().post("/dashboard/login", url.Values{"email": {"admin@acme.example"}, "password": {"guess number " + string(rune('a'+i))}})
		is.Equal(p.status, http.StatusUnauthorized)
	}
	p := e.newBrowser().post("/dashboard/login", url.Values{"email": {"admin@acme.example"}, "password": {dashPassword}})
	is.Equal(p.status, http.StatusTooManyRequests) // even the right password waits
	is.True(p.header.Get("Retry-After") != "")
	is.True(p.has("Too many sign-in attempts"))

	// Per address: the same client walking through accounts gets its ten tries, then
	// waits. A slow machine may earn a try back every 6 s meanwhile, so the test counts
	// the tries before the first refusal rather than expecting it at the eleventh.
	e2 := newEnv(t)
	allowed := 0
	var last *webPage
	for i := range 40 {
		last = e2.newBrowser().post("/dashboard/login", url.Values{"email": {fmt.Sprintf("someone%d@acme.example", i)}, "password": {"guess guess guess"}})
		if last.status == http.StatusTooManyRequests {
			break
		}
		is.Equal(last.status, http.StatusUnauthorized)
		allowed++
	}
	is.Equal(last.status, http.StatusTooManyRequests)
	is.True(allowed >= 10)
}

func TestDashboardRefusesCrossSiteWrites(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	b := e.signIn("acme", "admin")
	p := b.do(http.MethodPost, "/dashboard/logout", url.Values{}, "Sec-Fetch-Site", "cross-site")
	is.Equal(p.status, http.StatusForbidden)
	is.True(p.has("another site"))
	p = b.do(http.MethodPost, "/dashboard/logout", url.Values{}, "Origin", "https://evil.example")
	is.Equal(p.status, http.StatusForbidden)
	is.Equal(b.get("/dashboard/").status, http.StatusOK) // still signed in

	// Signing in from another site's form is refused too.
	p = e.newBrowser().do(http.MethodPost, "/dashboard/login", url.Values{"email": {"admin@acme.example"}, "password": {dashPassword}},
		"Sec-Fetch-Site", "cross-site")
	is.Equal(p.status, http.StatusForbidden)
}

func TestDashboardAndAPICredentialsDoNotMix(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	b := e.signIn("acme", "admin")

	// An API key does not open the dashboard.
	p := e.newBrowser().get("/dashboard/", "Authorization", "Bearer "+e.key)
	is.Equal(p.status, http.StatusSeeOther)
	is.Equal(p.location, "/dashboard/login")

	// A session cookie does not authenticate the API.
	p = b.get("/v1/tasks")
	is.Equal(p.status, http.StatusUnauthorized)
	is.Equal(strings.TrimSpace(p.body), "Unauthorized")
}

func TestDashboardStaticFilesAreEmbedded(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	b := e.newBrowser()
	for _, f := range []string{"htmx.min.js", "style.css", "dashboard.js"} {
		p := b.get("/dashboard/static/" + f)
		is.Equal(p.status, http.StatusOK)
		is.True(len(p.body) > 100)
	}
	is.True(strings.Contains(b.get("/dashboard/static/htmx.min.js").body, `version:"2.0.11"`))
	is.True(strings.Contains(b.get("/dashboard/static/style.css").body, "prefers-color-scheme: dark"))
	is.Equal(b.get("/dashboard/static/nothing.js").status, http.StatusNotFound)
}

func TestDashboardSignInReturnsToThePageAskedForOnThisSiteOnly(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
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
		token := e.newUser("acme", email, "viewer")
		e.newBrowser().post("/dashboard/setup", url.Values{"token": {token}, "password": {dashPassword}, "confirm": {dashPassword}})
		p := e.newBrowser().post("/dashboard/login", url.Values{"email": {email}, "password": {dashPassword}, "next": {next}})
		is.Equal(p.status, http.StatusSeeOther)
		is.Equal(p.location, want)
	}
}

func TestDashboardUnknownPageIsAPage(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p := e.newBrowser().get("/dashboard/no-such-page")
	is.Equal(p.status, http.StatusNotFound)
	is.True(strings.HasPrefix(p.header.Get("Content-Type"), "text/html"))
	is.True(p.has("There is no such page in the dashboard."))
	is.True(!p.has(`<nav id="main-nav" aria-label="Main" popover>`)) // signed out: no navigation, nor anyone's name
	// Signed in, the page keeps the navigation, to go on from there; for a method the
	// address does not take, too.
	b := e.signIn("acme", "viewer")
	p = b.get("/dashboard/no-such-page")
	is.Equal(p.status, http.StatusNotFound)
	is.True(p.has(`<nav id="main-nav" aria-label="Main" popover>`))
	is.True(p.has(`href="/dashboard/tasks"`))
	is.True(p.has("acme · viewer"))
	p = b.post("/dashboard/credits", url.Values{})
	is.Equal(p.status, http.StatusMethodNotAllowed)
	is.True(p.has(`<nav id="main-nav" aria-label="Main" popover>`))
	p = e.newBrowser().get("/v1/no-such-endpoint")
	is.Equal(p.status, http.StatusNotFound)
	is.Equal(p.header.Get("Content-Type"), "application/json") // the API keeps its JSON errors
}

// TestDashboardSessionOverTLS: a request that came over TLS gets the Secure, __Host-
// cookie even without an https public URL, and the cookie lasts the session's
// absolute length at most.
func TestDashboardSessionOverTLS(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, func(c *server.Config) { c.SessionMax = 2 * time.Hour })
	tlsSrv := httptest.NewTLSServer(e.srv)
	defer tlsSrv.Close()
	token := e.newUser("acme", "lead@acme.example", "admin")
	b := e.newBrowser()
	b.client.Transport = tlsSrv.Client().Transport
	b.e = &env{t: t, http: tlsSrv}
	b.post("/dashboard/setup", url.Values{"token": {token}, "password": {dashPassword}, "confirm": {dashPassword}})
	p := b.post("/dashboard/login", url.Values{"email": {"lead@acme.example"}, "password": {dashPassword}})
	is.Equal(p.status, http.StatusSeeOther)
	set := p.header.Get("Set-Cookie")
	is.True(strings.HasPrefix(set, "__Host-enrichd_session="))
	is.True(strings.Contains(set, "; Secure"))
	is.True(strings.Contains(set, "; HttpOnly"))
	is.True(strings.Contains(set, "; SameSite=Lax"))
	is.True(strings.Contains(set, "; Path=/"))
	is.True(!strings.Contains(set, "Domain="))
	is.True(strings.Contains(set, "; Max-Age=7200"))
	is.Equal(b.get("/dashboard/").status, http.StatusOK)
}

// TestDashboardDisabledUserIsSignedOut: `enrichd users disable` ends the sessions of
// a user signed in at that moment.
func TestDashboardDisabledUserIsSignedOut(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	b := e.signIn("acme", "admin")
	is.Equal(b.get("/dashboard/").status, http.StatusOK)
	_, err := e.db.DisableUser(t.Context(), b.email)
	is.NoErr(err)
	p := b.get("/dashboard/settings/keys")
	is.Equal(p.status, http.StatusSeeOther)
	is.True(strings.HasPrefix(p.location, "/dashboard/login"))
	p = b.post("/dashboard/settings/keys", url.Values{"name": {"after"}})
	is.Equal(p.status, http.StatusSeeOther)
	is.Equal(len(e.keysOf("acme")), 1) // nothing created
}

// TestDashboardSigningInAgainEndsTheSessionBefore: signing in over a session, as
// another user or the same, ends the session the browser held; it is not left valid
// on the server with no one meant to hold it.
func TestDashboardSigningInAgainEndsTheSessionBefore(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	b := e.signIn("acme", "admin")
	before := *b.sessionCookie()
	b.login(b.email, dashPassword)
	is.True(b.sessionCookie().Value != before.Value) // a new session, never the old one reused

	stale := e.newBrowser()
	req, _ := http.NewRequest(http.MethodGet, e.http.URL+"/dashboard/", nil)
	req.AddCookie(&before)
	res, err := stale.client.Do(req)
	is.NoErr(err)
	res.Body.Close()
	is.Equal(res.StatusCode, http.StatusSeeOther) // the session before is over
	is.Equal(b.get("/dashboard/").status, http.StatusOK)
}

// TestDashboardNoticesAreOnlyTheServers: the one-line notice a page shows after a form
// is what the server said to that user, on that page; a link cannot make the dashboard
// say something else (a phishing line under the site's own name), nor carry a notice
// said to someone else.
func TestDashboardNoticesAreOnlyTheServers(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	admin := e.signIn("acme", "admin")
	const forged = "Your session is compromised: call 555-0100 now"
	for _, path := range []string{"/dashboard/", "/dashboard/tasks", "/dashboard/settings/keys", "/dashboard/credits", "/dashboard/loops", "/dashboard/try"} {
		p := admin.get(path + "?notice=" + url.QueryEscape(forged))
		is.Equal(p.status, http.StatusOK)
		is.True(!p.has("555-0100"))
		is.True(!p.has(`class="notice"`))
	}
	p := e.newBrowser().get("/dashboard/login?notice=" + url.QueryEscape(forged))
	is.True(!p.has("555-0100"))

	// The server's own notice shows where it sent the user.
	key := e.keyByPrefix("acme", e.key)
	p = admin.post("/dashboard/settings/keys/"+key.ID+"/revoke", url.Values{})
	is.Equal(p.status, http.StatusSeeOther)
	said := key.Prefix + "… revoked"
	is.True(admin.get(p.location).has(said))

	// Not to someone else, nor on another page.
	is.True(!e.signIn("acme", "viewer").get(p.location).has(said))
	is.True(!e.signIn("other", "admin").get(p.location).has(said))
	moved, _ := url.Parse(p.location)
	is.True(!admin.get("/dashboard/?" + moved.RawQuery).has(said))

	// Signed out, the sign-in page says so.
	p = admin.post("/dashboard/logout", nil)
	is.True(admin.get(p.location).has("You are signed out."))
}

// TestDashboardErrorPagesCarryTheDashboardsHeaders: the router's own answers under
// /dashboard/ (no such page, a method the page does not take) are dashboard pages,
// with the same policy headers as every other page.
func TestDashboardErrorPagesCarryTheDashboardsHeaders(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	b := e.signIn("acme", "admin")
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/dashboard/no-such-page", http.StatusNotFound},
		{http.MethodGet, "/dashboard/logout", http.StatusMethodNotAllowed},
		{http.MethodPut, "/dashboard/settings/keys", http.StatusMethodNotAllowed},
	} {
		p := b.do(tc.method, tc.path, nil)
		is.Equal(p.status, tc.status)
		is.True(strings.HasPrefix(p.header.Get("Content-Type"), "text/html"))
		is.True(strings.Contains(p.header.Get("Content-Security-Policy"), "default-src 'self'"))
		is.Equal(p.header.Get("X-Frame-Options"), "DENY")
		is.Equal(p.header.Get("Cache-Control"), "no-store")
		is.Equal(p.header.Get("X-Content-Type-Options"), "nosniff")
	}
	p := b.do(http.MethodGet, "/dashboard/logout", nil)
	is.True(p.has("This address takes POST only"))
	is.True(strings.Contains(p.header.Get("Allow"), "POST"))
	// The API keeps its JSON.
	r := e.do(http.MethodPut, "/v1/tasks", nil)
	is.Equal(r.status, http.StatusMethodNotAllowed)
	is.Equal(r.header.Get("Content-Type"), "application/json")
}

// TestDashboardFormsThroughAProxy: behind a proxy that passes its own Host on, a
// browser too old to send Sec-Fetch-Site still sends its forms from the public URL's
// origin, which is this site, while any other origin stays refused.
func TestDashboardFormsThroughAProxy(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, func(c *server.Config) { c.PublicURL = "https://enrich.example.com/" })
	token := e.newUser("acme", "lead@acme.example", "admin")
	b := e.newBrowser()
	form := url.Values{"token": {token}, "password": {dashPassword}, "confirm": {dashPassword}}
	p := b.do(http.MethodPost, "/dashboard/setup", form, "Origin", "https://evil.example")
	is.Equal(p.status, http.StatusForbidden)
	p = b.do(http.MethodPost, "/dashboard/setup", form, "Origin", "https://enrich.example.com")
	is.Equal(p.status, http.StatusSeeOther) // the Host is the loopback listener's, the origin the public one
}

func TestDashboardErrorsAnsweredToHtmxAreTheMessageAlone(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	loopID, _ := e.createLoop("Hooks", "http://127.0.0.1:1/hook", "company")
	b := e.signIn("acme", "viewer")

	// The layout tells htmx to swap error answers too, so a refusal shows where the
	// answer was awaited.
	is.True(b.get("/dashboard/").has(`{"code": "[45]..", "swap": true, "error": true}`))

	p := b.post("/dashboard/loops/"+loopID+"/test", url.Values{}, "HX-Request", "true", "HX-Target", "test-result")
	is.Equal(p.status, http.StatusForbidden)
	is.Equal(strings.TrimSpace(p.body), `<div id="test-result"><p class="error" role="alert">Your role is viewer: you can read everything here but change nothing. An admin of your organization can do this.</p></div>`)

	// Without htmx, the same refusal is a whole page.
	p = b.post("/dashboard/loops/"+loopID+"/test", url.Values{})
	is.Equal(p.status, http.StatusForbidden)
	is.True(p.has("<html") && p.has("Your role is viewer"))

	// A target is only ever an id, escaped.
	p = b.post("/dashboard/loops/"+loopID+"/test", url.Values{}, "HX-Request", "true", "HX-Target", `x"><script>`)
	is.True(!p.has("<script>"))
}

func TestDashboardSessionsOutliveARestart(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	b := e.signIn("acme", "admin")
	ended := e.signIn("acme", "viewer")
	is.Equal(ended.post("/dashboard/logout", nil).status, http.StatusSeeOther)

	e.restart() // a new process on the same file: sessions live in the database
	is.Equal(b.get("/dashboard/").status, http.StatusOK)
	p := ended.get("/dashboard/")
	is.Equal(p.status, http.StatusSeeOther) // and one ended before stays ended
	is.Equal(p.location, "/dashboard/login")
}

// The sign-in page fills in an address from its link only when it is one: anything
// else is left out rather than shown.
func TestDashboardSignInPrefillsOnlyAnAddress(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	b := e.newBrowser()
	for email, want := range map[string]string{
		"lead@acme.example":                 `value="lead@acme.example"`,
		"<script>@x":                        `value="&lt;script&gt;@x"`, // escaped, as any value
		"no-at-sign":                        `value=""`,
		"lead@acme.example\nBcc: x@y":       `value=""`, // a control character
		strings.Repeat("a", 250) + "@b.com": `value=""`,
	} {
		p := b.get("/dashboard/login?email=" + url.QueryEscape(email))
		is.Equal(p.status, http.StatusOK)
		is.True(p.has(want))
	}
	p := b.get("/dashboard/login?email=" + url.QueryEscape("a@b\x00c"))
	is.True(p.has(`value=""`))
}
