package dashboard_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"enrichd/server/servertest"
	"enrichd/webhook"

	"github.com/matryer/is"
)

func TestDashboardLoopPagesForBothRoles(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t)
	loopID, secret := e.CreateLoop("CRM sync", rcv.Srv.URL+"/hook", "company")
	deliveryID := e.SendTestDelivery(loopID) // pending: no sender runs
	for _, role := range []string{"admin", "viewer"} {
		t.Run(role, func(t *testing.T) {
			is := is.New(t)
			b := e.SignIn("acme", role)
			admin := role == "admin"

			p := b.Get("/dashboard/loops")
			is.Equal(p.Status, http.StatusOK)
			is.True(p.Has(`href="/dashboard/loops/` + loopID + `"`))
			is.True(p.Has("CRM sync") && p.Has("crm-sync") && p.Has(rcv.Srv.URL+"/hook"))
			is.True(p.Has(`<span class="status enabled">enabled</span>`))
			is.Equal(p.Has(`id="create-loop"`), admin) // a viewer is not offered what it may not do

			p = b.Get("/dashboard/loops/" + loopID)
			is.Equal(p.Status, http.StatusOK)
			is.True(p.Has("CRM sync") && p.Has(loopID) && p.Has(rcv.Srv.URL+"/hook"))
			is.Equal(p.DeliveryRows(), 1)
			is.True(p.Has(`href="/dashboard/deliveries/` + deliveryID + `"`))
			is.True(p.Has(`<span class="status pending">pending</span>`))
			for _, form := range []string{`id="edit-loop"`, `id="test-loop"`, `id="run-loop"`, `id="rotate-loop"`, `id="delete-loop"`} {
				is.Equal(p.Has(form), admin)
			}
			is.True(!p.Has(secret) && p.ShownSecret() == "") // never on a later page

			p = b.Get("/dashboard/deliveries/" + deliveryID)
			is.Equal(p.Status, http.StatusOK)
			is.Equal(p.Inner("delivery-status"), "pending")
			is.Equal(p.Inner("delivery-code"), "—")
			is.True(strings.Contains(p.Body, `id="delivery-payload"`))
			is.True(p.Has("&#34;event&#34;: &#34;test&#34;")) // the payload, indented
			is.True(p.Has("none: a test event"))
			is.Equal(p.Has(`id="retry-delivery"`), admin)
		})
	}
}

func TestDashboardCreatesTheLoopTheAPIWould(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t)
	b := e.SignIn("acme", "admin")

	p := b.Post("/dashboard/loops", url.Values{"name": {"  People feed "}, "webhook_url": {rcv.Srv.URL + "/people"},
		"object_type": {"person"}, "enabled": {"on"}})
	is.Equal(p.Status, http.StatusCreated)
	secret := p.LoopSecret()
	is.True(strings.HasPrefix(secret, "whsec_"))
	is.True(p.Has(`data-copy="#loop-secret"`))
	is.True(p.Has("shown this once"))
	is.Equal(p.Header.Get("Cache-Control"), "no-store")
	id := e.OnlyLoopID()
	is.True(p.Has(`action="/dashboard/loops/` + id + `"`)) // the Loop's own page

	// The same Loop as one the API makes from the same fields.
	fromAPI := e.Do("POST", "/v1/loops", map[string]any{"name": "People feed", "webhook_url": rcv.Srv.URL + "/people", "object_type": "person", "enabled": true})
	is.Equal(fromAPI.Status, http.StatusCreated)
	got := e.Do("GET", "/v1/loops/"+id, nil)
	is.Equal(got.Status, http.StatusOK)
	for _, field := range []string{"name", "object_type", "operation", "destination.kind", "destination.url"} {
		is.Equal(got.Str("data."+field), fromAPI.Str("data."+field))
	}
	is.Equal(got.Get("data.enabled"), true)
	is.Equal(got.Get("data.destination.enabled"), true)
	is.Equal(got.Str("data.slug"), "people-feed")
	is.Equal(fromAPI.Str("data.slug"), "people-feed-2") // the slug was taken by the dashboard's
	is.True(!got.Has("data.destination.secret"))

	// The secret is not shown again: not on the Loop's page, not in the list.
	for _, path := range []string{"/dashboard/loops/" + id, "/dashboard/loops"} {
		p = b.Get(path)
		is.Equal(p.Status, http.StatusOK)
		is.True(!p.Has(secret))
		is.Equal(p.LoopSecret(), "")
	}

	// An unticked box makes a disabled Loop; no object type is a company Loop.
	p = b.Post("/dashboard/loops", url.Values{"name": {"Paused"}, "webhook_url": {rcv.Srv.URL}})
	is.Equal(p.Status, http.StatusCreated)
	var paused map[string]any
	for _, l := range e.LoopsOf(e.Key) {
		if l.(map[string]any)["name"] == "Paused" {
			paused = l.(map[string]any)
		}
	}
	is.Equal(paused["enabled"], false)
	is.Equal(paused["object_type"], "company")
}

