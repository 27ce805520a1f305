package dashboard_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/server/servertest"

	"github.com/matryer/is"
)

func TestDashboardTaskListFilters(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t)
	loopID, _ := e.CreateLoop("CRM sync", rcv.Srv.URL, "company")

	e.Clock.Add(-72 * time.Hour)
	e.EnrichCompany(map[string]string{"domain": "old.com"})
	e.Clock.Add(72 * time.Hour)
	now := e.Clock.Now().UTC()
	today, oldDay := now.Format("2006-01-02"), now.Add(-72*time.Hour).Format("2006-01-02")
	e.EnrichCompany(map[string]string{"domain": "acme.com"})
	person := e.Do("POST", "/v1/people/enrich", map[string]string{"networkUrl": "https://www.linkedin.com/in/jane-doe"})
	is.Equal(person.Status, http.StatusAccepted)
	e.EnrichCompany(map[string]string{"domain": "loop.com", "loop_id": loopID})
	canceled := e.EnrichCompany(map[string]string{"domain": "canceled.com"})
	is.Equal(e.Do("POST", "/v1/tasks/"+canceled+"/cancel", nil).Status, http.StatusOK)
	profile := "https://www.linkedin.com/in/jane-doe"

	browsers := map[string]*servertest.Browser{"admin": e.SignIn("acme", "admin"), "viewer": e.SignIn("acme", "viewer")}
	for _, b := range browsers {
		p := b.Get("/dashboard/tasks")
		is.Equal(p.Status, http.StatusOK)
		is.Equal(p.TaskRows(), []string{"canceled.com", "loop.com", profile, "acme.com", "old.com"}) // newest first
		is.True(p.Has("5 tasks in all"))
		is.True(p.Has(`<form method="get" action="/dashboard/tasks"`))
		is.True(p.Has(`<option value="` + loopID + `">CRM sync</option>`)) // the org's Loops to filter by
		is.True(p.Has(`<a href="/dashboard/loops/` + loopID + `">CRM sync</a>`))
		is.True(p.Has(`<span class="status canceled">canceled</span>`))
		is.True(p.Has(`href="/dashboard/tasks/` + canceled + `"`))
		is.Equal(p.Link("next"), "") // one page
		is.Equal(p.Link("first"), "")
	}

	b := browsers["viewer"]
	for _, tc := range []struct {
		query string
		want  []string
		total string // the count shown, "" when none is
	}{
		{"status=canceled", []string{"canceled.com"}, "1 canceled task in all"},
		{"status=queued", []string{"loop.com", profile, "acme.com", "old.com"}, "4 queued tasks in all"},
		{"status=succeeded", nil, "0 succeeded tasks in all"},
		{"type=person", []string{profile}, ""},
		{"type=company&status=queued", []string{"loop.com", "acme.com", "old.com"}, ""},
		{"loop=" + loopID, []string{"loop.com"}, ""},
		{"from=" + today, []string{"canceled.com", "loop.com", profile, "acme.com"}, ""},
		{"to=" + oldDay, []string{"old.com"}, ""},
		{"from=" + oldDay + "&to=" + oldDay, []string{"old.com"}, ""},
		{"from=" + today + "&to=" + today + "&type=company", []string{"canceled.com", "loop.com", "acme.com"}, ""},
		// The form sends every field, the empty ones too: they do not filter.
		{"status=&type=&loop=&from=&to=", []string{"canceled.com", "loop.com", profile, "acme.com", "old.com"}, "5 tasks in all"},
	} {
		p := b.Get("/dashboard/tasks?" + tc.query)
		is.Equal(p.Status, http.StatusOK)
		is.Equal(p.TaskRows(), tc.want) // the rows of the filter
		if tc.total != "" {
			is.True(p.Has(tc.total))
		} else {
			is.True(!p.Has("in all"))
		}
	}
	// The form shows the filter it was sent.
	p := b.Get("/dashboard/tasks?status=queued&type=company&loop=" + loopID + "&from=" + oldDay + "&to=" + today)
	is.True(p.Has(`<option value="queued" selected>`))
	is.True(p.Has(`<option value="company" selected>`))
	is.True(p.Has(`<option value="` + loopID + `" selected>`))
	is.True(p.Has(`name="from" value="` + oldDay + `"`))
	is.True(p.Has(`name="to" value="` + today + `"`))

	for _, tc := range []struct{ query, says string }{
		{"status=stuck", "is not one of queued, running, succeeded, failed, canceled"},
		{"type=robot", "is neither company nor person"},
		{"loop=crm", "is not the id of a Loop"},
		{"from=yesterday", "is not a date like 2025-01-31"},
		{"to=2025-02-30", "is not a date like 2025-01-31"},
		{"from=" + today + "&to=" + oldDay, "is after the to date"},
		{"before=42", "the page cursor is not one this server gave"},
	} {
		p := b.Get("/dashboard/tasks?" + tc.query)
		is.Equal(p.Status, http.StatusBadRequest)
		is.True(p.Has(tc.says))
	}

	// Another organization's Loop selects nothing, and its tasks never show.
	otherKey, _ := e.NewOrg("other", 100)
	e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "other.com"}, "Authorization", "Bearer "+otherKey)
	is.Equal(len(b.Get("/dashboard/tasks").TaskRows()), 5)
	other := e.SignIn("other", "viewer")
	is.Equal(other.Get("/dashboard/tasks").TaskRows(), []string{"other.com"})
	is.Equal(other.Get("/dashboard/tasks?loop="+loopID).TaskRows(), nil)
}

