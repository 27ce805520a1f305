package dashboard_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"enrichd/server/servertest"

	"github.com/matryer/is"
)

var hiddenField = regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`)

// confirmForm is the preview's confirm form, as the browser would send it.
func confirmForm(p *servertest.WebPage) url.Values {
	form := url.Values{}
	for _, m := range hiddenField.FindAllStringSubmatch(p.Body, -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	return form
}

// TestDashboardUpload: a file is previewed (columns, first rows, credits) without
// anything made or charged; refused rows are listed; confirming makes the batch once
// however often it is sent; its page shows the progress and the results download.
func TestDashboardUpload(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	admin, viewer := e.SignIn("acme", "admin"), e.SignIn("acme", "viewer")

	p := admin.Get("/dashboard/batches")
	is.Equal(p.Status, 200)
	is.True(p.Has(`id="upload"`) && p.Has("No batches yet"))
	is.True(!viewer.Get("/dashboard/batches").Has(`id="upload"`))

	bad := admin.Upload("crm.csv", "domain,owner\nacme.com,ann\nnot a domain,bob\n", "")
	is.Equal(bad.Status, http.StatusBadRequest)
	is.True(bad.Has("1 of 2 rows are refused"))
	is.True(bad.Has(`id="upload-refused"`) && bad.Has("<td>2</td><td>3</td>"))
	// A header too wide is refused before the rows are read, as by the API.
	wide := admin.Upload("wide.csv", servertest.WideHeader(201)+"\n\"acme.com\n", "")
	is.Equal(wide.Status, http.StatusBadRequest)
	is.True(wide.Has("the file has 201 columns; at most 200"))

	file := "domain,owner\nhttps://www.acme.com/,ann\nglobex.com,bob\n"
	p = admin.Upload("crm.csv", file, "")
	is.Equal(p.Status, 200)
	is.True(p.Has("<strong>crm.csv</strong>: 2 rows of companies"))
	is.True(p.Has("every one checked. Enriching them costs at most"))
	is.True(p.Has(`<strong id="preview-estimate">2</strong>`))
	is.True(p.Has("<code>domain</code></td><td>read as domain") && p.Has("<code>owner</code></td><td>kept as it is"))
	is.True(p.Has("<td>https://www.acme.com/</td><td>ann</td>"))
	is.Equal(e.Do("GET", "/v1/batches", nil).Get("total"), float64(0)) // a preview makes nothing
	is.Equal(e.Balance("acme").Balance, int64(100))

	form := confirmForm(p)
	is.Equal(form.Get("name"), "crm.csv")
	is.Equal(viewer.Post("/dashboard/batches", form).Status, http.StatusForbidden)
	c := admin.Post("/dashboard/batches", form)
	is.Equal(c.Status, http.StatusSeeOther)
	is.True(strings.HasPrefix(c.Location, "/dashboard/batches/"))
	again := admin.Post("/dashboard/batches", form) // a second click
	is.Equal(again.Location, c.Location)
	is.Equal(e.Do("GET", "/v1/batches", nil).Get("total"), float64(1))

	p = admin.Get(c.Location)
	is.Equal(p.Status, 200)
	is.True(p.Has(`id="batch-bar" max="2" value="0"`))
	is.True(p.Has(`hx-trigger="every 1s"`)) // htmx polls while it runs

	e.StartWorkers()
	id := strings.TrimPrefix(c.Location, "/dashboard/batches/")
	e.WaitBatchDone(id)
	p = admin.Get(c.Location, "HX-Request", "true", "HX-Target", "batch-progress")
	is.True(strings.HasPrefix(strings.TrimSpace(p.Body), `<section id="batch-progress"`)) // the fragment alone
	is.True(p.Has(`value="2"`) && p.Has("Done.") && !p.Has("hx-trigger"))
	is.True(p.Has(`<strong id="batch-credits">1</strong>`)) // globex.com is not found: refunded

	dl := viewer.Get(c.Location + "/results")
	is.Equal(dl.Status, 200)
	is.True(strings.HasPrefix(dl.Header.Get("Content-Type"), "text/csv"))
	recs := servertest.ReadCSV(t, []byte(dl.Body))
	is.Equal(len(recs), 3)
	is.Equal(recs[1][:3], []string{"https://www.acme.com/", "ann", "succeeded"})
	is.Equal(recs[2][2], "failed")
	list := viewer.Get("/dashboard/batches")
	is.True(list.Has("crm.csv") && list.Has(`value="2"`))

	// A form sent from another site makes nothing; another organization's admin
	// neither sees the batch nor downloads its results.
	forged := admin.Do(http.MethodPost, "/dashboard/batches", confirmForm(admin.Upload("crm.csv", file, "")), "Sec-Fetch-Site", "cross-site")
	is.Equal(forged.Status, http.StatusForbidden)
	is.Equal(e.Do("GET", "/v1/batches", nil).Get("total"), float64(1))
	other := e.SignIn("other", "admin")
	is.Equal(other.Get(c.Location).Status, http.StatusNotFound)
	is.Equal(other.Get(c.Location+"/results").Status, http.StatusNotFound)
	is.True(!other.Get("/dashboard/batches").Has("crm.csv"))
}

// TestDashboardUploadSkipsRefusedRows: a CRM's contacts, of both kinds and with
// malformed rows, are refused whole unless the Upload page's checkbox skips them: the
// preview then lists the skipped rows and counts what goes ahead, the batch is made of
// the others, and its page lists the skipped rows and the failed lookups with why, each
// failed lookup linked to its task. Enrich's select asks for a row's person and company.
func TestDashboardUploadSkipsRefusedRows(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	contacts := servertest.ContactExport(e)
	file := servertest.ContactsCSV(contacts)
	if _, err := e.DB.GrantCredits(t.Context(), "acme", 200, nil); err != nil {
		t.Fatal(err)
	}
	admin := e.SignIn("acme", "admin")

	p := admin.Get("/dashboard/batches")
	is.True(p.Has(`<input type="checkbox" name="on_error" value="skip">`))
	is.True(p.Has(`<option value="company,person">`))

	all := admin.UploadForm("contacts.csv", file, "enrich", "")
	is.Equal(all.Status, http.StatusBadRequest)
	is.True(all.Has("5 of 51 rows are refused"))
	is.Equal(strings.Count(all.Body, "<tr><td>"), 5)

	p = admin.UploadForm("contacts.csv", file, "enrich", "", "on_error", "skip")
	is.Equal(p.Status, 200)
	is.True(p.Has("51 rows of people and companies, every one checked: 5 refused, to be skipped."))
	is.True(p.Has(`<span id="preview-lookups">35 people and 11 companies</span>`))
	is.True(p.Has(`<strong id="preview-estimate">116</strong>`))
	is.True(p.Has(`id="preview-skipped"`) && p.Has("<td>4</td><td>5</td>")) // the first malformed row: row 4, line 5
	is.True(p.Has("Enrich 46 rows"))
	is.Equal(e.Do("GET", "/v1/batches", nil).Get("total"), float64(0))
	form := confirmForm(p)
	is.Equal(form.Get("on_error"), "skip")
	is.Equal(form.Get("enrich"), "")
	c := admin.Post("/dashboard/batches", form)
	is.Equal(c.Status, http.StatusSeeOther)
	is.Equal(admin.Post("/dashboard/batches", form).Location, c.Location) // a second click
	id := strings.TrimPrefix(c.Location, "/dashboard/batches/")

	e.StartWorkers()
	e.WaitBatchDone(id)
	p = admin.Get(c.Location)
	is.Equal(p.Status, 200)
	is.True(p.Has("51 rows of people and companies"))
	is.True(p.Has(`<span id="batch-done">51 of 51</span> lookups and skipped rows done`))
	is.True(p.Has("<th>Skipped</th>"))
	is.True(p.Has(`id="batch-failures"`))
	is.Equal(strings.Count(p.Body, `<tr class="failure">`), 10) // 5 skipped, 5 lookups not found
	is.Equal(strings.Count(p.Body, "none: refused at the upload"), 5)
	failed := regexp.MustCompile(`<a href="/dashboard/tasks/([0-9a-f-]{36})">`).FindAllStringSubmatch(p.Body, -1)
	is.Equal(len(failed), 5)
	for _, m := range failed {
		task := e.Do("GET", "/v1/tasks/"+m[1], nil)
		is.Equal(task.Str("task.status"), "failed")
		is.True(strings.HasPrefix(task.Str("task.idempotency_key"), "batch:"+id+":"))
		is.True(p.Has("<code>" + task.Str("error.code") + "</code> " + html.EscapeString(task.Str("error.message"))))
	}
	is.Equal(admin.Get("/dashboard/tasks/"+failed[0][1]).Status, 200)
	recs := servertest.ReadCSV(t, []byte(admin.Get(c.Location+"/results").Body))
	is.Equal(len(recs), 52)
	is.Equal(recs[4][5], "skipped")
	is.True(admin.Get("/dashboard/batches").Has("people and companies"))

	// A row's person and its company, chosen in the select.
	p = admin.UploadForm("contacts.csv", file, "enrich", "company,person", "on_error", "skip")
	is.Equal(p.Status, 200)
	is.True(p.Has(`<span id="preview-lookups">35 people and 31 companies</span>`))
	is.True(p.Has(`<strong id="preview-estimate">136</strong>`))
	is.Equal(confirmForm(p).Get("enrich"), "company,person")
	bad := admin.UploadForm("contacts.csv", file, "enrich", "robots")
	is.Equal(bad.Status, http.StatusBadRequest)
	is.True(bad.Has("enrich must be company, person, or company,person"))
}