func TestDashboardCreateLoopRefusesWhatTheAPIRefuses(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t) // https and public addresses only
	b := e.SignIn("acme", "admin")
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
			p := b.Post("/dashboard/loops", c.form)
			is.Equal(p.Status, http.StatusBadRequest)
			is.True(p.Has(`class="error"`))
			is.True(p.Has(c.want))
			is.True(p.Has(`id="create-loop"`)) // the form again
			if name := c.form.Get("name"); name != "" && len(name) < 100 && c.name != "too long a field" {
				is.True(p.Has(`value="` + strings.TrimSpace(name) + `"`)) // with what was typed
			}
			is.Equal(p.LoopSecret(), "")
		})
	}
	is.New(t).Equal(len(e.LoopsOf(e.Key)), 0) // nothing created

	// A message that quotes a command, as Markdown does, shows it as code: no backticks.
	p := b.Post("/dashboard/loops", url.Values{"name": {"Plain"}, "webhook_url": {"http://hooks.example.com/in"}})
	is := is.New(t)
	is.Equal(p.Status, http.StatusBadRequest)
	is.True(p.Has("<code>enrichd serve --allow-private-webhooks</code>"))
	is.True(!p.Has("`"))
}

func TestDashboardEditLoop(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t)
	id, _ := e.CreateLoop("Warehouse", rcv.Srv.URL+"/v1", "company")
	b := e.SignIn("acme", "admin")

	before := e.Do("GET", "/v1/loops/"+id, nil)
	e.Clock.Add(time.Minute)
	for _, c := range []struct {
		form url.Values
		want string
	}{
		{url.Values{"name": {"Warehouse 2"}, "webhook_url": {"ftp://example.com/"}, "enabled": {"on"}}, `must use https, not &#34;ftp&#34;`},
		{url.Values{"name": {"Warehouse 2"}, "webhook_url": {"hooks"}, "enabled": {"on"}}, "is not an absolute URL"},
		{url.Values{"name": {"  "}, "webhook_url": {rcv.Srv.URL + "/v2"}}, "name must be 1 to 200 characters, not blank"},
	} {
		p := b.Post("/dashboard/loops/"+id, c.form)
		is.Equal(p.Status, http.StatusBadRequest)
		is.True(p.Has(c.want))
		is.True(p.Has(`id="edit-loop"`))
		is.True(p.Has(`value="` + c.form.Get("webhook_url") + `"`)) // the form shows what was sent
	}
	is.Equal(string(e.Do("GET", "/v1/loops/"+id, nil).Raw), string(before.Raw)) // nothing changed

	p := b.Post("/dashboard/loops/"+id, url.Values{"name": {"Data warehouse"}, "webhook_url": {rcv.Srv.URL + "/v2"}})
	is.Equal(p.Status, http.StatusSeeOther)
	is.True(strings.HasPrefix(p.Location, "/dashboard/loops/"+id+"?notice="))
	after := e.Do("GET", "/v1/loops/"+id, nil)
	is.Equal(after.Str("data.name"), "Data warehouse")
	is.Equal(after.Str("data.slug"), "data-warehouse")
	is.Equal(after.Str("data.destination.url"), rcv.Srv.URL+"/v2")
	is.Equal(after.Get("data.enabled"), false) // the box was left unticked
	page := b.Get(p.Location)
	is.True(page.Has("is saved"))
	is.True(page.Has(`<span class="status disabled">disabled</span>`))
	is.True(!page.Has(`id="run-loop"`)) // a disabled Loop does not run

	p = b.Post("/dashboard/loops/"+id, url.Values{"name": {"Data warehouse"}, "webhook_url": {rcv.Srv.URL + "/v2"}, "enabled": {"on"}})
	is.Equal(p.Status, http.StatusSeeOther)
	is.Equal(e.Do("GET", "/v1/loops/"+id, nil).Get("data.enabled"), true)
}