func TestDashboardTaskListPagesByCursor(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	is.NoErr(e.DB.SeedTasks(context.Background(), e.OrgID, 120)) // seed-0.com is the oldest
	b := e.SignIn("acme", "viewer")

	var seen []string
	p := b.Get("/dashboard/tasks")
	for pages := 1; ; pages++ {
		is.Equal(p.Status, http.StatusOK)
		rows := p.TaskRows()
		is.True(len(rows) <= 50)
		seen = append(seen, rows...)
		if pages > 1 {
			is.Equal(p.Link("first"), "/dashboard/tasks") // back to the newest
		} else {
			is.Equal(p.Link("first"), "")
		}
		next := p.Link("next")
		if next == "" {
			is.Equal(pages, 3) // 50 + 50 + 20
			break
		}
		is.True(strings.HasPrefix(next, "/dashboard/tasks?before="))
		p = b.Get(next)
	}
	is.Equal(len(seen), 120)
	for i, target := range seen {
		is.Equal(target, fmt.Sprintf("seed-%d.com", 119-i)) // newest first, none twice, none missed
	}
	is.True(p.Has("120 tasks in all"))

	// The filter goes along from page to page.
	p = b.Get("/dashboard/tasks?status=succeeded&type=company")
	next := p.Link("next")
	q, err := url.ParseQuery(strings.TrimPrefix(next, "/dashboard/tasks?"))
	is.NoErr(err)
	is.Equal(q.Get("status"), "succeeded")
	is.Equal(q.Get("type"), "company")
	is.True(q.Get("before") != "")
	p = b.Get(next)
	is.Equal(p.TaskRows()[0], "seed-69.com")
	is.Equal(p.Link("first"), "/dashboard/tasks?status=succeeded&type=company")
}

