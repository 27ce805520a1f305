package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"enrichd/webhook"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	stripewebhook "github.com/stripe/stripe-go/v85/webhook"
)

// The browser test drives the dashboard as a person would, in a real headless
// Chromium: what a handler test cannot see (the forms as the browser sends them, htmx,
// the Content-Security-Policy, cookies as the browser keeps them) is seen here.

// browserBudget bounds the whole browser test, start of Chromium included.
const browserBudget = 5 * time.Minute

// stepBudget bounds one step, so that a page that never shows what is waited for fails
// with the step's name long before the whole budget runs out.
const stepBudget = 30 * time.Second

// Screenshot sizes: a desktop and a phone.
const (
	desktopWidth, desktopHeight = 1280, 800
	phoneWidth, phoneHeight     = 390, 844
)

// findChromium is the Chromium to drive: ENRICHD_CHROMIUM when set, else the usual
// names. Without one the test skips on a developer's machine and fails in CI, where
// .ci/run installs it.
func findChromium(t *testing.T) string {
	t.Helper()
	candidates := []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}
	if p := os.Getenv("ENRICHD_CHROMIUM"); p != "" {
		candidates = []string{p}
	}
	for _, name := range candidates {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := fmt.Sprintf("no Chromium found (looked for %s); install it with `apt-get install -y chromium` "+
		"(Debian, Ubuntu) to run the dashboard's browser test, or name one in ENRICHD_CHROMIUM", strings.Join(candidates, ", "))
	if os.Getenv("CI") != "" || os.Getenv("ENRICHD_REQUIRE_BROWSER") == "1" {
		t.Fatal(msg + " (CI or ENRICHD_REQUIRE_BROWSER=1 is set: a missing browser is a failure here)")
	}
	t.Skip(msg)
	return ""
}

// browser is one headless Chromium tab on the dashboard at base.
type browser struct {
	t    *testing.T
	ctx  context.Context // the tab; its deadline is the whole test's
	base string

	mu       sync.Mutex
	problems []consoleProblem // console errors and uncaught exceptions of the pages
	expected map[string]bool  // URLs the test loads to see them refused

	shots map[string][]byte // written to docs/screenshots only when the test passes
}

func newBrowser(t *testing.T, ctx context.Context, chromium, base string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox, // root in a container has no sandbox to give
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(desktopWidth, desktopHeight),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tab, cancelTab := chromedp.NewContext(actx)
	// Cleanups run last in, first out: the tab, then the browser, then the profile
	// directory it wrote in.
	t.Cleanup(cancelAlloc)
	t.Cleanup(cancelTab)
	b := &browser{t: t, ctx: tab, base: base, shots: map[string][]byte{}, expected: map[string]bool{}}
	messages := chromedp.Console(tab)
	if err := chromedp.Do(tab, chromedp.EmulateViewport(desktopWidth, desktopHeight)); err != nil {
		t.Fatalf("starting %s: %v", chromium, err)
	}
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				b.mu.Lock()
				b.problems = append(b.problems, consoleProblem{url: m.URL, text: fmt.Sprintf("%s:%d %s", m.URL, m.Line+1, m)})
				b.mu.Unlock()
			}
		}
	}()
	return b
}

type consoleProblem struct{ url, text string }

// refused loads url, which must answer status: the console error that logs is expected.
func (b *browser) refused(url string, status int64) {
	b.t.Helper()
	b.mu.Lock()
	b.expected[url] = true
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(b.ctx, stepBudget)
	defer cancel()
	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(url))
	if err != nil {
		b.fail("opening "+url, err)
	}
	if resp.Status != status {
		b.t.Errorf("%s: %d, want %d", url, resp.Status, status)
	}
}

// step runs actions within stepBudget, failing the test with what was being done.
func (b *browser) step(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepBudget)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.fail(what, err)
	}
}

func (b *browser) fail(what string, err error) {
	b.t.Helper()
	// A hung tab must not hold the report back.
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	if dir := os.Getenv("ENRICHD_BROWSER_ARTIFACTS"); dir != "" {
		// What the browser showed, and the screenshots taken so far, for a failure
		// far away (CI) to be seen.
		if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
			b.shots["failure"] = png
		}
		b.saveShots(dir)
	}
	b.t.Fatalf("%s: %v\npage %s says:\n%s", what, err, loc, clipText(body, 2000))
}

func clipText(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// open loads a dashboard path and waits for sel on it.
func (b *browser) open(path, sel string) {
	b.t.Helper()
	b.step("opening "+path, chromedp.Navigate(b.base+path))
	b.step("waiting on "+path+" for "+sel, chromedp.WaitVisible(chromedp.CSS(sel)))
}

// text is the visible text of the first element sel matches, waiting for it.
func (b *browser) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepBudget)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.fail("reading "+sel, err)
	}
	return strings.TrimSpace(s)
}

// waitUntil waits for a JavaScript condition to hold on the page, across the
// navigations a form or a redirect makes on the way (a poll does not survive one, so
// it is started again on the page that follows).
func (b *browser) waitUntil(what, condition string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepBudget)
	defer cancel()
	for {
		_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](condition,
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(stepBudget)))
		if err == nil {
			return
		}
		if ctx.Err() != nil || errors.Is(err, chromedp.ErrPollingTimeout) {
			b.fail("waiting until "+what, err)
		}
	}
}

