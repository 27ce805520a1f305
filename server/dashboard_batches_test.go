package server_test

import (
	"bytes"
	"html"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// upload sends a file through the Upload page's form, as a browser does, enrich
// chosen in its select.
func (b *browser) upload(name, content, enrich string) *webPage {
	b.t.Helper()
	return b.uploadForm(name, content, "enrich", enrich)
}

// uploadForm sends a file through the Upload page's form with its other fields as
// name, value pairs (a checkbox left out is unchecked).
func (b *browser) uploadForm(name, content string, fields ...string) *webPage {
	b.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", name)
	io.WriteString(fw, content)
	for i := 0; i+1 < len(fields); i += 2 {
		mw.WriteField(fields[i], fields[i+1])
	}
	mw.Close()
	req, _ := http.NewRequest(http.MethodPost, b.e.http.URL+"/dashboard/batches/preview", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err := b.client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return &webPage{status: res.StatusCode, body: string(raw), header: res.Header, location: res.Header.Get("Location")}
}

var hiddenField = regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`)

// confirmForm is the preview's confirm form, as the browser would send it.
func confirmForm(p *webPage) url.Values {
	form := url.Values{}
	for _, m := range hiddenField.FindAllStringSubmatch(p.body, -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	return form
}

// TestDashboardUpload: a file is previewed (columns, first rows, credits) without
// anything made or charged; refused rows are listed; confirming makes the batch once
// however often it is sent; its page shows the progress and the results download.
func TestDashboardUpload(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.net.addCompany(company("Acme", "acme.com"))
	admin, viewer := e.signIn("acme", "admin"), e.signIn("acme", "viewer")

	p := admin.get("/dashboard/batches")
	is.Equal(p.status, 200)
	is.True(p.has(`id="upload"`) && p.has("No batches yet"))
	is.True(!viewer.get("/dashboard/batches").has(`id="upload"`))

	bad := admin.upload("crm.csv", "domain,owner\nacme.com,ann\nnot a domain,bob\n", "")
	is.Equal(bad.status, http.StatusBadRequest)
	is.True(bad.has("1 of 2 rows are refused"))
	is.True(bad.has(`id="upload-refused"`) && bad.has("<td>2</td><td>3</td>"))
	// A header too wide is refused before the rows are read, as by the API.
	wide := admin.upload("wide.csv", wideHeader(201)+"\n\"acme.com\n", "")
	is.Equal(wide.status, http.StatusBadRequest)
	is.True(wide.has("the file has 201 columns; at most 200"))

	file := "domain,owner\nhttps://www.acme.com/,ann\nglobex.com,bob\n"
	p = admin.upload("crm.csv", file, "")
	is.Equal(p.status, 200)
	is.True(p.has("<strong>crm.csv</strong>: 2 rows of companies"))
	is.True(p.has("every one checked. Enriching them costs at most"))
	is.True(p.has(`<strong id="preview-estimate">2</strong>`))
	is.True(p.has("<code>domain</code></td><td>read as domain") && p.has("<code>owner</code></td><td>kept as it is"))
	is.True(p.has("<td>https://www.acme.com/</td><td>ann</td>"))
	is.Equal(e.do("GET", "/v1/batches", nil).get("total"), float64(0)) // a preview makes nothing
	is.Equal(e.balance("acme").Balance, int64(100))

	form := confirmForm(p)
	is.Equal(form.Get("name"), "crm.csv")
	is.Equal(viewer.post("/dashboard/batches", form).status, http.StatusForbidden)
	c := admin.post("/dashboard/batches", form)
	is.Equal(c.status, http.StatusSeeOther)
	is.True(strings.HasPrefix(c.location, "/dashboard/batches/"))
	again := admin.post("/dashboard/batches", form) // a second click
	is.Equal(again.location, c.location)
	is.Equal(e.do("GET", "/v1/batches", nil).get("total"), float64(1))

	p = admin.get(c.location)
	is.Equal(p.status, 200)
	is.True(p.has(`id="batch-bar" max="2" value="0"`))
	is.True(p.has(`hx-trigger="every 1s"`)) // htmx polls while it runs

	e.startWorkers()
	id := strings.TrimPrefix(c.location, "/dashboard/batches/")
	e.waitBatchDone(id)
	p = admin.get(c.location, "HX-Request", "true", "HX-Target", "batch-progress")
	is.True(strings.HasPrefix(strings.TrimSpace(p.body), `<section id="batch-progress"`)) // the fragment alone
	is.True(p.has(`value="2"`) && p.has("Done.") && !p.has("hx-trigger"))
	is.True(p.has(`<strong id="batch-credits">1</strong>`)) // globex.com is not found: refunded

	dl := viewer.get(c.location + "/results")
	is.Equal(dl.status, 200)
	is.True(strings.HasPrefix(dl.header.Get("Content-Type"), "text/csv"))
	recs := readCSV(t, []byte(dl.body))
	is.Equal(len(recs), 3)
	is.Equal(recs[1][:3], []string{"https://www.acme.com/", "ann", "succeeded"})
	is.Equal(recs[2][2], "failed")
	list := viewer.get("/dashboard/batches")
	is.True(list.has("crm.csv") && list.has(`value="2"`))

	// A form sent from another site makes nothing; another organization's admin
	// neither sees the batch nor downloads its results.
	forged := admin.do(http.MethodPost, "/dashboard/batches", confirmForm(admin.upload("crm.csv", file, "")), "Sec-Fetch-Site", "cross-site")
	is.Equal(forged.status, http.StatusForbidden)
	is.Equal(e.do("GET", "/v1/batches", nil).get("total"), float64(1))
	other := e.signIn("other", "admin")
	is.Equal(other.get(c.location).status, http.StatusNotFound)
	is.Equal(other.get(c.location+"/results").status, http.StatusNotFound)
	is.True(!other.get("/dashboard/batches").has("crm.csv"))
}

// TestDashboardUploadSkipsRefusedRows: a CRM's contacts, of both kinds and with
// malformed rows, are refused whole unless the Upload page's checkbox skips them: the
// preview then lists the skipped rows and counts what goes ahead, the batch is made of
// the others, and its page lists the skipped rows and the failed lookups with why, each
// failed lookup linked to its task. Enrich's select asks for a row's person and company.
func TestDashboardUploadSkipsRefusedRows(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	contacts := contactExport(e)
	file := contactsCSV(contacts)
	if _, err := e.db.GrantCredits(t.Context(), "acme", 200, nil); err != nil {
		t.Fatal(err)
	}
	admin := e.signIn("acme", "admin")

	p := admin.get("/dashboard/batches")
	is.True(p.has(`<input type="checkbox" name="on_error" value="skip">`))
	is.True(p.has(`<option value="company,person">`))

	all := admin.uploadForm("contacts.csv", file, "enrich", "")
	is.Equal(all.status, http.StatusBadRequest)
	is.True(all.has("5 of 51 rows are refused"))
	is.Equal(strings.Count(all.body, "<tr><td>"), 5)

	p = admin.uploadForm("contacts.csv", file, "enrich", "", "on_error", "skip")
	is.Equal(p.status, 200)
	is.True(p.has("51 rows of people and companies, every one checked: 5 refused, to be skipped."))
	is.True(p.has(`<span id="preview-lookups">35 people and 11 companies</span>`))
	is.True(p.has(`<strong id="preview-estimate">116</strong>`))
	is.True(p.has(`id="preview-skipped"`) && p.has("<td>4</td><td>5</td>")) // the first malformed row: row 4, line 5
	is.True(p.has("Enrich 46 rows"))
	is.Equal(e.do("GET", "/v1/batches", nil).get("total"), float64(0))
	form := confirmForm(p)
	is.Equal(form.Get("on_error"), "skip")
	is.Equal(form.Get("enrich"), "")
	c := admin.post("/dashboard/batches", form)
	is.Equal(c.status, http.StatusSeeOther)
	is.Equal(admin.post("/dashboard/batches", form).location, c.location) // a second click
	id := strings.TrimPrefix(c.location, "/dashboard/batches/")

	e.startWorkers()
	e.waitBatchDone(id)
	p = admin.get(c.location)
	is.Equal(p.status, 200)
	is.True(p.has("51 rows of people and companies"))
	is.True(p.has(`<span id="batch-done">51 of 51</span> lookups and skipped rows done`))
	is.True(p.has("<th>Skipped</th>"))
	is.True(p.has(`id="batch-failures"`))
	is.Equal(strings.Count(p.body, `<tr class="failure">`), 10) // 5 skipped, 5 lookups not found
	is.Equal(strings.Count(p.body, "none: refused at the upload"), 5)
	failed := regexp.MustCompile(`<a href="/dashboard/tasks/([0-9a-f-]{36})">`).FindAllStringSubmatch(p.body, -1)
	is.Equal(len(failed), 5)
	for _, m := range failed {
		task := e.do("GET", "/v1/tasks/"+m[1], nil)
		is.Equal(task.str("task.status"), "failed")
		is.True(strings.HasPrefix(task.str("task.idempotency_key"), "batch:"+id+":"))
		is.True(p.has("<code>" + task.str("error.code") + "</code> " + html.EscapeString(task.str("error.message"))))
	}
	is.Equal(admin.get("/dashboard/tasks/"+failed[0][1]).status, 200)
	recs := readCSV(t, []byte(admin.get(c.location+"/results").body))
	is.Equal(len(recs), 52)
	is.Equal(recs[4][5], "skipped")
	is.True(admin.get("/dashboard/batches").has("people and companies"))

	// A row's person and its company, chosen in the select.
	p = admin.uploadForm("contacts.csv", file, "enrich", "company,person", "on_error", "skip")
	is.Equal(p.status, 200)
	is.True(p.has(`<span id="preview-lookups">35 people and 31 companies</span>`))
	is.True(p.has(`<strong id="preview-estimate">136</strong>`))
	is.Equal(confirmForm(p).Get("enrich"), "company,person")
	bad := admin.uploadForm("contacts.csv", file, "enrich", "robots")
	is.Equal(bad.status, http.StatusBadRequest)
	is.True(bad.has("enrich must be company, person, or company,person"))
}