func TestDashboardTaskPage(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	id := e.EnrichCompany(map[string]string{"domain": "HTTPS://WWW.Acme.COM/about"})
	admin, viewer := e.SignIn("acme", "admin"), e.SignIn("acme", "viewer")

	for _, b := range []*servertest.Browser{admin, viewer} {
		p := b.Get("/dashboard/tasks/" + id)
		is.Equal(p.Status, http.StatusOK)
		is.Equal(p.TaskStatus(), "queued")
		is.True(p.Has(`<span id="task-status" class="status queued">queued</span>`))
		is.True(p.Has(`id="task-credits">1<`))
		is.True(p.Has("&#34;domain&#34;: &#34;HTTPS://WWW.Acme.COM/about&#34;")) // the input as sent, pretty
		is.True(p.Has("<code>acme.com</code>"))                                  // the target
		// Unsettled, it asks again as Retry-After says: htmx polls the live part; without
		// JavaScript the page refreshes itself.
		is.True(p.Has(`hx-get="/dashboard/tasks/` + id + `" hx-trigger="load delay:2s" hx-target="this" hx-swap="outerHTML"`))
		is.True(p.Has(`<noscript><meta http-equiv="refresh" content="2"></noscript>`))
		is.True(!p.Has(`id="task-result"`))
		is.Equal(p.Has(`action="/dashboard/tasks/`+id+`/cancel"`), b == admin) // a viewer is not offered to cancel
	}

	// What htmx asks for is the live part alone.
	frag := viewer.Get("/dashboard/tasks/"+id, "HX-Request", "true", "HX-Target", "task-live")
	is.Equal(frag.Status, http.StatusOK)
	is.True(strings.HasPrefix(strings.TrimSpace(frag.Body), `<section id="task-live"`))
	is.True(!frag.Has("<html"))
	is.True(frag.Has(`id="task-status" class="status queued">queued<`))

	// Another organization's task, and one that does not exist, are not found.
	other := e.SignIn("other", "admin")
	is.Equal(other.Get("/dashboard/tasks/"+id).Status, http.StatusNotFound)
	is.Equal(other.Get("/dashboard/tasks/"+id, "HX-Request", "true", "HX-Target", "task-live").Status, http.StatusNotFound)
	is.Equal(viewer.Get("/dashboard/tasks/0190b5d4-0000-7000-8000-000000000000").Status, http.StatusNotFound)
	is.Equal(viewer.Get("/dashboard/tasks/"+strings.Repeat("x", 500)).Status, http.StatusNotFound)

	// Settled: the result, pretty, and no more polling.
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	e.StartWorkers()
	e.WaitSettled(id)
	p := viewer.Get("/dashboard/tasks/" + id)
	is.Equal(p.TaskStatus(), "succeeded")
	is.True(p.Has(`<pre id="task-result" tabindex="0" aria-label="The result, as JSON">{`))
	is.True(p.Has(`  &#34;name&#34;: &#34;Acme&#34;,`))
	is.True(p.Has(`<details class="raw" id="task-json">`)) // the JSON behind its toggle, the card in front
	is.True(p.Has(`<h3 id="company-name">Acme</h3>`))
	is.True(!p.Has("hx-get") && !p.Has("hx-trigger"))
	is.True(!p.Has(`http-equiv="refresh"`))
	is.True(p.Has(`id="task-balance">99<`))
	is.True(!p.Has(`/cancel"`))
	frag = viewer.Get("/dashboard/tasks/"+id, "HX-Request", "true", "HX-Target", "task-live")
	is.True(!frag.Has("hx-trigger")) // the last poll's answer stops the polling
	is.True(frag.Has(`id="task-result"`))
}

func TestDashboardTaskPageShowsFailureAndDeliveries(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t)
	loopID, _ := e.CreateLoop("CRM sync", rcv.Srv.URL, "company")
	e.StartWorkers()
	id := e.EnrichCompany(map[string]string{"domain": "nowhere.com", "loop_id": loopID}) // the network knows no such company
	e.WaitSettled(id)
	d := e.WaitDelivery(loopID, func(d map[string]any) bool { return d["status"] == "succeeded" })

	admin := e.SignIn("acme", "admin")
	for _, b := range []*servertest.Browser{admin, e.SignIn("acme", "viewer")} {
		p := b.Get("/dashboard/tasks/" + id)
		is.Equal(p.Status, http.StatusOK)
		is.Equal(p.TaskStatus(), "failed")
		is.True(p.Has(`<div id="task-error">`))
		is.True(p.Has("<code>not_found</code>"))
		is.True(p.Has(`id="task-credits">1<`))
		is.True(p.Has("refunded"))
		is.True(p.Has(`id="task-balance">100<`)) // the failure was refunded
		is.True(p.Has(`<a href="/dashboard/loops/` + loopID + `">CRM sync</a>`))
		is.True(p.Has(`<a href="/dashboard/deliveries/` + d["id"].(string) + `"><code>task.failed</code></a>`))
		is.True(p.Has("<td>1</td>\n  <td>200</td>")) // one attempt, answered 200
	}

	// A deleted Loop leaves its tasks, which say so.
	is.Equal(e.Do("DELETE", "/v1/loops/"+loopID, nil).Status, http.StatusNoContent)
	p := admin.Get("/dashboard/tasks/" + id)
	is.Equal(p.Status, http.StatusOK)
	is.True(p.Has("a deleted Loop"))
	is.True(!p.Has(`href="/dashboard/loops/`))
	is.Equal(admin.Get("/dashboard/tasks").TaskRows(), []string{"nowhere.com"})
	is.True(admin.Get("/dashboard/tasks").Has("deleted Loop"))
}

