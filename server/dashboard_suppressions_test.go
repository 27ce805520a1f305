package server_test

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// uploadSuppressions sends a CSV through the Suppressions page's list form, as a
// browser does.
func (b *browser) uploadSuppressions(name, content string) *webPage {
	b.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", name)
	io.WriteString(fw, content)
	mw.Close()
	req, _ := http.NewRequest(http.MethodPost, b.e.http.URL+"/dashboard/suppressions", &body)
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

// TestDashboardSuppressions: the Suppressions page lists the organization's entries by
// their masked hints; an admin adds one (refused as the API refuses it, what was sent
// kept in the form), a CSV of them (every row checked first, refused rows listed), and
// lifts one; a viewer only sees them; another organization's entry is not found.
func TestDashboardSuppressions(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	otherKey, _ := e.newOrg("globex", 0)
	admin, viewer := e.signIn("acme", "admin"), e.signIn("acme", "viewer")

	p := admin.get("/dashboard/suppressions")
	is.Equal(p.status, http.StatusOK)
	is.True(p.has("Nobody is suppressed"))
	is.True(p.has(`<a href="/dashboard/suppressions" aria-current="page">Suppressions</a>`))

	for _, bad := range []url.Values{
		{"kind": {"email"}, "value": {"not an address"}},
		{"kind": {"domain"}, "value": {"jane@acme.com"}},
		{"kind": {"phone"}, "value": {"123"}},
		{"kind": {"email"}, "value": {""}},
		{"kind": {"email"}, "value": {"jane@acme.com"}, "reason": {strings.Repeat("x", 501)}},
	} {
		p = admin.post("/dashboard/suppressions", bad)
		is.Equal(p.status, http.StatusBadRequest)
		is.True(p.has(`id="add-error"`))
	}
	is.True(p.has(`value="jane@acme.com"`)) // what was sent stays in the form
	is.Equal(e.suppressionsTotal(), 0.0)

	p = admin.post("/dashboard/suppressions", url.Values{"kind": {"email"}, "value": {"Jane.Doe@Acme.com"}, "reason": {"asked on the phone"}})
	is.Equal(p.status, http.StatusSeeOther)
	p = admin.get(p.location)
	is.True(p.has("J***@acme.com is suppressed"))
	is.True(p.has("<code>J***@acme.com</code>") && p.has("asked on the phone") && p.has("admin@acme.example"))
	is.True(!strings.Contains(strings.ToLower(p.body), "jane.doe")) // never the address
	api := e.do("GET", "/v1/suppressions", nil)
	is.Equal(api.get("total"), 1.0)
	entry := api.get("data").([]any)[0].(map[string]any)
	is.Equal(entry["added_by"].(map[string]any)["kind"], "user")
	id := entry["id"].(string)

	// The same subject again is refused as the API refuses it.
	p = admin.post("/dashboard/suppressions", url.Values{"kind": {"email"}, "value": {"jane.doe@acme.com"}})
	is.Equal(p.status, http.StatusConflict)
	is.True(p.has("already suppressed"))

	// A CSV: one bad row adds none; a good file adds every new row.
	p = admin.uploadSuppressions("list.csv", "email,domain,name\nok@acme.com,,Ok\nbad,,Bad\n,initech.com,\n")
	is.Equal(p.status, http.StatusBadRequest)
	is.True(p.has(`id="import-refused"`) && p.has("<td>2</td><td>3</td>"))
	is.Equal(e.suppressionsTotal(), 1.0)
	p = admin.uploadSuppressions("list.csv", "email,domain,name\nok@acme.com,,Ok\n,initech.com,\njane.doe@acme.com,,again\n")
	is.Equal(p.status, http.StatusSeeOther)
	p = admin.get(p.location)
	is.True(p.has("2 suppressions added; 1 row was suppressed already."))
	is.True(p.has("i***.com") && p.has("the company and every address at it"))
	is.Equal(e.suppressionsTotal(), 3.0)

	// A viewer sees the list, not the forms, and may not change it.
	v := viewer.get("/dashboard/suppressions")
	is.Equal(v.status, http.StatusOK)
	is.True(v.has("J***@acme.com") && !v.has("Lift…") && !v.has(`id="add-suppression"`))
	is.Equal(viewer.post("/dashboard/suppressions", url.Values{"kind": {"email"}, "value": {"x@acme.com"}}).status, http.StatusForbidden)
	is.Equal(viewer.post("/dashboard/suppressions/"+id+"/lift", url.Values{}).status, http.StatusForbidden)
	is.Equal(e.suppressionsTotal(), 3.0)

	// Another organization's entry, or none, is not found.
	theirs := e.do("POST", "/v1/suppressions", map[string]any{"email": "x@globex.com"}, "Authorization", "Bearer "+otherKey)
	is.Equal(theirs.status, http.StatusCreated)
	is.Equal(admin.post("/dashboard/suppressions/"+theirs.str("data.id")+"/lift", url.Values{}).status, http.StatusNotFound)
	is.Equal(admin.post("/dashboard/suppressions/nope/lift", url.Values{}).status, http.StatusNotFound)
	is.Equal(e.suppressionsTotal("Authorization", "Bearer "+otherKey), 1.0)

	p = admin.post("/dashboard/suppressions/"+id+"/lift", url.Values{})
	is.Equal(p.status, http.StatusSeeOther)
	is.True(admin.get(p.location).has("The suppression of J***@acme.com is lifted"))
	is.Equal(e.suppressionsTotal(), 2.0)
}

// TestDashboardTryItOfASuppressedSubject: Try it makes the task the API makes, which
// fails at once, refunded, with no source asked.
func TestDashboardTryItOfASuppressedSubject(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.net.addCompany(company("Initech", "initech.com"))
	e.startWorkers()
	e.suppress(map[string]any{"domain": "initech.com"})
	b := e.signIn("acme", "admin")
	p := b.post("/dashboard/try", tryForm("company_domain", "domain", "www.initech.com"))
	is.Equal(p.status, http.StatusSeeOther)
	to, err := url.Parse(p.location)
	is.NoErr(err)
	is.Equal(to.Query().Get("notice"), "The task failed at once; its 1 credit was refunded.")
	page := b.get(p.location)
	is.Equal(page.taskStatus(), "failed")
	is.True(page.has("initech.com is suppressed"))
	is.Equal(e.net.calls.Load(), int64(0))
	is.Equal(e.balance("acme").Balance, int64(100))
}
