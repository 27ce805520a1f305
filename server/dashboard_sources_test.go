package server_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/matryer/is"

	"enrichd/enrich"
	"enrichd/enrich/enrichtest"
	"enrichd/server"
)

// ownFill is the organization's own fill lists, straight from the store.
func (e *env) ownFill(orgID string) enrich.FillLists {
	e.t.Helper()
	own, err := e.db.OrgFillLists(context.Background(), orgID)
	if err != nil {
		e.t.Fatal(err)
	}
	return own
}

// checked says whether the page's box of the field is checked.
func checked(p *webPage, object, field string) bool {
	return p.has(`name="` + object + `" value="` + field + `" checked>`)
}

// An admin sets both lists from checkboxes of every known field; a box left unchecked
// is not in the list, and none checked goes back to the server's default, which the
// page names. What the form saves is what the worker reads.
func TestDashboardFillListsForm(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, func(c *server.Config) { c.Fill = enrich.FillLists{Company: []string{"name", "employee_count"}} })
	admin := e.signIn("acme", "admin")

	p := admin.get("/dashboard/sources")
	is.Equal(p.status, http.StatusOK)
	is.True(p.has(`<form id="fill-lists" method="post" action="/dashboard/settings/sources"`))
	for _, f := range enrich.CompanyFields {
		is.True(p.has(`name="company" value="` + f + `"`))
	}
	for _, f := range enrich.PersonFields {
		is.True(p.has(`name="person" value="` + f + `"`))
	}
	is.True(!p.has(`name="company" value="created_at"`)) // bookkeeping is no choice
	is.True(p.has(`The server's default: <code>name</code>, <code>employee_count</code>.`))
	is.True(p.has(`none, so the first source that knows the person answers alone`))
	is.True(!checked(p, "company", "name")) // the default is said, not checked as the organization's

	p = admin.post("/dashboard/settings/sources", url.Values{"company": {"slogan", "about"}, "person": {"positions"}})
	is.Equal(p.status, http.StatusSeeOther)
	is.True(strings.HasPrefix(p.location, "/dashboard/sources?"))
	is.Equal(e.ownFill(e.orgID), enrich.FillLists{Company: []string{"slogan", "about"}, Person: []string{"positions"}})
	fields, err := e.work.FillFor(context.Background(), claimOf(e.orgID, enrich.LookupDomain))
	is.NoErr(err)
	is.Equal(fields, []string{"slogan", "about"})

	p = admin.get(p.location)
	is.True(p.has("Fill lists saved"))
	is.True(checked(p, "company", "slogan") && checked(p, "company", "about") && checked(p, "person", "positions"))
	is.True(!checked(p, "company", "name"))
	is.True(p.has(`id="fill-company-state">This organization's own list: <code>slogan</code>, <code>about</code>.`))

	// No box of a type checked: that type goes back to the default.
	p = admin.post("/dashboard/settings/sources", url.Values{"person": {"headline"}})
	is.Equal(p.status, http.StatusSeeOther)
	is.Equal(e.ownFill(e.orgID), enrich.FillLists{Person: []string{"headline"}})
	fields, err = e.work.FillFor(context.Background(), claimOf(e.orgID, enrich.LookupDomain))
	is.NoErr(err)
	is.Equal(fields, []string{"name", "employee_count"})
}