func TestDashboardCancelTask(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	id := e.EnrichCompany(map[string]string{"domain": "acme.com"})
	is.Equal(e.Balance("acme").Balance, int64(99))
	admin, viewer := e.SignIn("acme", "admin"), e.SignIn("acme", "viewer")
	cancel := "/dashboard/tasks/" + id + "/cancel"

	p := viewer.Post(cancel, url.Values{})
	is.Equal(p.Status, http.StatusForbidden) // a viewer reads
	p = admin.Do(http.MethodPost, cancel, url.Values{}, "Sec-Fetch-Site", "cross-site")
	is.Equal(p.Status, http.StatusForbidden) // another site's form
	p = e.SignIn("other", "admin").Post(cancel, url.Values{})
	is.Equal(p.Status, http.StatusNotFound) // another org's task
	is.Equal(e.Do("GET", "/v1/tasks/"+id, nil).Str("task.status"), "queued")
	is.Equal(e.Balance("acme").Balance, int64(99))

	p = admin.Post(cancel, url.Values{})
	is.Equal(p.Status, http.StatusSeeOther)
	to, err := url.Parse(p.Location)
	is.NoErr(err)
	is.Equal(to.Path, "/dashboard/tasks/"+id)
	is.Equal(to.Query().Get("notice"), "The task is canceled and its 1 credit refunded.")
	is.Equal(e.Do("GET", "/v1/tasks/"+id, nil).Str("task.status"), "canceled") // the API's cancel, the same
	is.Equal(e.Balance("acme").Balance, int64(100))

	p = admin.Get(p.Location)
	is.Equal(p.TaskStatus(), "canceled")
	is.True(p.Has("The task is canceled and its 1 credit refunded."))
	is.True(p.Has(`id="task-balance">100<`))

	p = admin.Post(cancel, url.Values{})
	is.Equal(p.Status, http.StatusConflict) // settled: the store's word for it
	is.True(p.Has("the task has already canceled and can no longer be canceled"))
	is.Equal(e.Balance("acme").Balance, int64(100)) // refunded once
}

// tryForm is the "Try it" form filled in.
func tryForm(kind string, fields ...string) url.Values {
	v := url.Values{"kind": {kind}, "domain": {""}, "networkUrl": {""}, "email": {""}, "fullName": {""}, "title": {""}, "location": {""}}
	for i := 0; i+1 < len(fields); i += 2 {
		v.Set(fields[i], fields[i+1])
	}
	return v
}

func TestDashboardTryItEndToEnd(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	e.Net.AddPerson(&enrich.Person{NetworkURL: enrich.Ptr("https://www.linkedin.com/in/jane-doe"), FullName: enrich.Ptr("Jane Doe"), Positions: []enrich.Position{}})
	e.StartWorkers()
	b := e.SignIn("acme", "admin")

	p := b.Get("/dashboard/try")
	is.Equal(p.Status, http.StatusOK)
	is.True(p.Has(`<form method="post" action="/dashboard/try" id="try"`))
	for _, name := range []string{"domain", "networkUrl", "email", "fullName", "title", "location"} {
		is.True(p.Has(`name="` + name + `"`))
	}
	for _, kind := range []string{"company_domain", "company_url", "person_url", "person_email"} {
		is.True(p.Has(`name="kind" value="` + kind + `"`))
	}
	is.True(p.Has(`<button type="submit">`))
	is.True(p.Has(`id="try-balance">100<`))
	is.True(!p.Has(" disabled"))

	p = b.Post("/dashboard/try", tryForm("company_domain", "domain", "HTTPS://WWW.Acme.COM/about", "networkUrl", "ignored: not a company_url"))
	is.Equal(p.Status, http.StatusSeeOther)
	to, err := url.Parse(p.Location)
	is.NoErr(err)
	is.Equal(to.Query().Get("notice"), "Sent: charged 1 credit, refunded if the task fails.")
	id := strings.TrimPrefix(to.Path, "/dashboard/tasks/")
	page := b.WaitPage(id)
	is.Equal(page.TaskStatus(), "succeeded")
	is.True(page.Has(`<pre id="task-result" tabindex="0"`))
	is.True(page.Has(`&#34;name&#34;: &#34;Acme&#34;`))
	is.True(page.Has(`id="task-credits">1<`))
	is.True(page.Has(`id="task-balance">99<`))

	// The same task the API makes: the input as sent, the route's charge.
	api := e.Do("GET", "/v1/tasks/"+id, nil)
	is.Equal(api.Get("task.input"), map[string]any{"domain": "HTTPS://WWW.Acme.COM/about"})
	is.Equal(api.Str("task.target"), "acme.com")
	is.Equal(api.Str("data.name"), "Acme")

	p = b.Post("/dashboard/try", tryForm("person_url", "networkUrl", "https://linkedin.com/in/jane-doe/"))
	is.Equal(p.Status, http.StatusSeeOther)
	to, _ = url.Parse(p.Location)
	page = b.WaitPage(strings.TrimPrefix(to.Path, "/dashboard/tasks/"))
	is.Equal(page.TaskStatus(), "succeeded")
	is.True(page.Has(`&#34;full_name&#34;: &#34;Jane Doe&#34;`))
	is.True(page.Has(`id="task-balance">98<`))

	// A personal mailbox is refused without asking anyone: failed at once, refunded.
	p = b.Post("/dashboard/try", tryForm("person_email", "email", "jane@gmail.com", "fullName", "Jane Doe"))
	is.Equal(p.Status, http.StatusSeeOther)
	to, _ = url.Parse(p.Location)
	is.Equal(to.Query().Get("notice"), "The task failed at once; its 3 credits were refunded.")
	page = b.Get(p.Location)
	is.Equal(page.TaskStatus(), "failed")
	is.True(page.Has(`id="task-credits">3<`))
	api = e.Do("GET", "/v1/tasks/"+strings.TrimPrefix(to.Path, "/dashboard/tasks/"), nil)
	is.Equal(api.Get("task.input"), map[string]any{"email": "jane@gmail.com", "fullName": "Jane Doe"})
	is.Equal(e.Balance("acme").Balance, int64(98))
}

