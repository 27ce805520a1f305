package server_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/server"

	"github.com/matryer/is"
)

// taskRows are the targets of the task list's rows, in order.
func (p *webPage) taskRows() []string {
	var out []string
	for _, m := range taskRowPattern.FindAllStringSubmatch(p.body, -1) {
		out = append(out, html.UnescapeString(m[1]))
	}
	return out
}

var taskRowPattern = regexp.MustCompile(`(?s)<tr class="task">.*?<a href="/dashboard/tasks/[0-9a-f-]+">([^<]*)</a>`)

// link is the href of the page's link marked rel, "" when there is none.
func (p *webPage) link(rel string) string {
	m := regexp.MustCompile(`href="([^"]*)" rel="` + rel + `"`).FindStringSubmatch(p.body)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

// taskStatus is the status a task's page shows.
func (p *webPage) taskStatus() string {
	m := regexp.MustCompile(`id="task-status"[^>]*>([a-z]+)<`).FindStringSubmatch(p.body)
	if m == nil {
		return ""
	}
	return m[1]
}

// enrichCompany creates a company task through the API and returns its id.
func (e *env) enrichCompany(fields map[string]string) string {
	e.t.Helper()
	r := e.do("POST", "/v1/companies/enrich", fields)
	if r.status != http.StatusAccepted && r.status != http.StatusOK {
		e.t.Fatalf("enrich %v: %d %s", fields, r.status, r.raw)
	}
	return r.str("task.id")
}

// waitPage gets a task's page until the task has settled.
func (b *browser) waitPage(id string) *webPage {
	b.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p := b.get("/dashboard/tasks/" + id)
		if p.status != http.StatusOK {
			b.t.Fatalf("task page %s: %d %s", id, p.status, p.body)
		}
		if s := p.taskStatus(); s != "queued" && s != "running" {
			return p
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("task %s did not settle: %s", id, p.body)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDashboardTaskListFilters(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	rcv := newReceiver(t)
	loopID, _ := e.createLoop("CRM sync", rcv.srv.URL, "company")

	e.clock.Add(-72 * time.Hour)
	e.enrichCompany(map[string]string{"domain": "old.com"})
	e.clock.Add(72 * time.Hour)
	now := e.clock.Now().UTC()
	today, oldDay := now.Format("2006-01-02"), now.Add(-72*time.Hour).Format("2006-01-02")
	e.enrichCompany(map[string]string{"domain": "acme.com"})
	person := e.do("POST", "/v1/people/enrich", map[string]string{"networkUrl": "https://www.linkedin.com/in/jane-doe"})
	is.Equal(person.status, http.StatusAccepted)
	e.enrichCompany(map[string]string{"domain": "loop.com", "loop_id": loopID})
	canceled := e.enrichCompany(map[string]string{"domain": "canceled.com"})
	is.Equal(e.do("POST", "/v1/tasks/"+canceled+"/cancel", nil).status, http.StatusOK)
	profile := "https://www.linkedin.com/in/jane-doe"

	browsers := map[string]*browser{"admin": e.signIn("acme", "admin"), "viewer": e.signIn("acme", "viewer")}
	for _, b := range browsers {
		p := b.get("/dashboard/tasks")
		is.Equal(p.status, http.StatusOK)
		is.Equal(p.taskRows(), []string{"canceled.com", "loop.com", profile, "acme.com", "old.com"}) // newest first
		is.True(p.has("5 tasks in all"))
		is.True(p.has(`<form method="get" action="/dashboard/tasks"`))
		is.True(p.has(`<option value="` + loopID + `">CRM sync</option>`)) // the org's Loops to filter by
		is.True(p.has(`<a href="/dashboard/loops/` + loopID + `">CRM sync</a>`))
		is.True(p.has(`<span class="status canceled">canceled</span>`))
		is.True(p.has(`href="/dashboard/tasks/` + canceled + `"`))
		is.Equal(p.link("next"), "") // one page
		is.Equal(p.link("first"), "")
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
		p := b.get("/dashboard/tasks?" + tc.query)
		is.Equal(p.status, http.StatusOK)
		is.Equal(p.taskRows(), tc.want) // the rows of the filter
		if tc.total != "" {
			is.True(p.has(tc.total))
		} else {
			is.True(!p.has("in all"))
		}
	}
	// The form shows the filter it was sent.
	p := b.get("/dashboard/tasks?status=queued&type=company&loop=" + loopID + "&from=" + oldDay + "&to=" + today)
	is.True(p.has(`<option value="queued" selected>`))
	is.True(p.has(`<option value="company" selected>`))
	is.True(p.has(`<option value="` + loopID + `" selected>`))
	is.True(p.has(`name="from" value="` + oldDay + `"`))
	is.True(p.has(`name="to" value="` + today + `"`))

	for _, tc := range []struct{ query, says string }{
		{"status=stuck", "is not one of queued, running, succeeded, failed, canceled"},
		{"type=robot", "is neither company nor person"},
		{"loop=crm", "is not the id of a Loop"},
		{"from=yesterday", "is not a date like 2025-01-31"},
		{"to=2025-02-30", "is not a date like 2025-01-31"},
		{"from=" + today + "&to=" + oldDay, "is after the to date"},
		{"before=42", "the page cursor is not one this server gave"},
	} {
		p := b.get("/dashboard/tasks?" + tc.query)
		is.Equal(p.status, http.StatusBadRequest)
		is.True(p.has(tc.says))
	}

	// Another organization's Loop selects nothing, and its tasks never show.
	otherKey, _ := e.newOrg("other", 100)
	e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "other.com"}, "Authorization", "Bearer "+otherKey)
	is.Equal(len(b.get("/dashboard/tasks").taskRows()), 5)
	other := e.signIn("other", "viewer")
	is.Equal(other.get("/dashboard/tasks").taskRows(), []string{"other.com"})
	is.Equal(other.get("/dashboard/tasks?loop="+loopID).taskRows(), nil)
}

func TestDashboardTaskListPagesByCursor(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	is.NoErr(e.db.SeedTasks(context.Background(), e.orgID, 120)) // seed-0.com is the oldest
	b := e.signIn("acme", "viewer")

	var seen []string
	p := b.get("/dashboard/tasks")
	for pages := 1; ; pages++ {
		is.Equal(p.status, http.StatusOK)
		rows := p.taskRows()
		is.True(len(rows) <= 50)
		seen = append(seen, rows...)
		if pages > 1 {
			is.Equal(p.link("first"), "/dashboard/tasks") // back to the newest
		} else {
			is.Equal(p.link("first"), "")
		}
		next := p.link("next")
		if next == "" {
			is.Equal(pages, 3) // 50 + 50 + 20
			break
		}
		is.True(strings.HasPrefix(next, "/dashboard/tasks?before="))
		p = b.get(next)
	}
	is.Equal(len(seen), 120)
	for i, target := range seen {
		is.Equal(target, fmt.Sprintf("seed-%d.com", 119-i)) // newest first, none twice, none missed
	}
	is.True(p.has("120 tasks in all"))

	// The filter goes along from page to page.
	p = b.get("/dashboard/tasks?status=succeeded&type=company")
	next := p.link("next")
	q, err := url.ParseQuery(strings.TrimPrefix(next, "/dashboard/tasks?"))
	is.NoErr(err)
	is.Equal(q.Get("status"), "succeeded")
	is.Equal(q.Get("type"), "company")
	is.True(q.Get("before") != "")
	p = b.get(next)
	is.Equal(p.taskRows()[0], "seed-69.com")
	is.Equal(p.link("first"), "/dashboard/tasks?status=succeeded&type=company")
}

func TestDashboardTaskPage(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	id := e.enrichCompany(map[string]string{"domain": "HTTPS://WWW.Acme.COM/about"})
	admin, viewer := e.signIn("acme", "admin"), e.signIn("acme", "viewer")

	for _, b := range []*browser{admin, viewer} {
		p := b.get("/dashboard/tasks/" + id)
		is.Equal(p.status, http.StatusOK)
		is.Equal(p.taskStatus(), "queued")
		is.True(p.has(`<span id="task-status" class="status queued">queued</span>`))
		is.True(p.has(`id="task-credits">1<`))
		is.True(p.has("&#34;domain&#34;: &#34;HTTPS://WWW.Acme.COM/about&#34;")) // the input as sent, pretty
		is.True(p.has("<code>acme.com</code>"))                                  // the target
		// Unsettled, it asks again as Retry-After says: htmx polls the live part; without
		// JavaScript the page refreshes itself.
		is.True(p.has(`hx-get="/dashboard/tasks/` + id + `" hx-trigger="load delay:2s" hx-target="this" hx-swap="outerHTML"`))
		is.True(p.has(`<noscript><meta http-equiv="refresh" content="2"></noscript>`))
		is.True(!p.has(`id="task-result"`))
		is.Equal(p.has(`action="/dashboard/tasks/`+id+`/cancel"`), b == admin) // a viewer is not offered to cancel
	}

	// What htmx asks for is the live part alone.
	frag := viewer.get("/dashboard/tasks/"+id, "HX-Request", "true", "HX-Target", "task-live")
	is.Equal(frag.status, http.StatusOK)
	is.True(strings.HasPrefix(strings.TrimSpace(frag.body), `<section id="task-live"`))
	is.True(!frag.has("<html"))
	is.True(frag.has(`id="task-status" class="status queued">queued<`))

	// Another organization's task, and one that does not exist, are not found.
	other := e.signIn("other", "admin")
	is.Equal(other.get("/dashboard/tasks/"+id).status, http.StatusNotFound)
	is.Equal(other.get("/dashboard/tasks/"+id, "HX-Request", "true", "HX-Target", "task-live").status, http.StatusNotFound)
	is.Equal(viewer.get("/dashboard/tasks/0190b5d4-0000-7000-8000-000000000000").status, http.StatusNotFound)
	is.Equal(viewer.get("/dashboard/tasks/"+strings.Repeat("x", 500)).status, http.StatusNotFound)

	// Settled: the result, pretty, and no more polling.
	e.net.addCompany(company("Acme", "acme.com"))
	e.startWorkers()
	e.waitSettled(id)
	p := viewer.get("/dashboard/tasks/" + id)
	is.Equal(p.taskStatus(), "succeeded")
	is.True(p.has(`<pre id="task-result" tabindex="0" aria-label="The result, as JSON">{`))
	is.True(p.has(`  &#34;name&#34;: &#34;Acme&#34;,`))
	is.True(p.has(`<details class="raw" id="task-json">`)) // the JSON behind its toggle, the card in front
	is.True(p.has(`<h3 id="company-name">Acme</h3>`))
	is.True(!p.has("hx-get") && !p.has("hx-trigger"))
	is.True(!p.has(`http-equiv="refresh"`))
	is.True(p.has(`id="task-balance">99<`))
	is.True(!p.has(`/cancel"`))
	frag = viewer.get("/dashboard/tasks/"+id, "HX-Request", "true", "HX-Target", "task-live")
	is.True(!frag.has("hx-trigger")) // the last poll's answer stops the polling
	is.True(frag.has(`id="task-result"`))
}

func TestDashboardTaskPageShowsFailureAndDeliveries(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	rcv := newReceiver(t)
	loopID, _ := e.createLoop("CRM sync", rcv.srv.URL, "company")
	e.startWorkers()
	id := e.enrichCompany(map[string]string{"domain": "nowhere.com", "loop_id": loopID}) // the network knows no such company
	e.waitSettled(id)
	d := e.waitDelivery(loopID, func(d map[string]any) bool { return d["status"] == "succeeded" })

	admin := e.signIn("acme", "admin")
	for _, b := range []*browser{admin, e.signIn("acme", "viewer")} {
		p := b.get("/dashboard/tasks/" + id)
		is.Equal(p.status, http.StatusOK)
		is.Equal(p.taskStatus(), "failed")
		is.True(p.has(`<div id="task-error">`))
		is.True(p.has("<code>not_found</code>"))
		is.True(p.has(`id="task-credits">1<`))
		is.True(p.has("refunded"))
		is.True(p.has(`id="task-balance">100<`)) // the failure was refunded
		is.True(p.has(`<a href="/dashboard/loops/` + loopID + `">CRM sync</a>`))
		is.True(p.has(`<a href="/dashboard/deliveries/` + d["id"].(string) + `"><code>task.failed</code></a>`))
		is.True(p.has("<td>1</td>\n  <td>200</td>")) // one attempt, answered 200
	}

	// A deleted Loop leaves its tasks, which say so.
	is.Equal(e.do("DELETE", "/v1/loops/"+loopID, nil).status, http.StatusNoContent)
	p := admin.get("/dashboard/tasks/" + id)
	is.Equal(p.status, http.StatusOK)
	is.True(p.has("a deleted Loop"))
	is.True(!p.has(`href="/dashboard/loops/`))
	is.Equal(admin.get("/dashboard/tasks").taskRows(), []string{"nowhere.com"})
	is.True(admin.get("/dashboard/tasks").has("deleted Loop"))
}

func TestDashboardCancelTask(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	id := e.enrichCompany(map[string]string{"domain": "acme.com"})
	is.Equal(e.balance("acme").Balance, int64(99))
	admin, viewer := e.signIn("acme", "admin"), e.signIn("acme", "viewer")
	cancel := "/dashboard/tasks/" + id + "/cancel"

	p := viewer.post(cancel, url.Values{})
	is.Equal(p.status, http.StatusForbidden) // a viewer reads
	p = admin.do(http.MethodPost, cancel, url.Values{}, "Sec-Fetch-Site", "cross-site")
	is.Equal(p.status, http.StatusForbidden) // another site's form
	p = e.signIn("other", "admin").post(cancel, url.Values{})
	is.Equal(p.status, http.StatusNotFound) // another org's task
	is.Equal(e.do("GET", "/v1/tasks/"+id, nil).str("task.status"), "queued")
	is.Equal(e.balance("acme").Balance, int64(99))

	p = admin.post(cancel, url.Values{})
	is.Equal(p.status, http.StatusSeeOther)
	to, err := url.Parse(p.location)
	is.NoErr(err)
	is.Equal(to.Path, "/dashboard/tasks/"+id)
	is.Equal(to.Query().Get("notice"), "The task is canceled and its 1 credit refunded.")
	is.Equal(e.do("GET", "/v1/tasks/"+id, nil).str("task.status"), "canceled") // the API's cancel, the same
	is.Equal(e.balance("acme").Balance, int64(100))

	p = admin.get(p.location)
	is.Equal(p.taskStatus(), "canceled")
	is.True(p.has("The task is canceled and its 1 credit refunded."))
	is.True(p.has(`id="task-balance">100<`))

	p = admin.post(cancel, url.Values{})
	is.Equal(p.status, http.StatusConflict) // settled: the store's word for it
	is.True(p.has("the task has already canceled and can no longer be canceled"))
	is.Equal(e.balance("acme").Balance, int64(100)) // refunded once
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
	is := is.New(t)
	e := newEnv(t)
	e.net.addCompany(company("Acme", "acme.com"))
	e.net.addPerson(&enrich.Person{NetworkURL: enrich.Ptr("https://www.linkedin.com/in/jane-doe"), FullName: enrich.Ptr("Jane Doe"), Positions: []enrich.Position{}})
	e.startWorkers()
	b := e.signIn("acme", "admin")

	p := b.get("/dashboard/try")
	is.Equal(p.status, http.StatusOK)
	is.True(p.has(`<form method="post" action="/dashboard/try" id="try"`))
	for _, name := range []string{"domain", "networkUrl", "email", "fullName", "title", "location"} {
		is.True(p.has(`name="` + name + `"`))
	}
	for _, kind := range []string{"company_domain", "company_url", "person_url", "person_email"} {
		is.True(p.has(`name="kind" value="` + kind + `"`))
	}
	is.True(p.has(`<button type="submit">`))
	is.True(p.has(`id="try-balance">100<`))
	is.True(!p.has(" disabled"))

	p = b.post("/dashboard/try", tryForm("company_domain", "domain", "HTTPS://WWW.Acme.COM/about", "networkUrl", "ignored: not a company_url"))
	is.Equal(p.status, http.StatusSeeOther)
	to, err := url.Parse(p.location)
	is.NoErr(err)
	is.Equal(to.Query().Get("notice"), "Sent: charged 1 credit, refunded if the task fails.")
	id := strings.TrimPrefix(to.Path, "/dashboard/tasks/")
	page := b.waitPage(id)
	is.Equal(page.taskStatus(), "succeeded")
	is.True(page.has(`<pre id="task-result" tabindex="0"`))
	is.True(page.has(`&#34;name&#34;: &#34;Acme&#34;`))
	is.True(page.has(`id="task-credits">1<`))
	is.True(page.has(`id="task-balance">99<`))

	// The same task the API makes: the input as sent, the route's charge.
	api := e.do("GET", "/v1/tasks/"+id, nil)
	is.Equal(api.get("task.input"), map[string]any{"domain": "HTTPS://WWW.Acme.COM/about"})
	is.Equal(api.str("task.target"), "acme.com")
	is.Equal(api.str("data.name"), "Acme")

	p = b.post("/dashboard/try", tryForm("person_url", "networkUrl", "https://linkedin.com/in/jane-doe/"))
	is.Equal(p.status, http.StatusSeeOther)
	to, _ = url.Parse(p.location)
	page = b.waitPage(strings.TrimPrefix(to.Path, "/dashboard/tasks/"))
	is.Equal(page.taskStatus(), "succeeded")
	is.True(page.has(`&#34;full_name&#34;: &#34;Jane Doe&#34;`))
	is.True(page.has(`id="task-balance">98<`))

	// A personal mailbox is refused without asking anyone: failed at once, refunded.
	p = b.post("/dashboard/try", tryForm("person_email", "email", "jane@gmail.com", "fullName", "Jane Doe"))
	is.Equal(p.status, http.StatusSeeOther)
	to, _ = url.Parse(p.location)
	is.Equal(to.Query().Get("notice"), "The task failed at once; its 3 credits were refunded.")
	page = b.get(p.location)
	is.Equal(page.taskStatus(), "failed")
	is.True(page.has(`id="task-credits">3<`))
	api = e.do("GET", "/v1/tasks/"+strings.TrimPrefix(to.Path, "/dashboard/tasks/"), nil)
	is.Equal(api.get("task.input"), map[string]any{"email": "jane@gmail.com", "fullName": "Jane Doe"})
	is.Equal(e.balance("acme").Balance, int64(98))
}

func TestDashboardTryItRefusesWithoutCharging(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, func(c *server.Config) { c.MaxBacklog = 2 })
	admin, viewer := e.signIn("acme", "admin"), e.signIn("acme", "viewer")
	ledger := func() int {
		entries, err := e.db.CreditLedger(context.Background(), "acme")
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
		p := admin.post("/dashboard/try", tc.form)
		is.Equal(p.status, http.StatusBadRequest)
		is.True(p.has(`<p class="error" role="alert" id="try-error">`))
		is.True(p.has(html.EscapeString(tc.says)))
		is.True(p.has(`<form method="post" action="/dashboard/try" id="try"`)) // the form again
		if v := tc.form.Get("domain"); v != "" && len(v) < 100 {
			is.True(p.has(`name="domain" value="` + html.EscapeString(v) + `"`)) // with what was typed
		}
	}
	is.Equal(ledger(), before)
	is.Equal(e.balance("acme").Balance, int64(100))

	// A viewer sees the form, disabled, and may not send it; nor may another site.
	p := viewer.get("/dashboard/try")
	is.Equal(p.status, http.StatusOK)
	is.True(p.has(`<fieldset class="stack plain" disabled>`))
	is.True(p.has(`id="try-viewer"`))
	p = viewer.post("/dashboard/try", tryForm("company_domain", "domain", "acme.com"))
	is.Equal(p.status, http.StatusForbidden)
	p = admin.do(http.MethodPost, "/dashboard/try", tryForm("company_domain", "domain", "acme.com"), "Sec-Fetch-Site", "cross-site")
	is.Equal(p.status, http.StatusForbidden)
	p = admin.do(http.MethodPost, "/dashboard/try", tryForm("company_domain", "domain", "acme.com"), "Origin", "https://evil.example")
	is.Equal(p.status, http.StatusForbidden)
	is.Equal(ledger(), before)

	// The queue full: 429 with the store's message, and Retry-After.
	is.Equal(admin.post("/dashboard/try", tryForm("company_domain", "domain", "one.com")).status, http.StatusSeeOther)
	is.Equal(admin.post("/dashboard/try", tryForm("company_domain", "domain", "two.com")).status, http.StatusSeeOther)
	is.Equal(e.balance("acme").Balance, int64(98))
	p = admin.post("/dashboard/try", tryForm("company_domain", "domain", "three.com"))
	is.Equal(p.status, http.StatusTooManyRequests)
	is.True(p.has("already has 2 queued tasks"))
	is.Equal(p.header.Get("Retry-After"), "10")
	is.True(p.has(`value="three.com"`))
	is.Equal(e.balance("acme").Balance, int64(98))

	// No credits: 402 with the store's message.
	e.newOrg("poor", 0)
	poor := e.signIn("poor", "admin")
	p = poor.post("/dashboard/try", tryForm("company_domain", "domain", "acme.com"))
	is.Equal(p.status, http.StatusPaymentRequired)
	is.True(p.has("not enough credits: this request costs 1 and 0 remain"))
	is.True(p.has(`id="try-balance">0<`))
}