func TestDashboardRotatingTheSecretSignsTheNextDeliveryWithTheNewOne(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t)
	b := e.SignIn("acme", "admin")
	created := b.Post("/dashboard/loops", url.Values{"name": {"Signed"}, "webhook_url": {rcv.Srv.URL}, "enabled": {"on"}})
	is.Equal(created.Status, http.StatusCreated)
	old := created.LoopSecret()
	id := e.OnlyLoopID()

	// No grace period: the old secret stops signing at once.
	p := b.Post("/dashboard/loops/"+id+"/rotate", url.Values{"grace_hours": {"0"}})
	is.Equal(p.Status, http.StatusOK)
	fresh := p.LoopSecret()
	is.True(strings.HasPrefix(fresh, "whsec_"))
	is.True(fresh != old)
	is.True(p.Has(`data-copy="#loop-secret"`) && p.Has("shown this once"))
	is.True(!b.Get("/dashboard/loops/" + id).Has(fresh)) // once

	e.StartWorkers()
	e.SendTestDelivery(id)
	got := rcv.Wait(t, 1)[0]
	sig := got.Header.Get(webhook.HeaderSignature)
	is.NoErr(webhook.Verify(got.Body, sig, fresh, 0))
	is.True(webhook.Verify(got.Body, sig, old, 0) != nil)
}

func TestDashboardSendTestEventShowsTheReceiversAnswer(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t, http.StatusNoContent, http.StatusInternalServerError)
	b := e.SignIn("acme", "admin")
	created := b.Post("/dashboard/loops", url.Values{"name": {"Tested"}, "webhook_url": {rcv.Srv.URL + "/in"}, "enabled": {"on"}})
	secret := created.LoopSecret()
	id := e.OnlyLoopID()
	e.StartWorkers()

	// Without JavaScript: the whole page, the answer in it.
	p := b.Post("/dashboard/loops/"+id+"/test", url.Values{})
	is.Equal(p.Status, http.StatusOK)
	is.True(p.Has("<html"))
	is.Equal(p.Inner("test-code"), "204 No Content")
	is.True(p.Has("acknowledged"))
	is.Equal(p.DeliveryRows(), 1)
	got := rcv.Wait(t, 1)[0]
	is.Equal(got.Header.Get(webhook.HeaderEvent), "test")
	is.NoErr(webhook.Verify(got.Body, got.Header.Get(webhook.HeaderSignature), secret, 0))
	var body map[string]any
	is.NoErr(json.Unmarshal(got.Body, &body))
	is.Equal(body, map[string]any{"event": "test", "task": nil, "data": nil, "error": nil})
	deliveryID := got.Header.Get(webhook.HeaderDeliveryID)
	is.True(p.Has(`href="/dashboard/deliveries/` + deliveryID + `"`))

	// With htmx: only the fragment the form targets.
	p = b.Post("/dashboard/loops/"+id+"/test", url.Values{}, "HX-Request", "true", "HX-Target", "test-result")
	is.Equal(p.Status, http.StatusOK)
	is.True(!p.Has("<html") && !p.Has(`id="edit-loop"`))
	is.True(strings.HasPrefix(strings.TrimSpace(p.Body), `<div id="test-result"`))
	is.True(p.Has(`<section id="deliveries" hx-swap-oob="true">`)) // the list, with the new row, comes along
	is.Equal(p.DeliveryRows(), 2)
	is.Equal(p.Inner("test-code"), "500 Internal Server Error")
	is.True(p.Has("not acknowledged") && p.Has("retried on schedule"))
	second := rcv.Wait(t, 2)[1]
	is.NoErr(webhook.Verify(second.Body, second.Header.Get(webhook.HeaderSignature), secret, 0))
	is.True(p.Has(`href="/dashboard/deliveries/` + second.Header.Get(webhook.HeaderDeliveryID) + `"`))

	d := b.Get("/dashboard/deliveries/" + second.Header.Get(webhook.HeaderDeliveryID))
	is.Equal(d.Inner("delivery-status"), "pending") // retried on schedule
	is.Equal(d.Inner("delivery-code"), "500")
	is.True(d.Has("the receiver answered 500 Internal Server Error"))

	// A receiver that is not there: no status code, the reason instead.
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	goneID, _ := e.CreateLoop("Gone", gone.URL, "company")
	p = b.Post("/dashboard/loops/"+goneID+"/test", url.Values{}, "HX-Request", "true", "HX-Target", "test-result")
	is.Equal(p.Status, http.StatusOK)
	is.Equal(p.Inner("test-code"), "")
	is.True(strings.HasPrefix(p.Inner("test-error"), "could not reach the receiver"))
}