func TestDashboardTryItRefusesWithoutCharging(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, func(c *server.Config) { c.MaxBacklog = 2 })
	admin, viewer := e.SignIn("acme", "admin"), e.SignIn("acme", "viewer")
	ledger := func() int {
		entries, err := e.DB.CreditLedger(context.Background(), "acme")
		is.NoErr(err)
		return len(entries)
	}
	before := ledger()

	for _, tc := range []struct {
		form url.Values
		says string
	}{
		{tryForm("company_domain", "domain", "not a domain"), "domain"},
		{tryForm("company_domain"), "send one of domain or networkUrl"},
		{tryForm("company_url", "networkUrl", "https://example.com/company/acme"), "networkUrl"},
		{tryForm("person_url", "networkUrl", "https://www.linkedin.com/in/jane-doe", "title", "CTO"), "tie-break hints for email lookups"},
		{tryForm("person_email", "email", "not an address"), "email"},
		{tryForm("person_email", "email", "jane@acme.com", "location", strings.Repeat("x", 201)), "location is longer than 200 characters"},
		{tryForm("company_domain", "domain", strings.Repeat("a", 3000)), "domain is longer than 2048 characters"},
		{tryForm("lottery"), "Choose what to look up"},
	} {
		p := admin.Post("/dashboard/try", tc.form)
		is.Equal(p.Status, http.StatusBadRequest)
		is.True(p.Has(`<p class="error" role="alert" id="try-error">`))
		is.True(p.Has(html.EscapeString(tc.says)))
		is.True(p.Has(`<form method="post" action="/dashboard/try" id="try"`)) // the form again
		if v := tc.form.Get("domain"); v != "" && len(v) < 100 {
			is.True(p.Has(`name="domain" value="` + html.EscapeString(v) + `"`)) // with what was typed
		}
	}
	is.Equal(ledger(), before)
	is.Equal(e.Balance("acme").Balance, int64(100))

	// A viewer sees the form, disabled, and may not send it; nor may another site.
	p := viewer.Get("/dashboard/try")
	is.Equal(p.Status, http.StatusOK)
	is.True(p.Has(`<fieldset class="stack plain" disabled>`))
	is.True(p.Has(`id="try-viewer"`))
	p = viewer.Post("/dashboard/try", tryForm("company_domain", "domain", "acme.com"))
	is.Equal(p.Status, http.StatusForbidden)
	p = admin.Do(http.MethodPost, "/dashboard/try", tryForm("company_domain", "domain", "acme.com"), "Sec-Fetch-Site", "cross-site")
	is.Equal(p.Status, http.StatusForbidden)
	p = admin.Do(http.MethodPost, "/dashboard/try", tryForm("company_domain", "domain", "acme.com"), "Origin", "https://evil.example")
	is.Equal(p.Status, http.StatusForbidden)
	is.Equal(ledger(), before)

	// The queue full: 429 with the store's message, and Retry-After.
	is.Equal(admin.Post("/dashboard/try", tryForm("company_domain", "domain", "one.com")).Status, http.StatusSeeOther)
	is.Equal(admin.Post("/dashboard/try", tryForm("company_domain", "domain", "two.com")).Status, http.StatusSeeOther)
	is.Equal(e.Balance("acme").Balance, int64(98))
	p = admin.Post("/dashboard/try", tryForm("company_domain", "domain", "three.com"))
	is.Equal(p.Status, http.StatusTooManyRequests)
	is.True(p.Has("already has 2 queued tasks"))
	is.Equal(p.Header.Get("Retry-After"), "10")
	is.True(p.Has(`value="three.com"`))
	is.Equal(e.Balance("acme").Balance, int64(98))

	// No credits: 402 with the store's message.
	e.NewOrg("poor", 0)
	poor := e.SignIn("poor", "admin")
	p = poor.Post("/dashboard/try", tryForm("company_domain", "domain", "acme.com"))
	is.Equal(p.Status, http.StatusPaymentRequired)
	is.True(p.Has("not enough credits: this request costs 1 and 0 remain"))
	is.True(p.Has(`id="try-balance">0<`))
}

