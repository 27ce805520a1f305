package dashboard_test

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
	"enrichd/server/servertest"
)

// checked says whether the page's box of the field is checked.
func checked(p *servertest.WebPage, object, field string) bool {
	return p.Has(`name="` + object + `" value="` + field + `" checked>`)
}

// An admin sets both lists from checkboxes of every known field; a box left unchecked
// is not in the list, and none checked goes back to the server's default, which the
// page names. What the form saves is what the worker reads.
func TestDashboardFillListsForm(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, func(c *server.Config) { c.Fill = enrich.FillLists{Company: []string{"name", "employee_count"}} })
	admin := e.SignIn("acme", "admin")

	p := admin.Get("/dashboard/sources")
	is.Equal(p.Status, http.StatusOK)
	is.True(p.Has(`<form id="fill-lists" method="post" action="/dashboard/settings/sources"`))
	for _, f := range enrich.CompanyFields {
		is.True(p.Has(`name="company" value="` + f + `"`))
	}
	for _, f := range enrich.PersonFields {
		is.True(p.Has(`name="person" value="` + f + `"`))
	}
	is.True(!p.Has(`name="company" value="created_at"`)) // bookkeeping is no choice
	is.True(p.Has(`The server's default: <code>name</code>, <code>employee_count</code>.`))
	is.True(p.Has(`none, so the first source that knows the person answers alone`))
	is.True(!checked(p, "company", "name")) // the default is said, not checked as the organization's

	p = admin.Post("/dashboard/settings/sources", url.Values{"company": {"slogan", "about"}, "person": {"positions"}})
	is.Equal(p.Status, http.StatusSeeOther)
	is.True(strings.HasPrefix(p.Location, "/dashboard/sources?"))
	is.Equal(e.OwnFill(e.OrgID), enrich.FillLists{Company: []string{"slogan", "about"}, Person: []string{"positions"}})
	fields, err := e.Work.FillFor(context.Background(), servertest.ClaimOf(e.OrgID, enrich.LookupDomain))
	is.NoErr(err)
	is.Equal(fields, []string{"slogan", "about"})

	p = admin.Get(p.Location)
	is.True(p.Has("Fill lists saved"))
	is.True(checked(p, "company", "slogan") && checked(p, "company", "about") && checked(p, "person", "positions"))
	is.True(!checked(p, "company", "name"))
	is.True(p.Has(`id="fill-company-state">This organization's own list: <code>slogan</code>, <code>about</code>.`))

	// No box of a type checked: that type goes back to the default.
	p = admin.Post("/dashboard/settings/sources", url.Values{"person": {"headline"}})
	is.Equal(p.Status, http.StatusSeeOther)
	is.Equal(e.OwnFill(e.OrgID), enrich.FillLists{Person: []string{"headline"}})
	fields, err = e.Work.FillFor(context.Background(), servertest.ClaimOf(e.OrgID, enrich.LookupDomain))
	is.NoErr(err)
	is.Equal(fields, []string{"name", "employee_count"})
}

// A field the type does not have is refused naming the known ones, a viewer may look
// but not change, and neither changes anything.
func TestDashboardFillListsRefusals(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	admin := e.SignIn("acme", "admin")
	p := admin.Post("/dashboard/settings/sources", url.Values{"company": {"slogan"}})
	is.Equal(p.Status, http.StatusSeeOther)
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
		p := admin.Post("/dashboard/settings/sources", c.form)
		is.Equal(p.Status, http.StatusBadRequest)
		body := html.UnescapeString(p.Body)
		is.True(strings.Contains(body, `"`+c.bad+`"`))
		is.True(strings.Contains(body, strings.Join(c.all, ", ")))
		is.Equal(e.OwnFill(e.OrgID), want)
	}
	p = admin.Post("/dashboard/settings/sources", url.Values{"company": {strings.Repeat("x", 100)}})
	is.Equal(p.Status, http.StatusBadRequest)
	is.Equal(e.OwnFill(e.OrgID), want)

	viewer := e.SignIn("acme", "viewer")
	p = viewer.Get("/dashboard/sources")
	is.Equal(p.Status, http.StatusOK)
	is.True(checked(p, "company", "slogan"))
	is.True(p.Has(`<fieldset class="stack plain" disabled>`))
	is.True(!p.Has(`Save fill lists`))
	p = viewer.Post("/dashboard/settings/sources", url.Values{"company": {"name"}})
	is.Equal(p.Status, http.StatusForbidden)
	is.Equal(e.OwnFill(e.OrgID), want)

	// Another organization's admin changes its own lists only.
	_, globex := e.NewOrg("globex", 0)
	other := e.SignIn("globex", "admin")
	p = other.Post("/dashboard/settings/sources", url.Values{"company": {"name"}})
	is.Equal(p.Status, http.StatusSeeOther)
	is.Equal(e.OwnFill(globex), enrich.FillLists{Company: []string{"name"}})
	is.Equal(e.OwnFill(e.OrgID), want)
}

