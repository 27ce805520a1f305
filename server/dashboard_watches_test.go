package server_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// TestDashboardWatches: the Watches page lists the organization's watches and the
// month's spend; an admin creates one (refused as the API refuses it), pauses,
// resumes, checks it now and deletes it, each through the API's own checks.
func TestDashboardWatches(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	loopID, _ := e.createLoop("Company changes", "http://127.0.0.1:9/hook", "company")
	admin, viewer := e.signIn("acme", "admin"), e.signIn("acme", "viewer")

	p := admin.get("/dashboard/watches")
	is.Equal(p.status, http.StatusOK)
	is.True(p.has("No watches yet"))
	is.True(p.has("there is no monthly cap"))

	form := url.Values{"object_type": {"company"}, "domain": {"https://www.acme.com"}, "loop_id": {loopID}, "every_days": {"3"}}
	p = admin.post("/dashboard/watches", form)
	is.Equal(p.status, http.StatusBadRequest)
	is.True(p.has("every_days must be an integer from 7 to 365"))
	is.True(p.has(`value="https://www.acme.com"`)) // what was sent stays in the form
	is.Equal(e.watchTotal(), float64(0))

	form.Set("every_days", "14")
	form.Set("fields", "employee_count, headquarters")
	p = admin.post("/dashboard/watches", form)
	is.Equal(p.status, http.StatusSeeOther)
	list := e.do("GET", "/v1/watches", nil)
	is.Equal(list.get("total"), float64(1))
	w := list.get("data").([]any)[0].(map[string]any)
	id := w["id"].(string)
	is.Equal(w["every_days"], float64(14))
	is.Equal(w["fields"], []any{"employee_count", "headquarters"})
	p = admin.get(p.location)
	is.True(p.has("The watch is created"))
	is.True(p.has("acme.com") && p.has("Company changes") && p.has("14 days") && p.has("Check now"))
	is.True(p.has(`<p class="muted">1 watch.`)) // not "1 watches"

	// A viewer sees the list, not the buttons.
	v := viewer.get("/dashboard/watches")
	is.Equal(v.status, http.StatusOK)
	is.True(v.has("acme.com") && !v.has("Check now") && !v.has("Watch a record"))

	is.Equal(admin.post("/dashboard/watches/"+id+"/pause", url.Values{}).status, http.StatusSeeOther)
	is.Equal(e.do("GET", "/v1/watches/"+id, nil).get("data.enabled"), false)
	is.True(admin.get("/dashboard/watches").has("Resume"))
	is.Equal(admin.post("/dashboard/watches/"+id+"/resume", url.Values{}).status, http.StatusSeeOther)
	is.Equal(e.do("GET", "/v1/watches/"+id, nil).get("data.enabled"), true)

	p = admin.post("/dashboard/watches/"+id+"/run", url.Values{})
	is.Equal(p.status, http.StatusSeeOther)
	is.True(strings.HasPrefix(p.location, "/dashboard/tasks/"))
	taskID := strings.TrimPrefix(strings.SplitN(p.location, "?", 2)[0], "/dashboard/tasks/")
	is.Equal(e.do("GET", "/v1/tasks/"+taskID, nil).str("task.watch_id"), id)
	is.Equal(e.balance("acme").Charged, int64(1))

	is.Equal(admin.post("/dashboard/watches/"+id+"/delete", url.Values{}).status, http.StatusSeeOther)
	is.Equal(e.do("GET", "/v1/watches/"+id, nil).status, http.StatusNotFound)
}
