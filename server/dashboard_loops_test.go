package server_test

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"enrichd/webhook"

	"github.com/matryer/is"
)

// inner is the text of the element with the given id, up to its first tag: "" when the
// page has no such element.
func (p *webPage) inner(id string) string {
	m := regexp.MustCompile(`id="` + regexp.QuoteMeta(id) + `"[^>]*>([^<]*)<`).FindStringSubmatch(p.body)
	if m == nil {
		return ""
	}
	return strings.TrimSpace(m[1])
}

// loopSecret is the signing secret a page shows in code#loop-secret.
func (p *webPage) loopSecret() string { return html.UnescapeString(p.inner("loop-secret")) }

// deliveryRows counts the deliveries a Loop's page lists.
func (p *webPage) deliveryRows() int { return strings.Count(p.body, `<tr class="delivery">`) }

// loopsOf lists an organization's Loops through the API, as JSON.
func (e *env) loopsOf(key string) []any {
	e.t.Helper()
	r := e.do("GET", "/v1/loops", nil, "Authorization", "Bearer "+key)
	if r.status != http.StatusOK {
		e.t.Fatalf("list loops: %d %s", r.status, r.raw)
	}
	return r.get("data").([]any)
}

// onlyLoopID is the id of the one Loop acme has.
func (e *env) onlyLoopID() string {
	e.t.Helper()
	loops := e.loopsOf(e.key)
	if len(loops) != 1 {
		e.t.Fatalf("acme has %d Loops, not 1", len(loops))
	}
	return loops[0].(map[string]any)["id"].(string)
}

// testDelivery queues a test event through the API and returns the delivery's id.
func (e *env) testDelivery(loopID string) string {
	e.t.Helper()
	r := e.do("POST", "/v1/loops/"+loopID+"/test", nil)
	if r.status != http.StatusAccepted {
		e.t.Fatalf("test event: %d %s", r.status, r.raw)
	}
	return r.str("delivery.id")
}

func TestDashboardLoopPagesForBothRoles(t *testing.T) {
	e := newEnv(t, allowPrivateWebhooks)
	rcv := newReceiver(t)
	loopID, secret := e.createLoop("CRM sync", rcv.srv.URL+"/hook", "company")
	deliveryID := e.testDelivery(loopID) // pending: no sender runs
	for _, role := range []string{"admin", "viewer"} {
		t.Run(role, func(t *testing.T) {
			is := is.New(t)
			b := e.signIn("acme", role)
			admin := role == "admin"

			p := b.get("/dashboard/loops")
			is.Equal(p.status, http.StatusOK)
			is.True(p.has(`href="/dashboard/loops/` + loopID + `"`))
			is.True(p.has("CRM sync") && p.has("crm-sync") && p.has(rcv.srv.URL+"/hook"))
			is.True(p.has(`<span class="status enabled">enabled</span>`))
			is.Equal(p.has(`id="create-loop"`), admin) // a viewer is not offered what it may not do

			p = b.get("/dashboard/loops/" + loopID)
			is.Equal(p.status, http.StatusOK)
			is.True(p.has("CRM sync") && p.has(loopID) && p.has(rcv.srv.URL+"/hook"))
			is.Equal(p.deliveryRows(), 1)
			is.True(p.has(`href="/dashboard/deliveries/` + deliveryID + `"`))
			is.True(p.has(`<span class="status pending">pending</span>`))
			for _, form := range []string{`id="edit-loop"`, `id="test-loop"`, `id="run-loop"`, `id="rotate-loop"`, `id="delete-loop"`} {
				is.Equal(p.has(form), admin)
			}
			is.True(!p.has(secret) && p.shownSecret() == "") // never on a later page

			p = b.get("/dashboard/deliveries/" + deliveryID)
			is.Equal(p.status, http.StatusOK)
			is.Equal(p.inner("delivery-status"), "pending")
			is.Equal(p.inner("delivery-code"), "—")
			is.True(strings.Contains(p.body, `id="delivery-payload"`))
			is.True(p.has("&#34;event&#34;: &#34;test&#34;")) // the payload, indented
			is.True(p.has("none: a test event"))
			is.Equal(p.has(`id="retry-delivery"`), admin)
		})
	}
}

