package server_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// TestDashboardErasures: an admin erases a person from the Erasures page, which asks
// to confirm first and erases nothing until then; the erasure is made as the API
// makes it (the tasks kept without her, the Loop told, the person suppressed) and
// listed by masked hints; bad input is refused as the API refuses it, what was sent
// kept in the form; the export downloads the API's document; a viewer sees the list,
// not the forms, and may do neither.
func TestDashboardErasures(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks, erasuresOften)
	rosaNetwork(e)
	e.startWorkers()
	rcv := newReceiver(t)
	lookUpRosaEverywhere(t, e, rcv)
	admin, viewer := e.signIn("acme", "admin"), e.signIn("acme", "viewer")

	p := admin.get("/dashboard/erasures")
	is.Equal(p.status, http.StatusOK)
	is.True(p.has("Nobody has been erased"))
	is.True(p.has(`<a href="/dashboard/erasures" aria-current="page">Erasures</a>`))
	is.True(p.has(`id="erase-person"`) && p.has(`id="export-person"`))

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
			p = admin.post("/dashboard/erasures", form)
			is.Equal(p.status, http.StatusBadRequest)
			is.True(p.has(`id="erase-error"`))
		}
	}
	is.True(p.has(`id="erase-person"`))
	p = admin.post("/dashboard/erasures/export", url.Values{"kind": {"email"}, "value": {"rosa"}})
	is.Equal(p.status, http.StatusBadRequest)
	is.True(p.has(`id="export-error"`) && p.has(`value="rosa"`))

	// The export downloads what the API answers.
	p = admin.post("/dashboard/erasures/export", url.Values{"kind": {"email"}, "value": {rosa.email}})
	is.Equal(p.status, http.StatusOK)
	is.True(strings.HasPrefix(p.header.Get("Content-Disposition"), `attachment; filename="person-export-`))
	is.Equal(p.header.Get("Content-Type"), "application/json")
	var x struct {
		Identifiers struct {
			NetworkURLs []string `json:"networkUrls"`
		}
		Tasks []map[string]any
	}
	is.NoErr(json.Unmarshal([]byte(p.body), &x))
	is.Equal(x.Identifiers.NetworkURLs, []string{rosa.url})
	is.Equal(len(x.Tasks), 3)

	// The first post asks to confirm, and erases nothing.
	p = admin.post("/dashboard/erasures", url.Values{"kind": {"networkUrl"}, "value": {rosa.url}})
	is.Equal(p.status, http.StatusOK)
	is.True(p.has(`id="confirm-erasure"`) && p.has("Erase <code>https://www.linkedin.com/in/r***</code>?"))
	is.True(p.has(`name="confirm" value="yes"`))
	is.Equal(e.do("GET", "/v1/erasures", nil).get("total"), 0.0)
	is.Equal(e.do("GET", "/v1/suppressions", nil).get("total"), 0.0)

	// A viewer may do neither.
	v := viewer.get("/dashboard/erasures")
	is.Equal(v.status, http.StatusOK)
	is.True(!v.has(`id="erase-person"`) && !v.has(`id="export-person"`) && v.has("Your role is viewer"))
	is.Equal(viewer.post("/dashboard/erasures", url.Values{"kind": {"networkUrl"}, "value": {rosa.url}, "confirm": {"yes"}}).status, http.StatusForbidden)
	is.Equal(viewer.post("/dashboard/erasures/export", url.Values{"kind": {"networkUrl"}, "value": {rosa.url}}).status, http.StatusForbidden)
	is.Equal(e.do("GET", "/v1/erasures", nil).get("total"), 0.0)

	p = admin.post("/dashboard/erasures", url.Values{"kind": {"networkUrl"}, "value": {rosa.url}, "confirm": {"yes"}})
	is.Equal(p.status, http.StatusSeeOther)
	p = admin.get(p.location)
	is.True(p.has("https://www.linkedin.com/in/r*** is erased from everything your organization holds, and suppressed. 1 Loop that was sent them is being told."))
	is.True(p.has(`id="erasures"`) && p.has("<code>r***@acme.com</code>") && p.has("admin@acme.example"))
	is.True(p.has(`3 tasks</span>, `) && p.has(`1 batch row</span>, `) && p.has(`1 watch</span>`) && p.has("CRM people"))
	for _, s := range rosaSays {
		is.True(!strings.Contains(p.body, s)) // never her
	}
	api := e.do("GET", "/v1/erasures", nil)
	is.Equal(api.get("total"), 1.0)
	is.Equal(api.str("data.0.requested_by.kind"), "user")
	e.waitErasureComplete(api.str("data.0.id"))
	is.True(admin.get("/dashboard/erasures").has(`>done</span>`))
	is.Equal(e.do("GET", "/v1/suppressions", nil).get("total"), 2.0)
}
