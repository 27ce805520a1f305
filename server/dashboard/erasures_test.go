package dashboard_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"enrichd/server/servertest"

	"github.com/matryer/is"
)

// TestDashboardErasures: an admin erases a person from the Erasures page, which asks
// to confirm first and erases nothing until then; the erasure is made as the API
// makes it (the tasks kept without her, the Loop told, the person suppressed) and
// listed by masked hints; bad input is refused as the API refuses it, what was sent
// kept in the form; the export downloads the API's document; a viewer sees the list,
// not the forms, and may do neither.
func TestDashboardErasures(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks, servertest.ErasuresOften)
	servertest.RosaNetwork(e)
	e.StartWorkers()
	rcv := servertest.NewReceiver(t)
	servertest.LookUpRosaEverywhere(t, e, rcv)
	admin, viewer := e.SignIn("acme", "admin"), e.SignIn("acme", "viewer")

	p := admin.Get("/dashboard/erasures")
	is.Equal(p.Status, http.StatusOK)
	is.True(p.Has("Nobody has been erased"))
	is.True(p.Has(`<a href="/dashboard/erasures" aria-current="page">Erasures</a>`))
	is.True(p.Has(`id="erase-person"`) && p.Has(`id="export-person"`))

	for _, bad := range []url.Values{
		{"kind": {"email"}, "value": {"not an address"}},
		{"kind": {"networkUrl"}, "value": {"https://www.linkedin.com/company/acme"}},
		{"kind": {"domain"}, "value": {"acme.com"}},
		{"kind": {"email"}, "value": {""}},
		{"kind": {"email"}, "value": {"rosa\x00@acme.com"}},
	} {
		for _, confirm := range []string{"", "yes"} {
			form := url.Values{"confirm": {confirm}}
			for k, v := range bad {
				form[k] = v
			}
			p = admin.Post("/dashboard/erasures", form)
			is.Equal(p.Status, http.StatusBadRequest)
			is.True(p.Has(`id="erase-error"`))
		}
	}
	is.True(p.Has(`id="erase-person"`))
	p = admin.Post("/dashboard/erasures/export", url.Values{"kind": {"email"}, "value": {"rosa"}})
	is.Equal(p.Status, http.StatusBadRequest)
	is.True(p.Has(`id="export-error"`) && p.Has(`value="rosa"`))

	// The export downloads what the API answers.
	p = admin.Post("/dashboard/erasures/export", url.Values{"kind": {"email"}, "value": {servertest.Rosa.Email}})
	is.Equal(p.Status, http.StatusOK)
	is.True(strings.HasPrefix(p.Header.Get("Content-Disposition"), `attachment; filename="person-export-`))
	is.Equal(p.Header.Get("Content-Type"), "application/json")
	var x struct {
		Identifiers struct {
			NetworkURLs []string `json:"networkUrls"`
		}
		Tasks []map[string]any
	}
	is.NoErr(json.Unmarshal([]byte(p.Body), &x))
	is.Equal(x.Identifiers.NetworkURLs, []string{servertest.Rosa.URL})
	is.Equal(len(x.Tasks), 3)

	// The first post asks to confirm, and erases nothing.
	p = admin.Post("/dashboard/erasures", url.Values{"kind": {"networkUrl"}, "value": {servertest.Rosa.URL}})
	is.Equal(p.Status, http.StatusOK)
	is.True(p.Has(`id="confirm-erasure"`) && p.Has("Erase <code>https://www.linkedin.com/in/r***</code>?"))
	is.True(p.Has(`name="confirm" value="yes"`))
	is.Equal(e.Do("GET", "/v1/erasures", nil).Get("total"), 0.0)
	is.Equal(e.Do("GET", "/v1/suppressions", nil).Get("total"), 0.0)

	// A viewer may do neither.
	v := viewer.Get("/dashboard/erasures")
	is.Equal(v.Status, http.StatusOK)
	is.True(!v.Has(`id="erase-person"`) && !v.Has(`id="export-person"`) && v.Has("Your role is viewer"))
	is.Equal(viewer.Post("/dashboard/erasures", url.Values{"kind": {"networkUrl"}, "value": {servertest.Rosa.URL}, "confirm": {"yes"}}).Status, http.StatusForbidden)
	is.Equal(viewer.Post("/dashboard/erasures/export", url.Values{"kind": {"networkUrl"}, "value": {servertest.Rosa.URL}}).Status, http.StatusForbidden)
	is.Equal(e.Do("GET", "/v1/erasures", nil).Get("total"), 0.0)

	p = admin.Post("/dashboard/erasures", url.Values{"kind": {"networkUrl"}, "value": {servertest.Rosa.URL}, "confirm": {"yes"}})
	is.Equal(p.Status, http.StatusSeeOther)
	p = admin.Get(p.Location)
	is.True(p.Has("https://www.linkedin.com/in/r*** is erased from everything your organization holds, and suppressed. 1 Loop that was sent them is being told."))
	is.True(p.Has(`id="erasures"`) && p.Has("<code>r***@acme.com</code>") && p.Has("admin@acme.example"))
	is.True(p.Has(`3 tasks</span>, `) && p.Has(`1 batch row</span>, `) && p.Has(`1 watch</span>`) && p.Has("CRM people"))
	for _, s := range servertest.RosaSays {
		is.True(!strings.Contains(p.Body, s)) // never her
	}
	api := e.Do("GET", "/v1/erasures", nil)
	is.Equal(api.Get("total"), 1.0)
	is.Equal(api.Str("data.0.requested_by.kind"), "user")
	e.WaitErasureComplete(api.Str("data.0.id"))
	is.True(admin.Get("/dashboard/erasures").Has(`>done</span>`))
	is.Equal(e.Do("GET", "/v1/suppressions", nil).Get("total"), 2.0)
}