func TestDashboardCreatesTheLoopTheAPIWould(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	rcv := newReceiver(t)
	b := e.signIn("acme", "admin")

	p := b.post("/dashboard/loops", url.Values{"name": {"  People feed "}, "webhook_url": {rcv.srv.URL + "/people"},
		"object_type": {"person"}, "enabled": {"on"}})
	is.Equal(p.status, http.StatusCreated)
	secret := p.loopSecret()
	is.True(strings.HasPrefix(secret, "whsec_"))
	is.True(p.has(`data-copy="#loop-secret"`))
	is.True(p.has("shown this once"))
	is.Equal(p.header.Get("Cache-Control"), "no-store")
	id := e.onlyLoopID()
	is.True(p.has(`action="/dashboard/loops/` + id + `"`)) // the Loop's own page

	// The same Loop as one the API makes from the same fields.
	fromAPI := e.do("POST", "/v1/loops", map[string]any{"name": "People feed", "webhook_url": rcv.srv.URL + "/people", "object_type": "person", "enabled": true})
	is.Equal(fromAPI.status, http.StatusCreated)
	got := e.do("GET", "/v1/loops/"+id, nil)
	is.Equal(got.status, http.StatusOK)
	for _, field := range []string{"name", "object_type", "operation", "destination.kind", "destination.url"} {
		is.Equal(got.str("data."+field), fromAPI.str("data."+field))
	}
	is.Equal(got.get("data.enabled"), true)
	is.Equal(got.get("data.destination.enabled"), true)
	is.Equal(got.str("data.slug"), "people-feed")
	is.Equal(fromAPI.str("data.slug"), "people-feed-2") // the slug was taken by the dashboard's
	is.True(!got.has("data.destination.secret"))

	// The secret is not shown again: not on the Loop's page, not in the list.
	for _, path := range []string{"/dashboard/loops/" + id, "/dashboard/loops"} {
		p = b.get(path)
		is.Equal(p.status, http.StatusOK)
		is.True(!p.has(secret))
		is.Equal(p.loopSecret(), "")
	}

	// An unticked box makes a disabled Loop; no object type is a company Loop.
	p = b.post("/dashboard/loops", url.Values{"name": {"Paused"}, "webhook_url": {rcv.srv.URL}})
	is.Equal(p.status, http.StatusCreated)
	var paused map[string]any
	for _, l := range e.loopsOf(e.key) {
		if l.(map[string]any)["name"] == "Paused" {
			paused = l.(map[string]any)
		}
	}
	is.Equal(paused["enabled"], false)
	is.Equal(paused["object_type"], "company")
}

func TestDashboardCreateLoopRefusesWhatTheAPIRefuses(t *testing.T) {
	e := newEnv(t) // https and public addresses only
	b := e.signIn("acme", "admin")
	for _, c := range []struct {
		name string
		form url.Values
		want string
	}{
		{"no name", url.Values{"name": {""}, "webhook_url": {"https://127.0.0.1/hook"}}, "name is required"},
		{"blank name", url.Values{"name": {"   "}, "webhook_url": {"https://127.0.0.1/hook"}}, "name is required"},
		{"long name", url.Values{"name": {strings.Repeat("n", 201)}, "webhook_url": {"https://127.0.0.1/hook"}}, "name must be 1 to 200 characters"},
		{"no URL", url.Values{"name": {"x"}}, "webhook_url is required"},
		{"plain http", url.Values{"name": {"Plain"}, "webhook_url": {"http://hooks.example.com/in"}}, "the URL must use https, not http"},
		{"private address", url.Values{"name": {"Inside"}, "webhook_url": {"https://10.0.0.8/in"}}, "not publicly reachable"},
		{"ftp", url.Values{"name": {"x"}, "webhook_url": {"ftp://hooks.example.com/"}}, `must use https, not &#34;ftp&#34;`},
		{"object type", url.Values{"name": {"x"}, "webhook_url": {"https://10.0.0.8/in"}, "object_type": {"job"}}, "object_type must be company or person"},
		{"too long a field", url.Values{"name": {"x"}, "webhook_url": {"https://example.com/" + strings.Repeat("a", 5000)}}, "longer than 4096 characters"},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			p := b.post("/dashboard/loops", c.form)
			is.Equal(p.status, http.StatusBadRequest)
			is.True(p.has(`class="error"`))
			is.True(p.has(c.want))
			is.True(p.has(`id="create-loop"`)) // the form again
			if name := c.form.Get("name"); name != "" && len(name) < 100 && c.name != "too long a field" {
				is.True(p.has(`value="` + strings.TrimSpace(name) + `"`)) // with what was typed
			}
			is.Equal(p.loopSecret(), "")
		})
	}
	is.New(t).Equal(len(e.loopsOf(e.key)), 0) // nothing created

	// A message that quotes a command, as Markdown does, shows it as code: no backticks.
	p := b.post("/dashboard/loops", url.Values{"name": {"Plain"}, "webhook_url": {"http://hooks.example.com/in"}})
	is := is.New(t)
	is.Equal(p.status, http.StatusBadRequest)
	is.True(p.has("<code>enrichd serve --allow-private-webhooks</code>"))
	is.True(!p.has("`"))
}

