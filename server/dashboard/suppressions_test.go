package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"enrichd/server/servertest"

	"github.com/matryer/is"
)

// TestDashboardSuppressions: the Suppressions page lists the organization's entries by
// their masked hints; an admin adds one (refused as the API refuses it, what was sent
// kept in the form), a CSV of them (every row checked first, refused rows listed), and
// lifts one; a viewer only sees them; another organization's entry is not found.
func TestDashboardSuppressions(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	otherKey, _ := e.NewOrg("globex", 0)
	admin, viewer := e.SignIn("acme", "admin"), e.SignIn("acme", "viewer")

	p := admin.Get("/dashboard/suppressions")
	is.Equal(p.Status, http.StatusOK)
	is.True(p.Has("Nobody is suppressed"))
	is.True(p.Has(`<a href="/dashboard/suppressions" aria-current="page">Suppressions</a>`))

	for _, bad := range []url.Values{
		{"kind": {"email"}, "value": {"not an address"}},
		{"kind": {"domain"}, "value": {"jane@acme.com"}},
		{"kind": {"phone"}, "value": {"123"}},
		{"kind": {"email"}, "value": {""}},
		{"kind": {"email"}, "value": {"jane@acme.com"}, "reason": {strings.Repeat("x", 501)}},
	} {
		p = admin.Post("/dashboard/suppressions", bad)
		is.Equal(p.Status, http.StatusBadRequest)
		is.True(p.Has(`id="add-error"`))
	}
	is.True(p.Has(`value="jane@acme.com"`)) // what was sent stays in the form
	is.Equal(e.SuppressionsTotal(), 0.0)

	p = admin.Post("/dashboard/suppressions", url.Values{"kind": {"email"}, "value": {"Jane.Doe@Acme.com"}, "reason": {"asked on the phone"}})
	is.Equal(p.Status, http.StatusSeeOther)
	p = admin.Get(p.Location)
	is.True(p.Has("J***@acme.com is suppressed"))
	is.True(p.Has("<code>J***@acme.com</code>") && p.Has("asked on the phone") && p.Has("admin@acme.example"))
	is.True(!strings.Contains(strings.ToLower(p.Body), "jane.doe")) // never the address
	api := e.Do("GET", "/v1/suppressions", nil)
	is.Equal(api.Get("total"), 1.0)
	entry := api.Get("data").([]any)[0].(map[string]any)
	is.Equal(entry["added_by"].(map[string]any)["kind"], "user")
	id := entry["id"].(string)

	// The same subject again is refused as the API refuses it.
	p = admin.Post("/dashboard/suppressions", url.Values{"kind": {"email"}, "value": {"jane.doe@acme.com"}})
	is.Equal(p.Status, http.StatusConflict)
	is.True(p.Has("already suppressed"))

	// A CSV: one bad row adds none; a good file adds every new row.
	p = admin.UploadSuppressions("list.csv", "email,domain,name\nok@acme.com,,Ok\nbad,,Bad\n,initech.com,\n")
	is.Equal(p.Status, http.StatusBadRequest)
	is.True(p.Has(`id="import-refused"`) && p.Has("<td>2</td><td>3</td>"))
	is.Equal(e.SuppressionsTotal(), 1.0)
	p = admin.UploadSuppressions("list.csv", "email,domain,name\nok@acme.com,,Ok\n,initech.com,\njane.doe@acme.com,,again\n")
	is.Equal(p.Status, http.StatusSeeOther)
	p = admin.Get(p.Location)
	is.True(p.Has("2 suppressions added; 1 row was suppressed already."))
	is.True(p.Has("i***.com") && p.Has("the company and every address at it"))
	is.Equal(e.SuppressionsTotal(), 3.0)

	// A viewer sees the list, not the forms, and may not change it.
	v := viewer.Get("/dashboard/suppressions")
	is.Equal(v.Status, http.StatusOK)
	is.True(v.Has("J***@acme.com") && !v.Has("Lift…") && !v.Has(`id="add-suppression"`))
	is.Equal(viewer.Post("/dashboard/suppressions", url.Values{"kind": {"email"}, "value": {"x@acme.com"}}).Status, http.StatusForbidden)
	is.Equal(viewer.Post("/dashboard/suppressions/"+id+"/lift", url.Values{}).Status, http.StatusForbidden)
	is.Equal(e.SuppressionsTotal(), 3.0)

	// Another organization's entry, or none, is not found.
	theirs := e.Do("POST", "/v1/suppressions", map[string]any{"email": "x@globex.com"}, "Authorization", "Bearer "+otherKey)
	is.Equal(theirs.Status, http.StatusCreated)
	is.Equal(admin.Post("/dashboard/suppressions/"+theirs.Str("data.id")+"/lift", url.Values{}).Status, http.StatusNotFound)
	is.Equal(admin.Post("/dashboard/suppressions/nope/lift", url.Values{}).Status, http.StatusNotFound)
	is.Equal(e.SuppressionsTotal("Authorization", "Bearer "+otherKey), 1.0)

	p = admin.Post("/dashboard/suppressions/"+id+"/lift", url.Values{})
	is.Equal(p.Status, http.StatusSeeOther)
	is.True(admin.Get(p.Location).Has("The suppression of J***@acme.com is lifted"))
	is.Equal(e.SuppressionsTotal(), 2.0)
}

// TestDashboardTryItOfASuppressedSubject: Try it makes the task the API makes, which
// fails at once, refunded, with no source asked.
func TestDashboardTryItOfASuppressedSubject(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.Net.AddCompany(servertest.Company("Initech", "initech.com"))
	e.StartWorkers()
	e.Suppress(map[string]any{"domain": "initech.com"})
	b := e.SignIn("acme", "admin")
	p := b.Post("/dashboard/try", tryForm("company_domain", "domain", "www.initech.com"))
	is.Equal(p.Status, http.StatusSeeOther)
	to, err := url.Parse(p.Location)
	is.NoErr(err)
	is.Equal(to.Query().Get("notice"), "The task failed at once; its 1 credit was refunded.")
	page := b.Get(p.Location)
	is.Equal(page.TaskStatus(), "failed")
	is.True(page.Has("initech.com is suppressed"))
	is.Equal(e.Net.Calls.Load(), int64(0))
	is.Equal(e.Balance("acme").Balance, int64(100))
}