// A task page opened while the task ran, and polled until it settled: the answer that
// shows it settled also takes away the offer to cancel it (htmx swaps the empty
// #task-cancel it carries out of band), for an admin, the one offered it.
func TestDashboardTaskPageWithdrawsCancelOnceSettled(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	id := e.EnrichCompany(map[string]string{"domain": "acme.com"})
	admin, viewer := e.SignIn("acme", "admin"), e.SignIn("acme", "viewer")
	poll := func(b *servertest.Browser) *servertest.WebPage {
		return b.Get("/dashboard/tasks/"+id, "HX-Request", "true", "HX-Target", "task-live")
	}
	withdraw := `<div id="task-cancel" hx-swap-oob="true" hidden></div>`

	is.True(admin.Get("/dashboard/tasks/" + id).Has(`<details class="confirm" id="task-cancel">`))
	is.True(!poll(admin).Has(withdraw)) // queued: the offer stands

	e.StartWorkers()
	e.WaitSettled(id)
	frag := poll(admin)
	is.Equal(frag.TaskStatus(), "succeeded")
	is.True(frag.Has(withdraw))
	is.True(!frag.Has("hx-trigger"))
	// A viewer was offered nothing: an out-of-band swap with no target would be an
	// error in the browser's console.
	is.True(!poll(viewer).Has(`id="task-cancel"`))
	// The whole page, settled, neither offers nor withdraws anything.
	p := admin.Get("/dashboard/tasks/" + id)
	is.True(!p.Has(`id="task-cancel"`))
}

// Try it sends the browser to the task's page with a notice; a task that fails after
// that (here: the network knows no such company) must not sit under a notice that
// contradicts the page: no charge without its refund, no balance that is no longer so.
func TestDashboardTryNoticeHoldsWhenTheTaskFailsLater(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	b := e.SignIn("acme", "admin")
	p := b.Post("/dashboard/try", tryForm("company_domain", "domain", "nowhere.com"))
	is.Equal(p.Status, http.StatusSeeOther)
	to, err := url.Parse(p.Location)
	is.NoErr(err)
	is.Equal(to.Query().Get("notice"), "Sent: charged 1 credit, refunded if the task fails.")
	id := strings.TrimPrefix(to.Path, "/dashboard/tasks/")
	e.StartWorkers()
	e.WaitSettled(id)

	page := b.Get(p.Location)
	is.Equal(page.TaskStatus(), "failed")
	is.True(page.Has(`<p class="notice" role="status">Sent: charged 1 credit, refunded if the task fails.</p>`))
	is.True(page.Has(`id="task-balance">100<`))
	is.True(page.Has(">refunded<"))
	is.True(!page.Has("Balance: ")) // the notice states no balance to go stale
	is.Equal(e.Balance("acme").Balance, int64(100))
}