// A task page opened while the task ran, and polled until it settled: the answer that
// shows it settled also takes away the offer to cancel it (htmx swaps the empty
// #task-cancel it carries out of band), for an admin, the one offered it.
func TestDashboardTaskPageWithdrawsCancelOnceSettled(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.net.addCompany(company("Acme", "acme.com"))
	id := e.enrichCompany(map[string]string{"domain": "acme.com"})
	admin, viewer := e.signIn("acme", "admin"), e.signIn("acme", "viewer")
	poll := func(b *browser) *webPage {
		return b.get("/dashboard/tasks/"+id, "HX-Request", "true", "HX-Target", "task-live")
	}
	withdraw := `<div id="task-cancel" hx-swap-oob="true" hidden></div>`

	is.True(admin.get("/dashboard/tasks/" + id).has(`<details class="confirm" id="task-cancel">`))
	is.True(!poll(admin).has(withdraw)) // queued: the offer stands

	e.startWorkers()
	e.waitSettled(id)
	frag := poll(admin)
	is.Equal(frag.taskStatus(), "succeeded")
	is.True(frag.has(withdraw))
	is.True(!frag.has("hx-trigger"))
	// A viewer was offered nothing: an out-of-band swap with no target would be an
	// error in the browser's console.
	is.True(!poll(viewer).has(`id="task-cancel"`))
	// The whole page, settled, neither offers nor withdraws anything.
	p := admin.get("/dashboard/tasks/" + id)
	is.True(!p.has(`id="task-cancel"`))
}

// Try it sends the browser to the task's page with a notice; a task that fails after
// that (here: the network knows no such company) must not sit under a notice that
// contradicts the page: no charge without its refund, no balance that is no longer so.
func TestDashboardTryNoticeHoldsWhenTheTaskFailsLater(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	b := e.signIn("acme", "admin")
	p := b.post("/dashboard/try", tryForm("company_domain", "domain", "nowhere.com"))
	is.Equal(p.status, http.StatusSeeOther)
	to, err := url.Parse(p.location)
	is.NoErr(err)
	is.Equal(to.Query().Get("notice"), "Sent: charged 1 credit, refunded if the task fails.")
	id := strings.TrimPrefix(to.Path, "/dashboard/tasks/")
	e.startWorkers()
	e.waitSettled(id)

	page := b.get(p.location)
	is.Equal(page.taskStatus(), "failed")
	is.True(page.has(`<p class="notice" role="status">Sent: charged 1 credit, refunded if the task fails.</p>`))
	is.True(page.has(`id="task-balance">100<`))
	is.True(page.has(">refunded<"))
	is.True(!page.has("Balance: ")) // the notice states no balance to go stale
	is.Equal(e.balance("acme").Balance, int64(100))
}