func TestDashboardRetryNowResendsAFailedDelivery(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t, 500, 500, 500, 500, 500, 500, 500)
	loopID, secret := e.CreateLoop("Down", rcv.Srv.URL, "company")
	e.StartWorkers()
	id := e.SendTestDelivery(loopID)
	for i, wait := range []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 6 * time.Hour} {
		e.WaitDelivery(loopID, servertest.Attempts(i+1))
		e.Clock.Add(wait)
	}
	is.Equal(e.WaitDelivery(loopID, servertest.Attempts(7))["status"], "failed")
	b := e.SignIn("acme", "admin")
	p := b.Get("/dashboard/deliveries/" + id)
	is.Equal(p.Inner("delivery-status"), "failed")
	is.Equal(p.Inner("delivery-attempts"), "7 of 7")
	is.Equal(p.Inner("delivery-code"), "500")
	is.True(p.Has(`id="retry-delivery"`))

	p = b.Post("/dashboard/deliveries/"+id+"/retry", url.Values{})
	is.Equal(p.Status, http.StatusSeeOther)
	is.True(strings.HasPrefix(p.Location, "/dashboard/deliveries/"+id+"?notice="))
	got := rcv.Wait(t, 8)[7]
	is.Equal(got.Header.Get(webhook.HeaderDeliveryID), id) // the same delivery, sent again
	// Signed at the store's clock, hours ahead of the real one the check compares with.
	is.NoErr(webhook.Verify(got.Body, got.Header.Get(webhook.HeaderSignature), secret, 24*time.Hour))
	e.WaitDelivery(loopID, servertest.Attempts(8))
	p = b.Get(p.Location)
	is.True(p.Has("due now"))
	is.Equal(p.Inner("delivery-status"), "succeeded")
	is.Equal(p.Inner("delivery-code"), "200")
	is.True(!p.Has(`id="retry-delivery"`))

	// The store refuses to retry what succeeded: its status page says so.
	p = b.Post("/dashboard/deliveries/"+id+"/retry", url.Values{})
	is.Equal(p.Status, http.StatusConflict)
	is.True(p.Has("already succeeded"))
	is.Equal(rcv.Count(), 8)
}