func TestDashboardEditLoop(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	rcv := newReceiver(t)
	id, _ := e.createLoop("Warehouse", rcv.srv.URL+"/v1", "company")
	b := e.signIn("acme", "admin")

	before := e.do("GET", "/v1/loops/"+id, nil)
	e.clock.Add(time.Minute)
	for _, c := range []struct {
		form url.Values
		want string
	}{
		{url.Values{"name": {"Warehouse 2"}, "webhook_url": {"ftp://example.com/"}, "enabled": {"on"}}, `must use https, not &#34;ftp&#34;`},
		{url.Values{"name": {"Warehouse 2"}, "webhook_url": {"hooks"}, "enabled": {"on"}}, "is not an absolute URL"},
		{url.Values{"name": {"  "}, "webhook_url": {rcv.srv.URL + "/v2"}}, "name must be 1 to 200 characters, not blank"},
	} {
		p := b.post("/dashboard/loops/"+id, c.form)
		is.Equal(p.status, http.StatusBadRequest)
		is.True(p.has(c.want))
		is.True(p.has(`id="edit-loop"`))
		is.True(p.has(`value="` + c.form.Get("webhook_url") + `"`)) // the form shows what was sent
	}
	is.Equal(string(e.do("GET", "/v1/loops/"+id, nil).raw), string(before.raw)) // nothing changed

	p := b.post("/dashboard/loops/"+id, url.Values{"name": {"Data warehouse"}, "webhook_url": {rcv.srv.URL + "/v2"}})
	is.Equal(p.status, http.StatusSeeOther)
	is.True(strings.HasPrefix(p.location, "/dashboard/loops/"+id+"?notice="))
	after := e.do("GET", "/v1/loops/"+id, nil)
	is.Equal(after.str("data.name"), "Data warehouse")
	is.Equal(after.str("data.slug"), "data-warehouse")
	is.Equal(after.str("data.destination.url"), rcv.srv.URL+"/v2")
	is.Equal(after.get("data.enabled"), false) // the box was left unticked
	page := b.get(p.location)
	is.True(page.has("is saved"))
	is.True(page.has(`<span class="status disabled">disabled</span>`))
	is.True(!page.has(`id="run-loop"`)) // a disabled Loop does not run

	p = b.post("/dashboard/loops/"+id, url.Values{"name": {"Data warehouse"}, "webhook_url": {rcv.srv.URL + "/v2"}, "enabled": {"on"}})
	is.Equal(p.status, http.StatusSeeOther)
	is.Equal(e.do("GET", "/v1/loops/"+id, nil).get("data.enabled"), true)
}

func TestDashboardRotatingTheSecretSignsTheNextDeliveryWithTheNewOne(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	rcv := newReceiver(t)
	b := e.signIn("acme", "admin")
	created := b.post("/dashboard/loops", url.Values{"name": {"Signed"}, "webhook_url": {rcv.srv.URL}, "enabled": {"on"}})
	is.Equal(created.status, http.StatusCreated)
	old := created.loopSecret()
	id := e.onlyLoopID()

	// No grace period: the old secret stops signing at once.
	p := b.post("/dashboard/loops/"+id+"/rotate", url.Values{"grace_hours": {"0"}})
	is.Equal(p.status, http.StatusOK)
	fresh := p.loopSecret()
	is.True(strings.HasPrefix(fresh, "whsec_"))
	is.True(fresh != old)
	is.True(p.has(`data-copy="#loop-secret"`) && p.has("shown this once"))
	is.True(!b.get("/dashboard/loops/" + id).has(fresh)) // once

	e.startWorkers()
	e.testDelivery(id)
	got := rcv.wait(t, 1)[0]
	sig := got.header.Get(webhook.HeaderSignature)
	is.NoErr(webhook.Verify(got.body, sig, fresh, 0))
	is.True(webhook.Verify(got.body, sig, old, 0) != nil)
}

