package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"enrichd/server/servertest"

	"github.com/matryer/is"
)

// The Loops page creates a HubSpot Loop as POST /v1/loops does: a token HubSpot
// refuses is shown beside the form (422, nothing created, the token not echoed), the
// one accepted is never shown, only its last four characters; the Loop's page says
// what it writes into, lists what each delivery wrote, replaces the token and changes
// the options, and offers no secret to rotate.
func TestDashboardCreatesAndEditsAHubSpotLoop(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	hs := servertest.NewFakeHubSpot(t, servertest.HubspotToken)
	e := servertest.NewEnv(t, servertest.WithHubSpot(t, hs))
	servertest.JaneOnRecord(e)
	b := e.SignIn("acme", "admin")

	form := url.Values{"name": {"HubSpot people"}, "object_type": {"person"}, "enabled": {"on"}, "kind": {"hubspot"},
		"webhook_url": {"https://ignored.example/"}, "token": {"pat-na1-refused"}, "gdpr_delete": {"on"}}
	p := b.Post("/dashboard/loops", form)
	is.Equal(p.Status, http.StatusUnprocessableEntity)
	is.True(p.Has("HubSpot refused the token, so the Loop was not saved"))
	is.True(!p.Has("pat-na1-refused"))
	is.True(p.Has(`value="hubspot" checked`)) // the choices kept
	is.Equal(len(e.LoopsOf(e.Key)), 0)

	form.Set("token", servertest.HubspotToken)
	p = b.Post("/dashboard/loops", form)
	is.Equal(p.Status, http.StatusCreated)
	is.True(p.Has("HubSpot accepted its token"))
	is.True(!p.Has(servertest.HubspotToken) && !p.Has("loop-secret") && !p.Has("Rotate secret"))
	is.True(p.Has(`id="hubspot-destination"`) && p.Has("…abcd") && p.Has("an erasure deletes the contact"))
	id := e.OnlyLoopID()
	is.Equal(e.Do("GET", "/v1/loops/"+id, nil).Get("data.destination.gdpr_delete"), true)

	list := b.Get("/dashboard/loops")
	is.True(list.Has(`class="destination-hubspot"`) && list.Has("…abcd"))

	// A delivery's summary is on the Loop's page.
	e.StartWorkers()
	e.Do("POST", "/v1/loops/"+id+"/run", map[string]string{"email": "jane@acme.com"})
	e.WaitDelivery(id, servertest.Succeeded)
	contact := hs.Only(t, "contacts")
	page := b.Get("/dashboard/loops/" + id)
	is.True(page.Has(`class="summary">created contact ` + contact + ` with `))

	// Settings: a token HubSpot refuses changes nothing; options change.
	p = b.Post("/dashboard/loops/"+id, url.Values{"name": {"HubSpot people"}, "enabled": {"on"}, "token": {"pat-na1-nope"}, "refresh": {"on"}})
	is.Equal(p.Status, http.StatusUnprocessableEntity)
	is.True(p.Has("HubSpot refused the token"))
	is.Equal(e.Do("GET", "/v1/loops/"+id, nil).Get("data.destination.refresh"), false)
	p = b.Post("/dashboard/loops/"+id, url.Values{"name": {"HubSpot people"}, "enabled": {"on"}, "refresh": {"on"}})
	is.Equal(p.Status, http.StatusSeeOther) // on to the Loop's page
	got := e.Do("GET", "/v1/loops/"+id, nil)
	is.Equal(got.Get("data.destination.refresh"), true)
	is.Equal(got.Get("data.destination.gdpr_delete"), false) // unticked
	is.Equal(got.Str("data.destination.token_last4"), "…abcd")
	is.True(!strings.Contains(string(got.Raw), servertest.HubspotToken))

	// No secret to rotate, whatever is posted.
	p = b.Post("/dashboard/loops/"+id+"/rotate", url.Values{"grace_hours": {"0"}})
	is.Equal(p.Status, http.StatusBadRequest)
	is.True(p.Has("there is no secret to rotate"))
}