func TestDashboardRunCreatesTheTaskTheAPIWould(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t)
	companies, _ := e.CreateLoop("Companies", rcv.Srv.URL, "company")
	people, _ := e.CreateLoop("People", rcv.Srv.URL, "person")
	b := e.SignIn("acme", "admin")

	p := b.Post("/dashboard/loops/"+companies+"/run", url.Values{"domain": {" acme.com "}, "networkUrl": {""}})
	is.Equal(p.Status, http.StatusSeeOther)
	taskID, ok := strings.CutPrefix(p.Location, "/dashboard/tasks/")
	is.True(ok)
	taskID, _, _ = strings.Cut(taskID, "?")
	task := e.Do("GET", "/v1/tasks/"+taskID, nil)
	is.Equal(task.Status, http.StatusOK)
	is.Equal(task.Str("task.loop_id"), companies)
	is.Equal(task.Get("task.input"), map[string]any{"domain": "acme.com"})
	is.Equal(task.Get("task.credits_charged"), 1.0)
	is.Equal(task.Str("task.object_type"), "company")
	page := b.Get(p.Location)
	is.Equal(page.Status, http.StatusOK)
	is.True(page.Has(`<a href="/dashboard/loops/` + companies + `">Companies</a>`)) // the task's page names its Loop
	viaAPI := e.Do("POST", "/v1/loops/"+companies+"/run", map[string]string{"domain": "acme.com"})
	is.Equal(viaAPI.Get("task.input"), task.Get("task.input"))
	is.Equal(viaAPI.Get("task.credits_charged"), task.Get("task.credits_charged"))

	p = b.Post("/dashboard/loops/"+people+"/run", url.Values{"email": {"jane.smith@acme.com"}, "fullName": {"Jane Smith"}, "title": {""}})
	is.Equal(p.Status, http.StatusSeeOther)
	taskID, _, _ = strings.Cut(strings.TrimPrefix(p.Location, "/dashboard/tasks/"), "?")
	task = e.Do("GET", "/v1/tasks/"+taskID, nil)
	is.Equal(task.Str("task.loop_id"), people)
	is.Equal(task.Get("task.input"), map[string]any{"email": "jane.smith@acme.com", "fullName": "Jane Smith"})
	// The address is on the task's page, never in its URL (history, proxies' logs).
	is.True(!strings.Contains(strings.ToLower(p.Location), "jane"))
	page = b.Get(p.Location)
	is.True(page.Has("jane.smith@acme.com"))
	is.True(page.Has("The Loop People runs"))
	spent := e.Balance("acme").Charged

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
		p := b.Post("/dashboard/loops/"+c.loop+"/run", c.form)
		is.Equal(p.Status, c.status)
		is.True(p.Has(c.want))
		is.True(p.Has(`id="run-loop"`))
	}
	is.Equal(e.Do("PATCH", "/v1/loops/"+companies, map[string]any{"enabled": false}).Status, http.StatusOK)
	p = b.Post("/dashboard/loops/"+companies+"/run", url.Values{"domain": {"acme.com"}})
	is.Equal(p.Status, http.StatusConflict)
	is.True(p.Has("is disabled"))
	is.Equal(e.Balance("acme").Charged, spent) // nothing charged for any of them
}

func TestDashboardDeleteLoop(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t)
	id, _ := e.CreateLoop("Gone soon", rcv.Srv.URL, "company")
	deliveryID := e.SendTestDelivery(id)
	b := e.SignIn("acme", "admin")
	p := b.Post("/dashboard/loops/"+id+"/delete", url.Values{})
	is.Equal(p.Status, http.StatusSeeOther)
	is.True(strings.HasPrefix(p.Location, "/dashboard/loops?notice="))
	is.True(b.Get(p.Location).Has("Gone soon is deleted"))
	is.Equal(e.Do("GET", "/v1/loops/"+id, nil).Status, http.StatusNotFound)
	is.Equal(b.Get("/dashboard/loops/"+id).Status, http.StatusNotFound)
	is.Equal(b.Get("/dashboard/deliveries/"+deliveryID).Status, http.StatusNotFound) // with its deliveries
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

func TestDashboardViewerIsRefusedEveryLoopAction(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	loopID, _ := e.CreateLoop("Companies", "http://127.0.0.1:9/hook", "company")
	deliveryID := e.SendTestDelivery(loopID)
	e.Clock.Add(time.Hour) // a change would show in updated_at or next_attempt_at
	before := e.LoopState(loopID)
	b := e.SignIn("acme", "viewer")
	for _, a := range adminActions(loopID, deliveryID) {
		t.Run(a.path, func(t *testing.T) {
			is := is.New(t)
			p := b.Post(a.path, a.form)
			is.Equal(p.Status, http.StatusForbidden)
			is.True(p.Has("Your role is viewer"))
		})
	}
	is.New(t).Equal(e.LoopState(loopID), before) // nothing changed
}

func TestDashboardLoopsOfAnotherOrganizationAreNotFound(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	loopID, _ := e.CreateLoop("Acme only", "http://127.0.0.1:9/hook", "company")
	deliveryID := e.SendTestDelivery(loopID)
	e.Clock.Add(time.Hour)
	before := e.LoopState(loopID)
	other := e.SignIn("other", "admin")

	is := is.New(t)
	list := other.Get("/dashboard/loops")
	is.Equal(list.Status, http.StatusOK)
	is.True(!list.Has(loopID) && !list.Has("Acme only"))
	for _, path := range []string{"/dashboard/loops/" + loopID, "/dashboard/deliveries/" + deliveryID, "/dashboard/loops/not-a-uuid"} {
		p := other.Get(path)
		is.Equal(p.Status, http.StatusNotFound)
		is.True(!p.Has("Acme only"))
	}
	for _, a := range adminActions(loopID, deliveryID)[1:] { // [0] creates other's own Loop
		t.Run(a.path, func(t *testing.T) {
			is := is.New(t)
			p := other.Post(a.path, a.form)
			is.Equal(p.Status, http.StatusNotFound)
		})
	}
	is.Equal(e.LoopState(loopID), before) // nothing changed
}