func TestDashboardSendTestEventShowsTheReceiversAnswer(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	rcv := newReceiver(t, http.StatusNoContent, http.StatusInternalServerError)
	b := e.signIn("acme", "admin")
	created := b.post("/dashboard/loops", url.Values{"name": {"Tested"}, "webhook_url": {rcv.srv.URL + "/in"}, "enabled": {"on"}})
	secret := created.loopSecret()
	id := e.onlyLoopID()
	e.startWorkers()

	// Without JavaScript: the whole page, the answer in it.
	p := b.post("/dashboard/loops/"+id+"/test", url.Values{})
	is.Equal(p.status, http.StatusOK)
	is.True(p.has("<html"))
	is.Equal(p.inner("test-code"), "204 No Content")
	is.True(p.has("acknowledged"))
	is.Equal(p.deliveryRows(), 1)
	got := rcv.wait(t, 1)[0]
	is.Equal(got.header.Get(webhook.HeaderEvent), "test")
	is.NoErr(webhook.Verify(got.body, got.header.Get(webhook.HeaderSignature), secret, 0))
	var body map[string]any
	is.NoErr(json.Unmarshal(got.body, &body))
	is.Equal(body, map[string]any{"event": "test", "task": nil, "data": nil, "error": nil})
	deliveryID := got.header.Get(webhook.HeaderDeliveryID)
	is.True(p.has(`href="/dashboard/deliveries/` + deliveryID + `"`))

	// With htmx: only the fragment the form targets.
	p = b.post("/dashboard/loops/"+id+"/test", url.Values{}, "HX-Request", "true", "HX-Target", "test-result")
	is.Equal(p.status, http.StatusOK)
	is.True(!p.has("<html") && !p.has(`id="edit-loop"`))
	is.True(strings.HasPrefix(strings.TrimSpace(p.body), `<div id="test-result"`))
	is.True(p.has(`<section id="deliveries" hx-swap-oob="true">`)) // the list, with the new row, comes along
	is.Equal(p.deliveryRows(), 2)
	is.Equal(p.inner("test-code"), "500 Internal Server Error")
	is.True(p.has("not acknowledged") && p.has("retried on schedule"))
	second := rcv.wait(t, 2)[1]
	is.NoErr(webhook.Verify(second.body, second.header.Get(webhook.HeaderSignature), secret, 0))
	is.True(p.has(`href="/dashboard/deliveries/` + second.header.Get(webhook.HeaderDeliveryID) + `"`))

	d := b.get("/dashboard/deliveries/" + second.header.Get(webhook.HeaderDeliveryID))
	is.Equal(d.inner("delivery-status"), "pending") // retried on schedule
	is.Equal(d.inner("delivery-code"), "500")
	is.True(d.has("the receiver answered 500 Internal Server Error"))

	// A receiver that is not there: no status code, the reason instead.
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	goneID, _ := e.createLoop("Gone", gone.URL, "company")
	p = b.post("/dashboard/loops/"+goneID+"/test", url.Values{}, "HX-Request", "true", "HX-Target", "test-result")
	is.Equal(p.status, http.StatusOK)
	is.Equal(p.inner("test-code"), "")
	is.True(strings.HasPrefix(p.inner("test-error"), "could not reach the receiver"))
}

