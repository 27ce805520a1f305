package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"enrichd/server/servertest"

	"github.com/matryer/is"
)

// TestDashboardWatches: the Watches page lists the organization's watches and the
// month's spend; an admin creates one (refused as the API refuses it), pauses,
// resumes, checks it now and deletes it, each through the API's own checks.
func TestDashboardWatches(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	loopID, _ := e.CreateLoop("Company changes", "http://127.0.0.1:9/hook", "company")
	admin, viewer := e.SignIn("acme", "admin"), e.SignIn("acme", "viewer")

	p := admin.Get("/dashboard/watches")
	is.Equal(p.Status, http.StatusOK)
	is.True(p.Has("No watches yet"))
	is.True(p.Has("there is no monthly cap"))

	form := url.Values{"object_type": {"company"}, "domain": {"https://www.acme.com"}, "loop_id": {loopID}, "every_days": {"3"}}
	p = admin.Post("/dashboard/watches", form)
	is.Equal(p.Status, http.StatusBadRequest)
	is.True(p.Has("every_days must be an integer from 7 to 365"))
	is.True(p.Has(`value="https://www.acme.com"`)) // what was sent stays in the form
	is.Equal(e.WatchTotal(), float64(0))

	form.Set("every_days", "14")
	form.Set("fields", "employee_count, headquarters")
	p = admin.Post("/dashboard/watches", form)
	is.Equal(p.Status, http.StatusSeeOther)
	list := e.Do("GET", "/v1/watches", nil)
	is.Equal(list.Get("total"), float64(1))
	w := list.Get("data").([]any)[0].(map[string]any)
	id := w["id"].(string)
	is.Equal(w["every_days"], float64(14))
	is.Equal(w["fields"], []any{"employee_count", "headquarters"})
	p = admin.Get(p.Location)
	is.True(p.Has("The watch is created"))
	is.True(p.Has("acme.com") && p.Has("Company changes") && p.Has("14 days") && p.Has("Check now"))
	is.True(p.Has(`<p class="muted">1 watch.`)) // not "1 watches"

	// A viewer sees the list, not the buttons.
	v := viewer.Get("/dashboard/watches")
	is.Equal(v.Status, http.StatusOK)
	is.True(v.Has("acme.com") && !v.Has("Check now") && !v.Has("Watch a record"))

	is.Equal(admin.Post("/dashboard/watches/"+id+"/pause", url.Values{}).Status, http.StatusSeeOther)
	is.Equal(e.Do("GET", "/v1/watches/"+id, nil).Get("data.enabled"), false)
	is.True(admin.Get("/dashboard/watches").Has("Resume"))
	is.Equal(admin.Post("/dashboard/watches/"+id+"/resume", url.Values{}).Status, http.StatusSeeOther)
	is.Equal(e.Do("GET", "/v1/watches/"+id, nil).Get("data.enabled"), true)

	p = admin.Post("/dashboard/watches/"+id+"/run", url.Values{})
	is.Equal(p.Status, http.StatusSeeOther)
	is.True(strings.HasPrefix(p.Location, "/dashboard/tasks/"))
	taskID := strings.TrimPrefix(strings.SplitN(p.Location, "?", 2)[0], "/dashboard/tasks/")
	is.Equal(e.Do("GET", "/v1/tasks/"+taskID, nil).Str("task.watch_id"), id)
	is.Equal(e.Balance("acme").Charged, int64(1))

	is.Equal(admin.Post("/dashboard/watches/"+id+"/delete", url.Values{}).Status, http.StatusSeeOther)
	is.Equal(e.Do("GET", "/v1/watches/"+id, nil).Status, http.StatusNotFound)
}