// A field the type does not have is refused naming the known ones, a viewer may look
// but not change, and neither changes anything.
func TestDashboardFillListsRefusals(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	admin := e.signIn("acme", "admin")
	p := admin.post("/dashboard/settings/sources", url.Values{"company": {"slogan"}})
	is.Equal(p.status, http.StatusSeeOther)
	want := enrich.FillLists{Company: []string{"slogan"}}

	for _, c := range []struct {
		form url.Values
		bad  string
		all  []string
	}{
		{url.Values{"company": {"name", "sloagn"}}, "sloagn", enrich.CompanyFields},
		{url.Values{"company": {"name"}, "person": {"employee_count"}}, "employee_count", enrich.PersonFields},
		{url.Values{"person": {"email_match"}}, "email_match", enrich.PersonFields},
	} {
		p := admin.post("/dashboard/settings/sources", c.form)
		is.Equal(p.status, http.StatusBadRequest)
		body := html.UnescapeString(p.body)
		is.True(strings.Contains(body, `"`+c.bad+`"`))
		is.True(strings.Contains(body, strings.Join(c.all, ", ")))
		is.Equal(e.ownFill(e.orgID), want)
	}
	p = admin.post("/dashboard/settings/sources", url.Values{"company": {strings.Repeat("x", 100)}})
	is.Equal(p.status, http.StatusBadRequest)
	is.Equal(e.ownFill(e.orgID), want)

	viewer := e.signIn("acme", "viewer")
	p = viewer.get("/dashboard/sources")
	is.Equal(p.status, http.StatusOK)
	is.True(checked(p, "company", "slogan"))
	is.True(p.has(`<fieldset class="stack plain" disabled>`))
	is.True(!p.has(`Save fill lists`))
	p = viewer.post("/dashboard/settings/sources", url.Values{"company": {"name"}})
	is.Equal(p.status, http.StatusForbidden)
	is.Equal(e.ownFill(e.orgID), want)

	// Another organization's admin changes its own lists only.
	_, globex := e.newOrg("globex", 0)
	other := e.signIn("globex", "admin")
	p = other.post("/dashboard/settings/sources", url.Values{"company": {"name"}})
	is.Equal(p.status, http.StatusSeeOther)
	is.Equal(e.ownFill(globex), enrich.FillLists{Company: []string{"name"}})
	is.Equal(e.ownFill(e.orgID), want)
}

// A task run through the waterfall shows on its page each field beside the source
// that gave it and each source asked with its outcome, as the task keeps them for GET
// /v1/tasks/{id}; a repeat served from the store says no source was asked and keeps
// its provenance.
func TestDashboardTaskPageShowsWhereEachFieldCameFrom(t *testing.T) {
	is := is.New(t)
	var asked []string
	slogan := &enrichtest.Source{SourceName: "slogans", Asked: &asked,
		Company: &enrich.Company{Name: "Acme Corp", Domain: enrich.Ptr("acme.com"), Slogan: enrich.Ptr("Widgets for all")}}
	e := newEnv(t, func(c *server.Config) {
		c.Sources = []enrich.Source{slogan}
		c.Fill = enrich.FillLists{Company: []string{"name", "slogan"}}
	})
	e.net.addCompany(company("Acme", "acme.com"))
	e.startWorkers()
	b := e.signIn("acme", "viewer")

	// shown checks that the page shows every field the task names beside its source,
	// and every source it asked with its outcome.
	shown := func(p *webPage, id string) {
		t.Helper()
		task, err := e.db.GetTask(context.Background(), e.orgID, id)
		is.NoErr(err)
		var prov map[string]string
		is.NoErr(json.Unmarshal(task.Provenance, &prov))
		is.True(len(prov) > 0)
		is.Equal(prov["name"], "fake-network") // the first source's, never overwritten
		for field, source := range prov {
			i := strings.Index(p.body, `<tr class="field" id="field-`+field+`"><td class="lead"><code class="nobreak">`+field+`</code></td>`)
			is.True(i >= 0)
			row, _, _ := strings.Cut(p.body[i:], "</tr>")
			is.True(strings.Contains(row, `<td class="source st"><code class="nobreak">`+source+`</code></td>`))
		}
		is.True(p.has(`<td class="value">Acme</td><td class="source st"><code class="nobreak">fake-network</code></td>`))
		var calls []enrich.SourceCall
		is.NoErr(json.Unmarshal(task.Sources, &calls))
		for _, c := range calls {
			is.True(p.has(`<td><code class="nobreak">` + c.Name + `</code></td><td><span class="outcome ` + c.Outcome + `">`))
		}
		if len(calls) == 0 {
			is.True(p.has(`<p class="muted" id="task-sources">None: the answer came from records enrichd already held, and its fields keep the sources they came from.</p>`))
		}
	}

	first := e.enrichCompany(map[string]string{"domain": "acme.com"})
	p := b.waitPage(first)
	is.Equal(p.taskStatus(), "succeeded")
	is.True(p.has(`<table id="task-sources">`))
	is.True(p.has(`<td><code class="nobreak">fake-network</code></td><td><span class="outcome hit">hit</span>`))
	shown(p, first)
	askedFirst := len(asked)

	again := e.enrichCompany(map[string]string{"domain": "acme.com"})
	p = b.waitPage(again)
	is.True(!p.has(`<table id="task-sources">`))
	shown(p, again)
	is.Equal(len(asked), askedFirst) // the store answered: no source asked again
}