func TestDashboardRetryNowResendsAFailedDelivery(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	rcv := newReceiver(t, 500, 500, 500, 500, 500, 500, 500)
	loopID, secret := e.createLoop("Down", rcv.srv.URL, "company")
	e.startWorkers()
	id := e.testDelivery(loopID)
	for i, wait := range []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 6 * time.Hour} {
		e.waitDelivery(loopID, attempts(i+1))
		e.clock.Add(wait)
	}
	is.Equal(e.waitDelivery(loopID, attempts(7))["status"], "failed")
	b := e.signIn("acme", "admin")
	p := b.get("/dashboard/deliveries/" + id)
	is.Equal(p.inner("delivery-status"), "failed")
	is.Equal(p.inner("delivery-attempts"), "7 of 7")
	is.Equal(p.inner("delivery-code"), "500")
	is.True(p.has(`id="retry-delivery"`))

	p = b.post("/dashboard/deliveries/"+id+"/retry", url.Values{})
	is.Equal(p.status, http.StatusSeeOther)
	is.True(strings.HasPrefix(p.location, "/dashboard/deliveries/"+id+"?notice="))
	got := rcv.wait(t, 8)[7]
	is.Equal(got.header.Get(webhook.HeaderDeliveryID), id) // the same delivery, sent again
	// Signed at the store's clock, hours ahead of the real one the check compares with.
	is.NoErr(webhook.Verify(got.body, got.header.Get(webhook.HeaderSignature), secret, 24*time.Hour))
	e.waitDelivery(loopID, attempts(8))
	p = b.get(p.location)
	is.True(p.has("due now"))
	is.Equal(p.inner("delivery-status"), "succeeded")
	is.Equal(p.inner("delivery-code"), "200")
	is.True(!p.has(`id="retry-delivery"`))

	// The store refuses to retry what succeeded: its status page says so.
	p = b.post("/dashboard/deliveries/"+id+"/retry", url.Values{})
	is.Equal(p.status, http.StatusConflict)
	is.True(p.has("already succeeded"))
	is.Equal(rcv.count(), 8)
}

func TestDashboardRunCreatesTheTaskTheAPIWould(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	rcv := newReceiver(t)
	companies, _ := e.createLoop("Companies", rcv.srv.URL, "company")
	people, _ := e.createLoop("People", rcv.srv.URL, "person")
	b := e.signIn("acme", "admin")

	p := b.post("/dashboard/loops/"+companies+"/run", url.Values{"domain": {" acme.com "}, "networkUrl": {""}})
	is.Equal(p.status, http.StatusSeeOther)
	taskID, ok := strings.CutPrefix(p.location, "/dashboard/tasks/")
	is.True(ok)
	taskID, _, _ = strings.Cut(taskID, "?")
	task := e.do("GET", "/v1/tasks/"+taskID, nil)
	is.Equal(task.status, http.StatusOK)
	is.Equal(task.str("task.loop_id"), companies)
	is.Equal(task.get("task.input"), map[string]any{"domain": "acme.com"})
	is.Equal(task.get("task.credits_charged"), 1.0)
	is.Equal(task.str("task.object_type"), "company")
	page := b.get(p.location)
	is.Equal(page.status, http.StatusOK)
	is.True(page.has(`<a href="/dashboard/loops/` + companies + `">Companies</a>`)) // the task's page names its Loop
	viaAPI := e.do("POST", "/v1/loops/"+companies+"/run", map[string]string{"domain": "acme.com"})
	is.Equal(viaAPI.get("task.input"), task.get("task.input"))
	is.Equal(viaAPI.get("task.credits_charged"), task.get("task.credits_charged"))

	p = b.post("/dashboard/loops/"+people+"/run", url.Values{"email": {"jane.smith@acme.com"}, "fullName": {"Jane Smith"}, "title": {""}})
	is.Equal(p.status, http.StatusSeeOther)
	taskID, _, _ = strings.Cut(strings.TrimPrefix(p.location, "/dashboard/tasks/"), "?")
	task = e.do("GET", "/v1/tasks/"+taskID, nil)
	is.Equal(task.str("task.loop_id"), people)
	is.Equal(task.get("task.input"), map[string]any{"email": "jane.smith@acme.com", "fullName": "Jane Smith"})
	// The address is on the task's page, never in its URL (history, proxies' logs).
	is.True(!strings.Contains(strings.ToLower(p.location), "jane"))
	page = b.get(p.location)
	is.True(page.has("jane.smith@acme.com"))
	is.True(page.has("The Loop People runs"))
	spent := e.balance("acme").Charged

	// Refused as the API refuses: the Loop's page again, the reason beside the form.
	for _, c := range []struct {
		loop   string
		form   url.Values
		status int
		want   string
	}{
		{companies, url.Values{"email": {"jane@acme.com"}}, http.StatusBadRequest, "enriches companies"},
		{people, url.Values{"domain": {"acme.com"}}, http.StatusBadRequest, "enriches people"},
		{companies, url.Values{}, http.StatusBadRequest, "send one of domain or networkUrl"},
	} {
		p := b.post("/dashboard/loops/"+c.loop+"/run", c.form)
		is.Equal(p.status, c.status)
		is.True(p.has(c.want))
		is.True(p.has(`id="run-loop"`))
	}
	is.Equal(e.do("PATCH", "/v1/loops/"+companies, map[string]any{"enabled": false}).status, http.StatusOK)
	p = b.post("/dashboard/loops/"+companies+"/run", url.Values{"domain": {"acme.com"}})
	is.Equal(p.status, http.StatusConflict)
	is.True(p.has("is disabled"))
	is.Equal(e.balance("acme").Charged, spent) // nothing charged for any of them
}