// A task run through the waterfall shows on its page each field beside the source
// that gave it and each source asked with its outcome, as the task keeps them for GET
// /v1/tasks/{id}; a repeat served from the store says no source was asked and keeps
// its provenance.
func TestDashboardTaskPageShowsWhereEachFieldCameFrom(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var asked []string
	slogan := &enrichtest.Source{SourceName: "slogans", Asked: &asked,
		Company: &enrich.Company{Name: "Acme Corp", Domain: enrich.Ptr("acme.com"), Slogan: enrich.Ptr("Widgets for all")}}
	e := servertest.NewEnv(t, func(c *server.Config) {
		c.Sources = []enrich.Source{slogan}
		c.Fill = enrich.FillLists{Company: []string{"name", "slogan"}}
	})
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	e.StartWorkers()
	b := e.SignIn("acme", "viewer")

	// shown checks that the page shows every field the task names beside its source,
	// and every source it asked with its outcome.
	shown := func(p *servertest.WebPage, id string) {
		t.Helper()
		task, err := e.DB.GetTask(context.Background(), e.OrgID, id)
		is.NoErr(err)
		var prov map[string]string
		is.NoErr(json.Unmarshal(task.Provenance, &prov))
		is.True(len(prov) > 0)
		is.Equal(prov["name"], "fake-network") // the first source's, never overwritten
		for field, source := range prov {
			i := strings.Index(p.Body, `<tr class="field" id="field-`+field+`"><td class="lead"><code class="nobreak">`+field+`</code></td>`)
			is.True(i >= 0)
			row, _, _ := strings.Cut(p.Body[i:], "</tr>")
			is.True(strings.Contains(row, `<td class="source st"><code class="nobreak">`+source+`</code></td>`))
		}
		is.True(p.Has(`<td class="value">Acme</td><td class="source st"><code class="nobreak">fake-network</code></td>`))
		var calls []enrich.SourceCall
		is.NoErr(json.Unmarshal(task.Sources, &calls))
		for _, c := range calls {
			is.True(p.Has(`<td><code class="nobreak">` + c.Name + `</code></td><td><span class="outcome ` + c.Outcome + `">`))
		}
		if len(calls) == 0 {
			is.True(p.Has(`<p class="muted" id="task-sources">None: the answer came from records enrichd already held, and its fields keep the sources they came from.</p>`))
		}
	}

	first := e.EnrichCompany(map[string]string{"domain": "acme.com"})
	p := b.WaitPage(first)
	is.Equal(p.TaskStatus(), "succeeded")
	is.True(p.Has(`<table id="task-sources">`))
	is.True(p.Has(`<td><code class="nobreak">fake-network</code></td><td><span class="outcome hit">hit</span>`))
	shown(p, first)
	askedFirst := len(asked)

	again := e.EnrichCompany(map[string]string{"domain": "acme.com"})
	p = b.WaitPage(again)
	is.True(!p.Has(`<table id="task-sources">`))
	shown(p, again)
	is.Equal(len(asked), askedFirst) // the store answered: no source asked again
}