// waitText waits until the element sel matches shows want in its text.
func (b *browser) waitText(sel, want string) {
	b.t.Helper()
	b.waitUntil(fmt.Sprintf("%s shows %q", sel, want),
		fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.textContent.includes(%q); })()`, sel, want))
}

// waitPath waits until the tab is on a page whose path (and query) starts with prefix
// and has finished loading it.
func (b *browser) waitPath(prefix string) {
	b.t.Helper()
	b.waitUntil("the page is "+prefix+"…", fmt.Sprintf(
		`(location.pathname + location.search).startsWith(%q) && document.readyState === "complete"`, prefix))
}

// fill types values into the named fields of the form sel matches.
//
// It focuses the field and types, as chromedp.SendKeys does, without SendKeys: that
// reads the node's attributes unlocked (chromedp v0.23.0, query.go) while chromedp's
// DOM events change them, and the race detector failed the package on it when the
// page changed an attribute of the field being typed into.
func (b *browser) fill(form string, fields ...string) {
	b.t.Helper()
	var actions []chromedp.Action[chromedp.Void]
	for i := 0; i+1 < len(fields); i += 2 {
		field := fmt.Sprintf(`%s [name=%q]`, form, fields[i])
		actions = append(actions, chromedp.WaitVisible(chromedp.CSS(field)), chromedp.Clear(chromedp.CSS(field)),
			chromedp.Focus(chromedp.CSS(field)), chromedp.KeyEvent(fields[i+1]))
	}
	b.step("filling "+form, actions...)
}

// submit clicks the submit button of the form sel matches.
func (b *browser) submit(form string) {
	b.t.Helper()
	b.step("submitting "+form, chromedp.Click(chromedp.CSS(form+` [type=submit], `+form+` button:not([type])`)))
}

// waitVisible waits until an element sel matches is shown.
func (b *browser) waitVisible(sel string) {
	b.t.Helper()
	b.step("waiting for "+sel, chromedp.WaitVisible(chromedp.CSS(sel)))
}

// click clicks the element sel matches.
func (b *browser) click(sel string) {
	b.t.Helper()
	b.step("clicking "+sel, chromedp.Click(chromedp.CSS(sel)))
}

// check ticks the checkbox sel matches unless it is ticked already.
func (b *browser) check(sel string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepBudget)
	defer cancel()
	checked, err := chromedp.Run(ctx, chromedp.JavascriptAttribute[bool](chromedp.CSS(sel), "checked"))
	if err != nil {
		b.fail("reading "+sel, err)
	}
	if !checked {
		b.click(sel)
	}
}

// attr is the attribute name of the element sel matches.
func (b *browser) attr(sel, name string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepBudget)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(sel), name))
	if err != nil || !v.Exists {
		b.fail(fmt.Sprintf("reading %s's %s", sel, name), err)
	}
	return v.Value
}

// fetch GETs path from the page, with its cookies, as a download link would, and
// returns the body of a 200.
func (b *browser) fetch(path string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepBudget)
	defer cancel()
	body, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(
		`fetch(%q).then(r => r.ok ? r.text() : Promise.reject(new Error(r.status + " " + r.statusText)))`, path),
		chromedp.EvalAwaitPromise))
	if err != nil {
		b.fail("fetching "+path, err)
	}
	return body
}

// post sends a form of name, value pairs to path from the page, as its own forms do,
// and returns the body of the answer: a download the page would save.
func (b *browser) post(path string, fields ...string) string {
	b.t.Helper()
	form := map[string]string{}
	for i := 0; i+1 < len(fields); i += 2 {
		form[fields[i]] = fields[i+1]
	}
	raw, _ := json.Marshal(form)
	ctx, cancel := context.WithTimeout(b.ctx, stepBudget)
	defer cancel()
	body, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(
		`fetch(%q, {method: "POST", body: new URLSearchParams(%s)}).then(r => r.ok ? r.text() : Promise.reject(new Error(r.status + " " + r.statusText)))`,
		path, raw), chromedp.EvalAwaitPromise))
	if err != nil {
		b.fail("posting to "+path, err)
	}
	return body
}

// reloadUntil opens path again until the element sel matches shows want: for a page
// that shows what the server did after it was rendered.
func (b *browser) reloadUntil(path, sel, want string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepBudget)
	defer cancel()
	for {
		b.open(path, sel)
		if strings.Contains(b.text(sel), want) {
			return
		}
		select {
		case <-ctx.Done():
			b.fail(fmt.Sprintf("waiting until %s on %s shows %q", sel, path, want), ctx.Err())
		case <-time.After(100 * time.Millisecond): // a reload ten times a second at most
		}
	}
}

// shot keeps a screenshot of the whole page under name, when one will be written: to
// docs/screenshots (ENRICHD_UPDATE_SCREENSHOTS=1) or, for a failure, to
// ENRICHD_BROWSER_ARTIFACTS. The browser tests' 28 full-page PNGs cost 3 to 6 CPU-s,
// which a run that keeps none should not spend.
func (b *browser) shot(name string) {
	b.t.Helper()
	if os.Getenv("ENRICHD_UPDATE_SCREENSHOTS") != "1" && os.Getenv("ENRICHD_BROWSER_ARTIFACTS") == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, stepBudget)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.fail("screenshot "+name, err)
	}
	b.shots[name] = png
}

// viewport sets the width pages are laid out at, and the color scheme they see.
func (b *browser) viewport(width, height int64, scheme string) {
	b.t.Helper()
	var mobile []chromedp.EmulateViewportOption
	if width < 600 {
		mobile = append(mobile, chromedp.EmulateMobile)
	}
	b.step(fmt.Sprintf("a %d px viewport in %s", width, scheme),
		chromedp.EmulateViewport(width, height, mobile...),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
			return err
		}))
}

// saveShots writes the screenshots to dir.
func (b *browser) saveShots(dir string) {
	b.t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	for name, png := range b.shots {
		if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
}

// checkConsole fails the test on any error a page logged: a script that broke, a
// resource refused by the Content-Security-Policy, a request that failed.
func (b *browser) checkConsole() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		if b.expected[p.url] {
			continue
		}
		b.t.Errorf("browser console: %s", p.text)
	}
}

// adminSignedIn creates the organization acme on db, starts serve on it with args,
// and signs its first admin (owner@acme.com) in through the link `users create`
// prints, in a browser that setup, when given, prepares first: the browser on the
// overview, serve's log and address. Serve stops when the test ends.
func adminSignedIn(t *testing.T, ctx context.Context, chromium, db string, setup func(*browser), args ...string) (*browser, *syncBuffer, string) {
	t.Helper()
	mustCLI(t, "orgs", "create", "acme", "--db", db)
	serveCtx, stopServe := context.WithCancel(ctx)
	logs, done := startServe(t, serveCtx, append([]string{"--db", db}, args...)...)
	t.Cleanup(func() {
		stopServe()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	base := logField(t, logs, "enrichd listening", "addr")
	out := mustCLI(t, "users", "create", "--org", "acme", "--email", "owner@acme.com", "--role", "admin", "--public-url", base, "--db", db)
	var link string
	for _, l := range lines(out) {
		if strings.HasPrefix(l, base+"/dashboard/setup?token=") {
			link = l
		}
	}
	b := newBrowser(t, ctx, chromium, base)
	if setup != nil {
		setup(b)
	}
	const password = "correct horse battery staple"
	b.step("opening the set-password link", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS(`input[name=confirm]`)))
	b.fill(`form[action="/dashboard/setup"]`, "password", password, "confirm", password)
	b.submit(`form[action="/dashboard/setup"]`)
	b.waitPath("/dashboard/login")
	b.fill(`form[action="/dashboard/login"]`, "email", "owner@acme.com", "password", password)
	b.submit(`form[action="/dashboard/login"]`)
	b.waitPath("/dashboard/")
	b.waitText("header", "acme · admin")
	return b, logs, base
}

// TestDashboardInABrowser follows the README from the first start on: the link serve
// prints creates the organization and its admin, the link `users create` prints sets
// a password, the dashboard signs in, and every page is used as a team lead would,
// with a screenshot of each, written to docs/screenshots for the README only with
// ENRICHD_UPDATE_SCREENSHOTS=1 and only when every step passed.
func TestDashboardInABrowser(t *testing.T) {
	chromium := findChromium(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), browserBudget)
	defer cancel()

	// A first start: serve on a new database prints a one-time link whose page creates
	// the organization and its first admin, and signs them in to an overview that
	// lists what is left to do. Then the README's commands: credits and the example
	// records (the dataset source), and a user, created once serve listens, for the
	// link to name its port; serve runs with webhooks allowed to a local receiver.
	db := newDBPath(t)
	serveCtx, stopServe := context.WithCancel(ctx)
	logs, done := startServe(t, serveCtx, "--db", db, "--allow-private-webhooks")
	defer func() {
		stopServe()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	base := logField(t, logs, "enrichd listening", "addr")
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	b := newBrowser(t, ctx, chromium, base)
	const password = "correct horse battery staple"

	install := waitFirstStartLink(t, logs)
	if !strings.HasPrefix(install, base+"/dashboard/install?token=") {
		t.Fatalf("the first-start link %q is not on %s", install, base)
	}
	b.step("opening the first-start link", chromedp.Navigate(install), chromedp.WaitVisible(chromedp.CSS(`input[name=org]`)))
	b.axe("first-start")
	b.shot("first-start")
	b.fill(`form[action="/dashboard/install"]`, "org", "acme", "email", "owner@acme.com", "password", password, "confirm", password)
	b.submit(`form[action="/dashboard/install"]`)
	b.waitPath("/dashboard/")
	b.waitText(".start", "Getting started")
	contains(t, b.text("header"), "acme · admin")
	b.axe("getting started")
	b.shot("getting-started")
	b.viewport(phoneWidth, phoneHeight, "light") // the commands fit a phone too
	b.open("/dashboard/", ".start")
	b.fitsWidth("getting started")
	b.phoneLayout("getting started")
	b.viewport(desktopWidth, desktopHeight, "light")
	b.refused(install, http.StatusNotFound) // used up
	mustCLI(t, "credits", "grant", "--org", "acme", "--amount", "100", "--db", db)
	mustCLI(t, "import", "../examples/people-and-companies.jsonl", "--db", db)
	b.open("/dashboard/", ".start")
	b.waitUntil("two steps are ticked", `document.querySelectorAll(".start li.done").length === 2`)
	b.step("signing the first admin out", chromedp.Click(chromedp.CSS(`header form[action="/dashboard/logout"] button`)))
	b.waitPath("/dashboard/login")

	out := mustCLI(t, "users", "create", "--org", "acme", "--email", "lead@acme.com", "--role", "admin", "--public-url", base, "--db", db)
	var link string
	for _, l := range lines(out) {
		if strings.HasPrefix(l, base+"/dashboard/setup?token=") {
			link = l
		}
	}
	if link == "" {
		t.Fatalf("no set-password link on %s in %q", base, out)
	}

	// The link sets the password, once.
	b.step("opening the set-password link", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS(`input[name=confirm]`)))
	contains(t, b.text("main"), "lead@acme.com")
	b.axe("set-password")
	b.shot("set-password")
	b.fill(`form[action="/dashboard/setup"]`, "password", password, "confirm", password)
	b.submit(`form[action="/dashboard/setup"]`)
	b.waitPath("/dashboard/login")
	b.waitText(".notice", "Your password is set")
	// The sign-in form carries the address the password was set for.
	if got := evalIn[string](b, "reading the email field", `document.querySelector("input[name=email]").value`); got != "lead@acme.com" {
		t.Errorf("the sign-in form after setting the password says %q, want lead@acme.com", got)
	}
	b.axe("sign-in")
	b.shot("sign-in")
	b.refused(link, http.StatusNotFound) // used up

	// Sign in: the overview.
	b.open("/dashboard/login", `form[action="/dashboard/login"]`)
	b.fill(`form[action="/dashboard/login"]`, "email", "lead@acme.com", "password", password)
	b.submit(`form[action="/dashboard/login"]`)
	b.waitPath("/dashboard/")
	b.waitText("#balance", "100")
	contains(t, b.text("header"), "acme · admin")
	b.axe("overview")
	// The first Tab reaches the skip link, shown once focused, and it leads to the content.
	b.step("pressing Tab", chromedp.KeyEvent("\t"))
	b.waitUntil("the skip link has focus and shows", `document.activeElement.matches("a.skip") && document.activeElement.getBoundingClientRect().top >= 0`)
	b.step("pressing Enter", chromedp.KeyEvent("\r"))
	b.waitUntil("the content has focus", `document.activeElement.id === "main"`)

	// Try it, as the README says: the domain acme.com. The task's page follows it
	// until it settles, and shows the company and the charge.
	b.open("/dashboard/try", "form#try")
	b.click(`form#try input[name=kind][value=company_domain]`)
	b.fill("form#try", "domain", "acme.com")
	b.submit("form#try")
	b.waitPath("/dashboard/tasks/")
	b.waitText("#task-status", "succeeded")
	b.waitText("pre#task-result", `"name": "Acme"`)
	b.waitText("#task-credits", "1")
	// The result as a card, its JSON a click away.
	for _, want := range []string{"Acme", "acme.com", "Industrial Machinery", "120 employees", "Berlin, DE", "1998", "Company page"} {
		contains(t, b.text("#company-card"), want)
	}
	if evalIn[bool](b, "reading the JSON toggle", `document.querySelector("details#task-json").open`) {
		t.Error("the result's JSON is shown open; it belongs behind its toggle")
	}
	b.click("details#task-json summary")
	b.waitVisible("pre#task-result")
	b.axe("task (company)")
	b.shot("task")

	// And a person by work email, with a hint.
	b.open("/dashboard/try", "form#try")
	b.click(`form#try input[name=kind][value=person_email]`)
	b.fill("form#try", "email", "jane@acme.com", "fullName", "Jane Doe", "title", "CTO")
	b.axe("try") // with the fields an email lookup does not read dimmed
	b.shot("try")
	b.submit("form#try")
	b.waitPath("/dashboard/tasks/")
	b.waitText("#task-status", "succeeded")
	b.waitText("pre#task-result", `"full_name": "Jane Doe"`)
	b.waitText("#task-credits", "3")
	contains(t, b.text("pre#task-input"), `"fullName": "Jane Doe"`)
	personTask := evalIn[string](b, "reading the address", "location.pathname")
	contains(t, b.text("#person-card h3"), "Jane Doe")
	contains(t, b.text("#person-card .headline"), "CTO at Acme")
	contains(t, b.text("#current-roles"), "CTO · Acme")
	contains(t, b.text("#role-history"), "Engineering Manager · Initech")
	contains(t, b.text("#role-history"), "Mar 2015 – Dec 31, 2019")
	contains(t, b.text("#email-match"), "jane@acme.com")
	b.axe("task (person)")
	b.look("task-person")

	// Loops: create one against a receiver here, keep the secret shown once, and send
	// the test event, which the receiver refuses once.
	rc := newHookReceiver(t)
	b.open("/dashboard/loops", "form#create-loop")
	b.fill("form#create-loop", "name", "CRM sync", "webhook_url", rc.srv.URL+"/hooks/enrichd")
	b.step("choosing companies", chromedp.SetValue(chromedp.CSS(`form#create-loop select[name=object_type]`), "company"))
	b.check(`form#create-loop input[name=enabled]`)
	b.submit("form#create-loop")
	b.waitVisible("code#loop-secret")
	secret := b.text("code#loop-secret")
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("the Loop's secret is %q", secret)
	}
	// The page with the secret answers the form's POST, so the address bar still says
	// /dashboard/loops: the Loop's own address is where its forms post.
	loopPath := strings.TrimSuffix(b.attr("form#test-loop", "action"), "/test")

	rc.answerNext(http.StatusServiceUnavailable)
	b.submit("form#test-loop")
	b.waitText("#test-result", "503")
	first := rc.next(t, ctx)
	checkSigned(t, first, secret, "test")
	deliveryID := first.header.Get(webhook.HeaderDeliveryID)
	b.waitVisible("#deliveries tr.delivery")
	b.axe("loop")
	b.shot("loop")

	// The delivery the receiver refused: retried now, it succeeds, with the same id.
	b.step("opening the delivery", chromedp.Click(chromedp.CSS(`#test-result a[href^="/dashboard/deliveries/"]`)))
	b.waitPath("/dashboard/deliveries/" + deliveryID)
	b.waitText("#delivery-code", "503")
	b.waitText("pre#delivery-payload", `"event": "test"`)
	b.submit("form#retry-delivery")
	b.waitText(".notice", "due now")
	again := rc.next(t, ctx)
	checkSigned(t, again, secret, "test")
	if got := again.header.Get(webhook.HeaderDeliveryID); got != deliveryID {
		t.Errorf("the retry's delivery id is %s, want %s", got, deliveryID)
	}
	if !bytes.Equal(again.body, first.body) {
		t.Errorf("the retry sent %s, the first attempt %s", again.body, first.body)
	}
	b.reloadUntil("/dashboard/deliveries/"+deliveryID, "#delivery-status", "succeeded")
	contains(t, b.text("#delivery-code"), "204")
	b.axe("delivery")
	b.shot("delivery")

	// Run: the Loop's input becomes a task, whose result the receiver gets, signed.
	b.open(loopPath, "form#run-loop")
	b.fill("form#run-loop", "domain", "initech.com")
	b.submit("form#run-loop")
	b.waitPath("/dashboard/tasks/")
	b.waitText("#task-status", "succeeded")
	b.waitText("pre#task-result", `"name": "Initech"`)
	ran := rc.next(t, ctx)
	checkSigned(t, ran, secret, "task.succeeded")
	contains(t, string(ran.body), "initech.com")
	b.reloadUntil(loopPath, "#deliveries", "task.succeeded")
	b.open("/dashboard/loops", "tr.loop")
	contains(t, b.text("tr.loop"), "CRM sync")
	b.axe("loops")
	b.shot("loops")

	// Settings → API Keys: a key created here is shown once and works on /v1.
	b.open("/dashboard/settings/keys", "form#create-key")
	b.fill("form#create-key", "name", "CI pipeline")
	b.submit("form#create-key")
	b.waitVisible("code#new-key")
	key := b.text("code#new-key")
	if !strings.HasPrefix(key, "enr_") {
		t.Fatalf("the new key is %q", key)
	}
	// The copy button works under the pages' Content-Security-Policy: it copies, or
	// where the clipboard is refused, selects the key for Ctrl+C.
	b.click(`[data-copy="#new-key"]`)
	b.waitUntil("the copy button answers", `document.querySelector('[data-copy="#new-key"]').textContent.trim() !== "Copy"`)
	contains(t, b.text("tr.key"), "CI pipeline")
	b.axe("keys")
	b.shot("keys")

	// Settings → Sources: the fields the sources fill for the organization, checked
	// here, are the lists the CLI shows and the workers read.
	b.open("/dashboard/settings/sources", "form#fill-lists")
	contains(t, b.text("#fill-company-state"), "The server's default")
	b.check(`form#fill-lists input[name=company][value=slogan]`)
	b.check(`form#fill-lists input[name=company][value=employee_count]`)
	b.check(`form#fill-lists input[name=person][value=positions]`)
	b.submit("form#fill-lists")
	b.waitText(".notice", "Fill lists saved")
	contains(t, b.text("#fill-company-state"), "This organization's own list")
	b.waitUntil("the saved boxes are checked", `document.querySelector('form#fill-lists input[name=company][value=slogan]').checked && `+
		`!document.querySelector('form#fill-lists input[name=company][value=name]').checked`)
	var fill []struct {
		Object  string   `json:"object"`
		Fields  []string `json:"fields"`
		Default bool     `json:"default"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "sources", "fill", "--org", "acme", "--json", "--db", db)), &fill); err != nil {
		t.Fatal(err)
	}
	if len(fill) != 2 || strings.Join(fill[0].Fields, ",") != "employee_count,slogan" || strings.Join(fill[1].Fields, ",") != "positions" || fill[0].Default || fill[1].Default {
		t.Errorf("sources fill after the dashboard's form: %+v", fill)
	}
	b.axe("sources")
	b.shot("sources")

	status, _, raw := call(t, client, http.MethodGet, base+"/v1/tasks", key, "")
	if status != http.StatusOK {
		t.Fatalf("GET /v1/tasks with the dashboard's key: %d %s", status, raw)
	}
	status, enriched, raw := call(t, client, http.MethodPost, base+"/v1/companies/enrich", key, `{"domain":"globex.com"}`)
	if status != http.StatusAccepted && status != http.StatusOK {
		t.Fatalf("POST /v1/companies/enrich with the dashboard's key: %d %s", status, raw)
	}
	// What the API started, the dashboard shows.
	b.open("/dashboard/tasks/"+enriched.Task.ID, "#task-status")
	b.waitText("#task-status", "succeeded")
	b.waitText("pre#task-result", `"name": "Globex"`)
	// Each field beside the source that gave it, and the sources asked.
	b.waitText("#task-provenance #field-name", "dataset")
	b.waitText("#task-sources", "hit")
	b.look("task-company")
	b.open("/dashboard/tasks", "tr.task")
	b.waitText("#tasks", "globex.com")
	b.waitText("#tasks", "jane@acme.com")
	b.waitText("#tasks", "acme.com")
	b.waitText("#tasks", "CRM sync") // the run's Loop
	b.axe("tasks")
	b.shot("tasks")

	// Credits: the ledger holds the grant and both charges, and exports as CSV.
	b.open("/dashboard/credits", "tr.ledger")
	b.axe("credits")
	b.shot("credits")
	csv := b.fetch(b.attr("a#export-csv", "href"))
	for _, want := range []string{"grant", "charge"} {
		contains(t, csv, want)
	}

	// Sources: each source in the order it is asked, with its month, budget and key.
	b.open("/dashboard/sources", "section.source")
	b.waitText("#source-dataset", "takes no key")
	b.waitText("#fill-lists", "company")
	b.axe("sources this month")
	b.shot("sources-month")

	// The overview adds it up: 100 granted, 1 for each domain, 3 for the email.
	b.open("/dashboard/", "#balance")
	b.waitText("#balance", "94")
	b.shot("overview")

	// Watches: one created from the form is listed (its first check, charged, comes
	// after the sums above), and a page that is not there keeps the navigation.
	b.open("/dashboard/watches", "form#create-watch")
	b.fill("form#create-watch", "domain", "globex.com", "every_days", "30")
	b.submit("form#create-watch")
	b.waitText(".notice", "The watch is created")
	contains(t, b.text("#watches"), "globex.com")
	contains(t, b.text("main"), "1 watch.")
	b.axe("watches")

	// Suppressions: one person from the form, then a list from a CSV file; each shown
	// by its masked hint, never the address.
	b.open("/dashboard/suppressions", "form#add-suppression")
	b.fill("form#add-suppression", "value", "jane.doe@globex.com", "reason", "objected by email")
	b.submit("form#add-suppression")
	b.waitText(".notice", "j***@globex.com is suppressed")
	suppressionList := filepath.Join(t.TempDir(), "do-not-contact.csv")
	if err := os.WriteFile(suppressionList, []byte("email,domain,reason\nann@initech.com,,asked us\n,hooli.com,the whole company\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b.step("choosing the list", chromedp.SetUploadFiles(chromedp.CSS(`form#import-suppressions input[name=file]`), []string{suppressionList}))
	b.submit("form#import-suppressions")
	b.waitText(".notice", "2 suppressions added")
	contains(t, b.text("#suppressions"), "h***.com")
	if strings.Contains(b.text("main"), "jane.doe") {
		t.Error("the Suppressions page shows a suppressed address")
	}
	b.axe("suppressions")
	b.shot("suppressions")

	// Erasures: John Smith, whose imported record names his address, exported as JSON,
	// then erased from the form once confirmed, and listed by masked hints alone.
	b.open("/dashboard/erasures", "form#erase-person")
	exported := b.post("/dashboard/erasures/export", "kind", "email", "value", "john.smith@globex.com")
	contains(t, exported, `"networkUrls": [`)
	contains(t, exported, "https://www.linkedin.com/in/john-smith")
	b.fill("form#erase-person", "value", "john.smith@globex.com")
	b.submit("form#erase-person")
	b.waitVisible("#confirm-erasure")
	b.axe("erasure, to confirm")
	b.submit("#confirm-erasure form")
	b.waitText(".notice", "is erased from everything your organization holds")
	contains(t, b.text("#erasures"), "j***@globex.com")
	contains(t, b.text("#erasures"), "2 record keys, 1 position, 1 record")
	if text := b.text("main"); strings.Contains(text, "john.smith") || strings.Contains(text, "John Smith") {
		t.Error("the Erasures page shows the person erased")
	}
	b.reloadUntil("/dashboard/erasures", "#erasures", "done") // the file scrubbed
	b.axe("erasures")
	b.shot("erasures")

	// Audit: who enriched, suppressed, signed in, exported and erased; suppressions and
	// the erased person by hash alone; filtered by action, and downloaded as JSON Lines.
	b.open("/dashboard/audit", "tr.audit-entry")
	b.waitText("#audit", "Erased a person")
	for _, what := range []string{"Exported a person", "Suppressed", "Enriched", "Signed in"} {
		contains(t, b.text("#audit"), what)
	}
	if text := b.text("main"); strings.Contains(text, "jane.doe") || strings.Contains(text, "john.smith") {
		t.Error("the Audit page shows a suppressed or erased address")
	}
	contains(t, b.text("#audit-head"), "The chain's head")
	b.axe("audit")
	b.shot("audit")
	b.step("choosing suppressions", chromedp.SetValue(chromedp.CSS(`form#audit-filter select[name=action]`), "suppression.added"))
	b.submit("form#audit-filter")
	b.waitUntil("the list is filtered", `location.search.includes("action=suppression.added") && document.readyState === "complete"`)
	if got := b.text("#audit"); strings.Contains(got, "Enriched") || !strings.Contains(got, "Suppressed") {
		t.Errorf("the Audit page filtered by suppressions shows: %s", got)
	}
	downloaded := b.fetch(b.attr("a#audit-download", "href"))
	if n := strings.Count(downloaded, "\n"); n != 3 || !strings.Contains(downloaded, `"action":"suppression.added"`) {
		t.Errorf("the download of the suppressions' entries holds %d lines: %s", n, downloaded)
	}
	b.refused(base+"/dashboard/no-such-page", http.StatusNotFound)
	b.waitVisible(`header nav a[href="/dashboard/tasks"]`)
	b.axe("not found")

	// At a phone's width every page fits, tables included, and passes axe-core again.
	b.viewport(phoneWidth, phoneHeight, "light")
	b.open("/dashboard/", "#balance")
	b.shot("overview-phone")
	for _, page := range []struct{ name, path, sel string }{
		{"overview", "/dashboard/", "#balance"},
		{"tasks", "/dashboard/tasks", "tr.task"},
		{"task", personTask, "#person-card"},
		{"task (company)", "/dashboard/tasks/" + enriched.Task.ID, "#task-provenance"},
		{"try", "/dashboard/try", "form#try"},
		{"loops", "/dashboard/loops", "tr.loop"},
		{"loop", loopPath, "#deliveries"},
		{"delivery", "/dashboard/deliveries/" + deliveryID, "#delivery-status"},
		{"watches", "/dashboard/watches", "#watches"},
		{"suppressions", "/dashboard/suppressions", "#suppressions"},
		{"erasures", "/dashboard/erasures", "#erasures"},
		{"audit", "/dashboard/audit", "#audit"},
		{"credits", "/dashboard/credits", "tr.ledger"},
		{"sources-month", "/dashboard/sources", "section.source"},
		{"keys", "/dashboard/settings/keys", "tr.key"},
		{"sources", "/dashboard/settings/sources", "form#fill-lists"},
	} {
		b.open(page.path, page.sel)
		b.fitsWidth(page.name)
		b.phoneLayout(page.name)
		b.axe(page.name + " (phone)")
		b.look("phone-" + page.name)
	}
	b.viewport(desktopWidth, desktopHeight, "dark")
	b.open("/dashboard/", "#balance")
	b.axe("overview (dark)")
	b.shot("overview-dark")
	b.open(personTask, "#person-card")
	b.axe("task (dark)")
	b.open("/dashboard/try", "form#try")
	b.axe("try (dark)")
	b.viewport(desktopWidth, desktopHeight, "light")

	// Upload: a list from a CRM, previewed (its columns, first rows and credits),
	// confirmed, followed to the end on its page, and its results downloaded.
	list := filepath.Join(t.TempDir(), "crm-export.csv")
	if err := os.WriteFile(list, []byte("domain,owner\nacme.com,ann\ninitech.com,bob\nnowhere.example,cy\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b.open("/dashboard/batches", "form#upload")
	b.step("choosing the file", chromedp.SetUploadFiles(chromedp.CSS(`form#upload input[name=file]`), []string{list}))
	b.submit("form#upload")
	b.waitPath("/dashboard/batches/preview")
	b.waitText("#preview-estimate", "3")
	contains(t, b.text("#preview-columns"), "read as domain")
	contains(t, b.text("#preview-columns"), "kept as it is")
	contains(t, b.text("#preview-rows"), "nowhere.example")
	b.shot("upload")
	b.submit("form#confirm-upload")
	b.waitUntil("the batch's page is open", `/^\/dashboard\/batches\/[0-9a-f]{8}-/.test(location.pathname) && document.readyState === "complete"`)
	b.waitText("#batch-status", "done") // htmx polls the progress until then
	b.waitText("#batch-done", "3 of 3")
	b.waitUntil("the bar is full", `document.querySelector("#batch-bar").value === 3`)
	b.waitText("#batch-credits", "2") // nowhere.example is not found: refunded
	b.shot("batch")
	results := b.fetch(b.attr("a#download-csv", "href"))
	contains(t, results, "domain,owner,enrichd_status")
	contains(t, results, "initech.com,bob,succeeded")
	contains(t, results, "nowhere.example,cy,failed,not_found")

	// A CRM's contacts: an email and a domain, some rows with one of them, one
	// malformed. The checkbox skips that row, each other row is what it has, and the
	// batch's page lists the skipped row and the lookup not found, linked to its task.
	contacts := filepath.Join(t.TempDir(), "contacts.csv")
	if err := os.WriteFile(contacts, []byte("email,domain,owner\njane@acme.com,acme.com,ann\n,initech.com,bob\nnot an email,,cy\n,nowhere.example,dee\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b.open("/dashboard/batches", "form#upload")
	b.step("choosing the contacts", chromedp.SetUploadFiles(chromedp.CSS(`form#upload input[name=file]`), []string{contacts}))
	b.check(`form#upload input[name=on_error]`)
	b.submit("form#upload")
	b.waitPath("/dashboard/batches/preview")
	b.waitText("#preview-estimate", "5") // an email 3, two domains 1 each
	contains(t, b.text("#preview-summary"), "1 refused, to be skipped")
	contains(t, b.text("#preview-lookups"), "1 person and 2 companies")
	contains(t, b.text("#preview-skipped"), "not an email")
	b.axe("upload, a row skipped")
	b.shot("upload-skipped")
	b.submit("form#confirm-upload")
	b.waitUntil("the contacts' page is open", `/^\/dashboard\/batches\/[0-9a-f]{8}-/.test(location.pathname) && document.readyState === "complete"`)
	b.waitText("#batch-status", "done")
	b.waitText("#batch-done", "4 of 4")
	contains(t, b.text("#batch-failures"), "skipped")
	contains(t, b.text("#batch-failures"), "not_found")
	b.axe("batch, failed and skipped rows")
	b.shot("batch-contacts")
	contactResults := b.fetch(b.attr("a#download-csv", "href"))
	contains(t, contactResults, "not an email,,cy,skipped,invalid_input")
	b.click(`#batch-failures a[href^="/dashboard/tasks/"]`)
	b.waitPath("/dashboard/tasks/")
	b.waitText("main", "nowhere.example")

	// Revoked with its confirmation, the key no longer opens /v1.
	b.open("/dashboard/settings/keys", "tr.key details.confirm summary")
	b.step("confirming the revocation", chromedp.Click(chromedp.CSS(`tr.key details.confirm summary`)),
		chromedp.WaitVisible(chromedp.CSS(`tr.key details.confirm button.danger`)),
		chromedp.Click(chromedp.CSS(`tr.key details.confirm button.danger`)))
	b.waitText("tr.key", "revoked")
	if status, _, raw := call(t, client, http.MethodGet, base+"/v1/tasks", key, ""); status != http.StatusUnauthorized {
		t.Errorf("GET /v1/tasks with the revoked key: %d %s", status, raw)
	}

	// Sign out: the session ends, and the dashboard sends the browser to sign in.
	b.step("signing out", chromedp.Click(chromedp.CSS(`header form[action="/dashboard/logout"] button`)))
	b.waitPath("/dashboard/login")
	b.waitText(".notice", "signed out")
	b.open("/dashboard/tasks", `form[action="/dashboard/login"]`)
	b.waitPath("/dashboard/login?next=")

	b.checkConsole()
	// The README's screenshots are rewritten on purpose only: a test run leaves the
	// checkout as it found it.
	if !t.Failed() {
		dir := t.TempDir()
		if os.Getenv("ENRICHD_UPDATE_SCREENSHOTS") == "1" {
			dir = filepath.Join("..", "docs", "screenshots")
		}
		b.saveShots(dir)
	}
}

// checkSigned checks that a delivery is the event named, signed with the Loop's
// secret as our verifier and Stripe's both accept.
func checkSigned(t *testing.T, d hookDelivery, secret, event string) {
	t.Helper()
	if got := d.header.Get(webhook.HeaderEvent); got != event {
		t.Errorf("%s = %q, want %q", webhook.HeaderEvent, got, event)
	}
	sig := d.header.Get(webhook.HeaderSignature)
	if err := webhook.Verify(d.body, sig, secret, webhook.DefaultTolerance); err != nil {
		t.Errorf("the %s event's signature %q: %v", event, sig, err)
	}
	if err := stripewebhook.ValidatePayloadWithTolerance(d.body, sig, secret, webhook.DefaultTolerance); err != nil {
		t.Errorf("Stripe's verifier refuses the %s event's signature %q: %v", event, sig, err)
	}
	if webhook.Verify(d.body, sig, "whsec_not-the-secret", webhook.DefaultTolerance) == nil {
		t.Errorf("the %s event verifies with another secret", event)
	}
	var body struct {
		Event string `json:"event"`
	}
	if err := json.Unmarshal(d.body, &body); err != nil || body.Event != event {
		t.Errorf("the %s event's body: %s (%v)", event, d.body, err)
	}
}

// hookReceiver is a Loop's webhook endpoint: it answers each delivery with the next
// status queued in answers (2xx when none is left) and hands what it got to the test.
// A refusal asks, by Retry-After, to be tried again in an hour: the sender's own
// schedule would try again 10 s later, which a loaded machine can let pass before the
// test has looked, so the only retry a test sees is the one it makes.
type hookReceiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	answers []int
	got     chan hookDelivery
}

type hookDelivery struct {
	header http.Header
	body   []byte
	status int // what the receiver answered
}

func newHookReceiver(t *testing.T) *hookReceiver {
	rc := &hookReceiver{got: make(chan hookDelivery, 32)}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		status := http.StatusNoContent
		if len(rc.answers) > 0 {
			status, rc.answers = rc.answers[0], rc.answers[1:]
		}
		rc.mu.Unlock()
		select {
		case rc.got <- hookDelivery{header: r.Header.Clone(), body: body, status: status}:
		default: // the test reads what it waits for; more would be a fault it sees elsewhere
		}
		if status >= 400 {
			w.Header().Set("Retry-After", strconv.Itoa(int(receiverRetryAfter/time.Second)))
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// receiverRetryAfter is how long a refusal of the hookReceiver asks to be left alone:
// longer than the whole browser test.
const receiverRetryAfter = time.Hour

// answerNext makes the receiver answer the next deliveries with these statuses.
func (rc *hookReceiver) answerNext(statuses ...int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.answers = append(rc.answers, statuses...)
}

// next is the next delivery the receiver got.
func (rc *hookReceiver) next(t *testing.T, ctx context.Context) hookDelivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, stepBudget)
	defer cancel()
	select {
	case d := <-rc.got:
		return d
	case <-ctx.Done():
		t.Fatalf("the webhook receiver got nothing: %v", ctx.Err())
		return hookDelivery{}
	}
}