func TestDashboardDeleteLoop(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	rcv := newReceiver(t)
	id, _ := e.createLoop("Gone soon", rcv.srv.URL, "company")
	deliveryID := e.testDelivery(id)
	b := e.signIn("acme", "admin")
	p := b.post("/dashboard/loops/"+id+"/delete", url.Values{})
	is.Equal(p.status, http.StatusSeeOther)
	is.True(strings.HasPrefix(p.location, "/dashboard/loops?notice="))
	is.True(b.get(p.location).has("Gone soon is deleted"))
	is.Equal(e.do("GET", "/v1/loops/"+id, nil).status, http.StatusNotFound)
	is.Equal(b.get("/dashboard/loops/"+id).status, http.StatusNotFound)
	is.Equal(b.get("/dashboard/deliveries/"+deliveryID).status, http.StatusNotFound) // with its deliveries
}

// adminActions are the dashboard's Loop and delivery actions a viewer may not take.
func adminActions(loopID, deliveryID string) []struct {
	path string
	form url.Values
} {
	return []struct {
		path string
		form url.Values
	}{
		{"/dashboard/loops", url.Values{"name": {"Mine"}, "webhook_url": {"http://127.0.0.1:9/hook"}, "enabled": {"on"}}},
		{"/dashboard/loops/" + loopID, url.Values{"name": {"Renamed"}, "webhook_url": {"http://127.0.0.1:9/other"}}},
		{"/dashboard/loops/" + loopID + "/rotate", url.Values{}},
		{"/dashboard/loops/" + loopID + "/destination", url.Values{"enabled": {"false"}}},
		{"/dashboard/loops/" + loopID + "/test", url.Values{}},
		{"/dashboard/loops/" + loopID + "/run", url.Values{"domain": {"acme.com"}}},
		{"/dashboard/loops/" + loopID + "/delete", url.Values{}},
		{"/dashboard/deliveries/" + deliveryID + "/retry", url.Values{}},
	}
}

// loopState is everything an action on a Loop could change, as the API shows it.
func (e *env) loopState(loopID string) string {
	e.t.Helper()
	return fmt.Sprintf("%s\n%s\n%s\n%v", e.do("GET", "/v1/loops", nil).raw, e.do("GET", "/v1/loops/"+loopID+"/deliveries", nil).raw,
		e.do("GET", "/v1/tasks", nil).raw, e.balance("acme"))
}

func TestDashboardViewerIsRefusedEveryLoopAction(t *testing.T) {
	e := newEnv(t, allowPrivateWebhooks)
	loopID, _ := e.createLoop("Companies", "http://127.0.0.1:9/hook", "company")
	deliveryID := e.testDelivery(loopID)
	e.clock.Add(time.Hour) // a change would show in updated_at or next_attempt_at
	before := e.loopState(loopID)
	b := e.signIn("acme", "viewer")
	for _, a := range adminActions(loopID, deliveryID) {
		t.Run(a.path, func(t *testing.T) {
			is := is.New(t)
			p := b.post(a.path, a.form)
			is.Equal(p.status, http.StatusForbidden)
			is.True(p.has("Your role is viewer"))
		})
	}
	is.New(t).Equal(e.loopState(loopID), before) // nothing changed
}

func TestDashboardLoopsOfAnotherOrganizationAreNotFound(t *testing.T) {
	e := newEnv(t, allowPrivateWebhooks)
	loopID, _ := e.createLoop("Acme only", "http://127.0.0.1:9/hook", "company")
	deliveryID := e.testDelivery(loopID)
	e.clock.Add(time.Hour)
	before := e.loopState(loopID)
	other := e.signIn("other", "admin")

	is := is.New(t)
	list := other.get("/dashboard/loops")
	is.Equal(list.status, http.StatusOK)
	is.True(!list.has(loopID) && !list.has("Acme only"))
	for _, path := range []string{"/dashboard/loops/" + loopID, "/dashboard/deliveries/" + deliveryID, "/dashboard/loops/not-a-uuid"} {
		p := other.get(path)
		is.Equal(p.status, http.StatusNotFound)
		is.True(!p.has("Acme only"))
	}
	for _, a := range adminActions(loopID, deliveryID)[1:] { // [0] creates other's own Loop
		t.Run(a.path, func(t *testing.T) {
			is := is.New(t)
			p := other.post(a.path, a.form)
			is.Equal(p.status, http.StatusNotFound)
		})
	}
	is.Equal(e.loopState(loopID), before) // nothing changed
}

