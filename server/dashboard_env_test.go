package server_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"enrichd/store"
)

// browser is a person at the dashboard: a cookie jar against the env's server, sending
// forms the way a browser does from the dashboard's own pages. Redirects are not
// followed, so tests see them.
type browser struct {
	t      testing.TB
	e      *env
	client *http.Client
	email  string
}

// webPage is one answer to a browser.
type webPage struct {
	status   int
	body     string
	header   http.Header
	location string
}

// has says whether the page's HTML holds s.
func (p *webPage) has(s string) bool { return strings.Contains(p.body, s) }

// dashPassword is the password every test user sets.
const dashPassword = "correct horse battery staple"

func (e *env) newBrowser() *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return &browser{t: e.t, e: e, client: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// newUser creates a user of the organization and returns its set-password token, as
// `enrichd users create` does.
func (e *env) newUser(org, email, role string) string {
	e.t.Helper()
	_, token, err := e.db.CreateUser(context.Background(), store.BySystem, org, email, role)
	if err != nil {
		e.t.Fatalf("creating user %s: %v", email, err)
	}
	return token
}

// signIn creates a user of org with role, sets its password from the link and signs in.
func (e *env) signIn(org, role string) *browser {
	e.t.Helper()
	email := role + "@" + org + ".example"
	if _, err := e.db.FindOrg(context.Background(), org); err != nil {
		e.newOrg(org, 100)
	}
	token := e.newUser(org, email, role)
	b := e.newBrowser()
	p := b.post("/dashboard/setup", url.Values{"token": {token}, "password": {dashPassword}, "confirm": {dashPassword}})
	if p.status != http.StatusSeeOther {
		e.t.Fatalf("setting the password of %s: %d %s", email, p.status, p.body)
	}
	b.login(email, dashPassword)
	return b
}

// login signs in and fails the test unless it worked.
func (b *browser) login(email, password string) {
	b.t.Helper()
	p := b.post("/dashboard/login", url.Values{"email": {email}, "password": {password}})
	if p.status != http.StatusSeeOther || p.location != "/dashboard/" {
		b.t.Fatalf("signing in as %s: %d to %q: %s", email, p.status, p.location, p.body)
	}
	b.email = email
}

func (b *browser) get(path string, headers ...string) *webPage {
	b.t.Helper()
	return b.do(http.MethodGet, path, nil, headers...)
}

// post sends a form as the dashboard's own pages do: same-origin.
func (b *browser) post(path string, form url.Values, headers ...string) *webPage {
	b.t.Helper()
	return b.do(http.MethodPost, path, form, append([]string{"Sec-Fetch-Site", "same-origin"}, headers...)...)
}

func (b *browser) do(method, path string, form url.Values, headers ...string) *webPage {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.e.http.URL+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := b.client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return &webPage{status: res.StatusCode, body: string(raw), header: res.Header, location: res.Header.Get("Location")}
}

// sessionCookie is the browser's session cookie for the server, nil when it has none.
func (b *browser) sessionCookie() *http.Cookie {
	u, _ := url.Parse(b.e.http.URL)
	for _, c := range b.client.Jar.Cookies(u) {
		if strings.HasSuffix(c.Name, "enrichd_session") {
			return c
		}
	}
	return nil
}

// A signing secret is standard base64 (older ones URL-safe): its "+" is escaped in
// the page's HTML, which shownSecret reads as the browser shows it.
var secretPattern = regexp.MustCompile(`(enr_[A-Za-z0-9_-]+|whsec_[A-Za-z0-9_+/=-]+)`)

// shownSecret is the first API key or signing secret a page shows.
func (p *webPage) shownSecret() string { return secretPattern.FindString(html.UnescapeString(p.body)) }