func TestDashboardLoopActionsRefuseCrossSiteForms(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	loopID, _ := e.CreateLoop("Companies", "http://127.0.0.1:9/hook", "company")
	deliveryID := e.SendTestDelivery(loopID)
	e.Clock.Add(time.Hour)
	before := e.LoopState(loopID)
	b := e.SignIn("acme", "admin")
	for _, a := range adminActions(loopID, deliveryID) {
		t.Run(a.path, func(t *testing.T) {
			is := is.New(t)
			p := b.Do(http.MethodPost, a.path, a.form, "Sec-Fetch-Site", "cross-site")
			is.Equal(p.Status, http.StatusForbidden)
			is.True(p.Has("another site"))
			p = b.Do(http.MethodPost, a.path, a.form, "Origin", "https://evil.example")
			is.Equal(p.Status, http.StatusForbidden)
		})
	}
	is.New(t).Equal(e.LoopState(loopID), before)
}

func TestDashboardLoopDeliveriesArePaged(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	loopID, _ := e.CreateLoop("Busy", "http://127.0.0.1:9/hook", "company")
	var ids []string
	for range 51 {
		ids = append(ids, e.SendTestDelivery(loopID))
		e.Clock.Add(time.Millisecond)
	}
	b := e.SignIn("acme", "viewer")
	first := b.Get("/dashboard/loops/" + loopID)
	is.Equal(first.DeliveryRows(), 50)
	is.True(first.Has(ids[50]) && !first.Has(ids[0])) // newest first
	is.True(first.Has(`?page=2#deliveries`))
	is.True(first.Has("Page 1 of 2"))
	second := b.Get("/dashboard/loops/" + loopID + "?page=2")
	is.Equal(second.Status, http.StatusOK)
	is.Equal(second.DeliveryRows(), 1)
	is.True(second.Has(ids[0]))
	is.True(second.Has(`?page=1#deliveries`) && !second.Has(`?page=3`))
	for _, bad := range []string{"0", "-1", "x", "202"} {
		is.Equal(b.Get("/dashboard/loops/"+loopID+"?page="+bad).Status, http.StatusBadRequest)
	}
}

func TestDashboardDeliveryPageWatchesAnAttemptDueSoon(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t)
	loopID, _ := e.CreateLoop("Hooks", rcv.Srv.URL, "company")
	id := e.SendTestDelivery(loopID) // no sender runs: it stays pending, due now
	b := e.SignIn("acme", "viewer")

	p := b.Get("/dashboard/deliveries/" + id)
	is.Equal(p.Inner("delivery-status"), "pending")
	is.True(p.Has(`hx-trigger="load delay:2s"`))                                   // htmx asks again...
	is.True(p.Has(`<noscript><meta http-equiv="refresh" content="2"></noscript>`)) // ...and so does a browser without scripts
	is.True(p.Has(`id="delivery-payload"`))

	// What htmx asks for is the changing part alone.
	frag := b.Get("/dashboard/deliveries/"+id, "HX-Request", "true", "HX-Target", "delivery-live")
	is.Equal(frag.Status, http.StatusOK)
	is.True(strings.HasPrefix(strings.TrimSpace(frag.Body), `<section id="delivery-live"`))
	is.True(!frag.Has("<html") && !frag.Has(`id="delivery-payload"`))
	is.Equal(frag.Inner("delivery-status"), "pending")

	// An attempt hours away is not watched every two seconds.
	e.Clock.Add(-2 * time.Hour)
	p = b.Get("/dashboard/deliveries/" + id)
	is.Equal(p.Inner("delivery-status"), "pending")
	is.True(!p.Has("hx-trigger") && !p.Has("http-equiv"))
	e.Clock.Add(2 * time.Hour)

	// Once it settles, nothing asks again.
	e.StartWorkers()
	e.WaitDelivery(loopID, servertest.Attempts(1))
	p = b.Get("/dashboard/deliveries/" + id)
	is.Equal(p.Inner("delivery-status"), "succeeded")
	is.True(!p.Has("hx-trigger") && !p.Has("http-equiv"))
}