func TestDashboardLoopActionsRefuseCrossSiteForms(t *testing.T) {
	e := newEnv(t, allowPrivateWebhooks)
	loopID, _ := e.createLoop("Companies", "http://127.0.0.1:9/hook", "company")
	deliveryID := e.testDelivery(loopID)
	e.clock.Add(time.Hour)
	before := e.loopState(loopID)
	b := e.signIn("acme", "admin")
	for _, a := range adminActions(loopID, deliveryID) {
		t.Run(a.path, func(t *testing.T) {
			is := is.New(t)
			p := b.do(http.MethodPost, a.path, a.form, "Sec-Fetch-Site", "cross-site")
			is.Equal(p.status, http.StatusForbidden)
			is.True(p.has("another site"))
			p = b.do(http.MethodPost, a.path, a.form, "Origin", "https://evil.example")
			is.Equal(p.status, http.StatusForbidden)
		})
	}
	is.New(t).Equal(e.loopState(loopID), before)
}

func TestDashboardLoopDeliveriesArePaged(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	loopID, _ := e.createLoop("Busy", "http://127.0.0.1:9/hook", "company")
	var ids []string
	for range 51 {
		ids = append(ids, e.testDelivery(loopID))
		e.clock.Add(time.Millisecond)
	}
	b := e.signIn("acme", "viewer")
	first := b.get("/dashboard/loops/" + loopID)
	is.Equal(first.deliveryRows(), 50)
	is.True(first.has(ids[50]) && !first.has(ids[0])) // newest first
	is.True(first.has(`?page=2#deliveries`))
	is.True(first.has("Page 1 of 2"))
	second := b.get("/dashboard/loops/" + loopID + "?page=2")
	is.Equal(second.status, http.StatusOK)
	is.Equal(second.deliveryRows(), 1)
	is.True(second.has(ids[0]))
	is.True(second.has(`?page=1#deliveries`) && !second.has(`?page=3`))
	for _, bad := range []string{"0", "-1", "x", "202"} {
		is.Equal(b.get("/dashboard/loops/"+loopID+"?page="+bad).status, http.StatusBadRequest)
	}
}

func TestDashboardDeliveryPageWatchesAnAttemptDueSoon(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	rcv := newReceiver(t)
	loopID, _ := e.createLoop("Hooks", rcv.srv.URL, "company")
	id := e.testDelivery(loopID) // no sender runs: it stays pending, due now
	b := e.signIn("acme", "viewer")

	p := b.get("/dashboard/deliveries/" + id)
	is.Equal(p.inner("delivery-status"), "pending")
	is.True(p.has(`hx-trigger="load delay:2s"`))                                   // htmx asks again...
	is.True(p.has(`<noscript><meta http-equiv="refresh" content="2"></noscript>`)) // ...and so does a browser without scripts
	is.True(p.has(`id="delivery-payload"`))

	// What htmx asks for is the changing part alone.
	frag := b.get("/dashboard/deliveries/"+id, "HX-Request", "true", "HX-Target", "delivery-live")
	is.Equal(frag.status, http.StatusOK)
	is.True(strings.HasPrefix(strings.TrimSpace(frag.body), `<section id="delivery-live"`))
	is.True(!frag.has("<html") && !frag.has(`id="delivery-payload"`))
	is.Equal(frag.inner("delivery-status"), "pending")

	// An attempt hours away is not watched every two seconds.
	e.clock.Add(-2 * time.Hour)
	p = b.get("/dashboard/deliveries/" + id)
	is.Equal(p.inner("delivery-status"), "pending")
	is.True(!p.has("hx-trigger") && !p.has("http-equiv"))
	e.clock.Add(2 * time.Hour)

	// Once it settles, nothing asks again.
	e.startWorkers()
	e.waitDelivery(loopID, attempts(1))
	p = b.get("/dashboard/deliveries/" + id)
	is.Equal(p.inner("delivery-status"), "succeeded")
	is.True(!p.has("hx-trigger") && !p.has("http-equiv"))
}
