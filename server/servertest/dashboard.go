package servertest

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"
)

// Browser is a person at the dashboard: a cookie jar against the env's server, sending
// forms the way a browser does from the dashboard's own pages. Redirects are not
// followed, so tests see them.
type Browser struct {
	T      testing.TB
	E      *Env
	Client *http.Client
	Email  string
}

// WebPage is one answer to a browser.
type WebPage struct {
	Status   int
	Body     string
	Header   http.Header
	Location string
}

// Has says whether the page's HTML holds s.
func (p *WebPage) Has(s string) bool { return strings.Contains(p.Body, s) }

// DashPassword is the password every test user sets.
const DashPassword = "correct horse battery staple"

func (e *Env) NewBrowser() *Browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		e.T.Fatal(err)
	}
	return &Browser{T: e.T, E: e, Client: &http.Client{Transport: Transport, Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// NewUser creates a user of the organization and returns its set-password token, as
// `enrichd users create` does.
func (e *Env) NewUser(org, email, role string) string {
	e.T.Helper()
	_, token, err := e.DB.CreateUser(context.Background(), store.BySystem, org, email, role)
	if err != nil {
		e.T.Fatalf("creating user %s: %v", email, err)
	}
	return token
}

// SignIn creates a user of org with role, sets its password from the link and signs in.
func (e *Env) SignIn(org, role string) *Browser {
	e.T.Helper()
	email := role + "@" + org + ".example"
	if _, err := e.DB.FindOrg(context.Background(), org); err != nil {
		e.NewOrg(org, 100)
	}
	token := e.NewUser(org, email, role)
	b := e.NewBrowser()
	p := b.Post("/dashboard/setup", url.Values{"token": {token}, "password": {DashPassword}, "confirm": {DashPassword}})
	if p.Status != http.StatusSeeOther {
		e.T.Fatalf("setting the password of %s: %d %s", email, p.Status, p.Body)
	}
	b.Login(email, DashPassword)
	return b
}

// Login signs in and fails the test unless it worked.
func (b *Browser) Login(email, password string) {
	b.T.Helper()
	p := b.Post("/dashboard/login", url.Values{"email": {email}, "password": {password}})
	if p.Status != http.StatusSeeOther || p.Location != "/dashboard/" {
		b.T.Fatalf("signing in as %s: %d to %q: %s", email, p.Status, p.Location, p.Body)
	}
	b.Email = email
}

func (b *Browser) Get(path string, headers ...string) *WebPage {
	b.T.Helper()
	return b.Do(http.MethodGet, path, nil, headers...)
}

// Post sends a form as the dashboard's own pages do: same-origin.
func (b *Browser) Post(path string, form url.Values, headers ...string) *WebPage {
	b.T.Helper()
	return b.Do(http.MethodPost, path, form, append([]string{"Sec-Fetch-Site", "same-origin"}, headers...)...)
}

func (b *Browser) Do(method, path string, form url.Values, headers ...string) *WebPage {
	b.T.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.E.HTTP.URL+path, body)
	if err != nil {
		b.T.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := b.Client.Do(req)
	if err != nil {
		b.T.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		b.T.Fatal(err)
	}
	return &WebPage{Status: res.StatusCode, Body: string(raw), Header: res.Header, Location: res.Header.Get("Location")}
}

// SessionCookie is the browser's session cookie for the server, nil when it has none.
func (b *Browser) SessionCookie() *http.Cookie {
	u, _ := url.Parse(b.E.HTTP.URL)
	for _, c := range b.Client.Jar.Cookies(u) {
		if strings.HasSuffix(c.Name, "enrichd_session") {
			return c
		}
	}
	return nil
}

// A signing secret is standard base64 (older ones URL-safe): its "+" is escaped in
// the page's HTML, which ShownSecret reads as the browser shows it.
var secretPattern = regexp.MustCompile(`(enr_[A-Za-z0-9_-]+|whsec_[A-Za-z0-9_+/=-]+)`)

// ShownSecret is the first API key or signing secret a page shows.
func (p *WebPage) ShownSecret() string { return secretPattern.FindString(html.UnescapeString(p.Body)) }

// Upload sends a file through the Upload page's form, as a browser does, enrich
// chosen in its select.
func (b *Browser) Upload(name, content, enrich string) *WebPage {
	b.T.Helper()
	return b.UploadForm(name, content, "enrich", enrich)
}

// UploadForm sends a file through the Upload page's form with its other fields as
// name, value pairs (a checkbox left out is unchecked).
func (b *Browser) UploadForm(name, content string, fields ...string) *WebPage {
	b.T.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", name)
	io.WriteString(fw, content)
	for i := 0; i+1 < len(fields); i += 2 {
		mw.WriteField(fields[i], fields[i+1])
	}
	mw.Close()
	req, _ := http.NewRequest(http.MethodPost, b.E.HTTP.URL+"/dashboard/batches/preview", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err := b.Client.Do(req)
	if err != nil {
		b.T.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return &WebPage{Status: res.StatusCode, Body: string(raw), Header: res.Header, Location: res.Header.Get("Location")}
}

// LedgerOf is an organization's whole ledger, oldest first, straight from the store.
func (e *Env) LedgerOf(org string) []store.LedgerEntry {
	e.T.Helper()
	entries, err := e.DB.CreditLedger(context.Background(), org)
	if err != nil {
		e.T.Fatal(err)
	}
	return entries
}

// EveryKind gives acme one ledger row of each kind beside its first grant: a charge
// and its refund (a task submitted through the API, then canceled) and a grant that
// expires. It returns the task's id.
func (e *Env) EveryKind() string {
	e.T.Helper()
	r := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"})
	if r.Status != http.StatusAccepted {
		e.T.Fatalf("enrich: %d %s", r.Status, r.Raw)
	}
	taskID := r.Str("task.id")
	if r := e.Do("POST", "/v1/tasks/"+taskID+"/cancel", nil); r.Status != http.StatusOK {
		e.T.Fatalf("cancel: %d %s", r.Status, r.Raw)
	}
	expires := e.Clock.Now().Add(time.Hour)
	if _, err := e.DB.GrantCredits(context.Background(), "acme", 5, &expires); err != nil {
		e.T.Fatal(err)
	}
	e.Clock.Add(2 * time.Hour) // the next balance writes off the 5
	return taskID
}

// KeysOf lists an organization's keys straight from the store.
func (e *Env) KeysOf(org string) []store.APIKey {
	e.T.Helper()
	keys, err := e.DB.ListKeys(context.Background(), org)
	if err != nil {
		e.T.Fatal(err)
	}
	return keys
}

// KeyByPrefix is the organization's key whose plaintext starts as plain does.
func (e *Env) KeyByPrefix(org, plain string) store.APIKey {
	e.T.Helper()
	for _, k := range e.KeysOf(org) {
		if strings.HasPrefix(plain, k.Prefix) {
			return k
		}
	}
	e.T.Fatalf("%s has no key %.12s…", org, plain)
	return store.APIKey{}
}

// APIStatus is the status /v1 answers a request authenticated with key.
func (e *Env) APIStatus(key string) int {
	e.T.Helper()
	return e.Do("GET", "/v1/status", nil, "Authorization", "Bearer "+key).Status
}

// Inner is the text of the element with the given id, up to its first tag: "" when the
// page has no such element.
func (p *WebPage) Inner(id string) string {
	m := regexp.MustCompile(`id="` + regexp.QuoteMeta(id) + `"[^>]*>([^<]*)<`).FindStringSubmatch(p.Body)
	if m == nil {
		return ""
	}
	return strings.TrimSpace(m[1])
}

// LoopSecret is the signing secret a page shows in code#loop-secret.
func (p *WebPage) LoopSecret() string { return html.UnescapeString(p.Inner("loop-secret")) }

// DeliveryRows counts the deliveries a Loop's page lists.
func (p *WebPage) DeliveryRows() int { return strings.Count(p.Body, `<tr class="delivery">`) }

// LoopsOf lists an organization's Loops through the API, as JSON.
func (e *Env) LoopsOf(key string) []any {
	e.T.Helper()
	r := e.Do("GET", "/v1/loops", nil, "Authorization", "Bearer "+key)
	if r.Status != http.StatusOK {
		e.T.Fatalf("list loops: %d %s", r.Status, r.Raw)
	}
	return r.Get("data").([]any)
}

// OnlyLoopID is the id of the one Loop acme has.
func (e *Env) OnlyLoopID() string {
	e.T.Helper()
	loops := e.LoopsOf(e.Key)
	if len(loops) != 1 {
		e.T.Fatalf("acme has %d Loops, not 1", len(loops))
	}
	return loops[0].(map[string]any)["id"].(string)
}

// SendTestDelivery queues a test event through the API and returns the delivery's id.
func (e *Env) SendTestDelivery(loopID string) string {
	e.T.Helper()
	r := e.Do("POST", "/v1/loops/"+loopID+"/test", nil)
	if r.Status != http.StatusAccepted {
		e.T.Fatalf("test event: %d %s", r.Status, r.Raw)
	}
	return r.Str("delivery.id")
}

// LoopState is everything an action on a Loop could change, as the API shows it.
func (e *Env) LoopState(loopID string) string {
	e.T.Helper()
	return fmt.Sprintf("%s\n%s\n%s\n%v", e.Do("GET", "/v1/loops", nil).Raw, e.Do("GET", "/v1/loops/"+loopID+"/deliveries", nil).Raw,
		e.Do("GET", "/v1/tasks", nil).Raw, e.Balance("acme"))
}

// OtherState is what an action on another organization's key, Loop, delivery, task or watch
// could change, as the API shows it to that organization.
func (e *Env) OtherState(key, loopID, taskID string) string {
	e.T.Helper()
	auth := []string{"Authorization", "Bearer " + key}
	var b strings.Builder
	for _, path := range []string{"/v1/loops/" + loopID, "/v1/loops/" + loopID + "/deliveries", "/v1/tasks/" + taskID, "/v1/status", "/v1/watches", "/v1/suppressions"} {
		r := e.Do("GET", path, nil, auth...)
		b.WriteString(path + " " + http.StatusText(r.Status) + " " + string(r.Raw) + "\n")
	}
	return b.String()
}

// OwnFill is the organization's own fill lists, straight from the store.
func (e *Env) OwnFill(orgID string) enrich.FillLists {
	e.T.Helper()
	own, err := e.DB.OrgFillLists(context.Background(), orgID)
	if err != nil {
		e.T.Fatal(err)
	}
	return own
}

// UploadSuppressions sends a CSV through the Suppressions page's list form, as a
// browser does.
func (b *Browser) UploadSuppressions(name, content string) *WebPage {
	b.T.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", name)
	io.WriteString(fw, content)
	mw.Close()
	req, _ := http.NewRequest(http.MethodPost, b.E.HTTP.URL+"/dashboard/suppressions", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err := b.Client.Do(req)
	if err != nil {
		b.T.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return &WebPage{Status: res.StatusCode, Body: string(raw), Header: res.Header, Location: res.Header.Get("Location")}
}

// TaskRows are the targets of the task list's rows, in order.
func (p *WebPage) TaskRows() []string {
	var out []string
	for _, m := range taskRowPattern.FindAllStringSubmatch(p.Body, -1) {
		out = append(out, html.UnescapeString(m[1]))
	}
	return out
}

var taskRowPattern = regexp.MustCompile(`(?s)<tr class="task">.*?<a href="/dashboard/tasks/[0-9a-f-]+">([^<]*)</a>`)

// Link is the href of the page's link marked rel, "" when there is none.
func (p *WebPage) Link(rel string) string {
	m := regexp.MustCompile(`href="([^"]*)" rel="` + rel + `"`).FindStringSubmatch(p.Body)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

// TaskStatus is the status a task's page shows.
func (p *WebPage) TaskStatus() string {
	m := regexp.MustCompile(`id="task-status"[^>]*>([a-z]+)<`).FindStringSubmatch(p.Body)
	if m == nil {
		return ""
	}
	return m[1]
}

// EnrichCompany creates a company task through the API and returns its id.
func (e *Env) EnrichCompany(fields map[string]string) string {
	e.T.Helper()
	r := e.Do("POST", "/v1/companies/enrich", fields)
	if r.Status != http.StatusAccepted && r.Status != http.StatusOK {
		e.T.Fatalf("enrich %v: %d %s", fields, r.Status, r.Raw)
	}
	return r.Str("task.id")
}

// WaitPage gets a task's page until the task has settled.
func (b *Browser) WaitPage(id string) *WebPage {
	b.T.Helper()
	deadline := time.Now().Add(SettleWithin)
	for {
		p := b.Get("/dashboard/tasks/" + id)
		if p.Status != http.StatusOK {
			b.T.Fatalf("task page %s: %d %s", id, p.Status, p.Body)
		}
		if s := p.TaskStatus(); s != "queued" && s != "running" {
			return p
		}
		if time.Now().After(deadline) {
			b.T.Fatalf("task %s did not settle: %s", id, p.Body)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
