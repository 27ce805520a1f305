package server_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// The Loops page creates a HubSpot Loop as POST /v1/loops does: a token HubSpot
// refuses is shown beside the form (422, nothing created, the token not echoed), the
// one accepted is never shown, only its last four characters; the Loop's page says
// what it writes into, lists what each delivery wrote, replaces the token and changes
// the options, and offers no secret to rotate.
func TestDashboardCreatesAndEditsAHubSpotLoop(t *testing.T) {
	is := is.New(t)
	hs := newFakeHubSpot(t, hubspotToken)
	e := newEnv(t, withHubSpot(t, hs))
	janeOnRecord(e)
	b := e.signIn("acme", "admin")

	form := url.Values{"name": {"HubSpot people"}, "object_type": {"person"}, "enabled": {"on"}, "kind": {"hubspot"},
		"webhook_url": {"https://ignored.example/"}, "token": {"pat-na1-refused"}, "gdpr_delete": {"on"}}
	p := b.post("/dashboard/loops", form)
	is.Equal(p.status, http.StatusUnprocessableEntity)
	is.True(p.has("HubSpot refused the token, so the Loop was not saved"))
	is.True(!p.has("pat-na1-refused"))
	is.True(p.has(`value="hubspot" checked`)) // the choices kept
	is.Equal(len(e.loopsOf(e.key)), 0)

	form.Set("token", hubspotToken)
	p = b.post("/dashboard/loops", form)
	is.Equal(p.status, http.StatusCreated)
	is.True(p.has("HubSpot accepted its token"))
	is.True(!p.has(hubspotToken) && !p.has("loop-secret") && !p.has("Rotate secret"))
	is.True(p.has(`id="hubspot-destination"`) && p.has("…abcd") && p.has("an erasure deletes the contact"))
	id := e.onlyLoopID()
	is.Equal(e.do("GET", "/v1/loops/"+id, nil).get("data.destination.gdpr_delete"), true)

	list := b.get("/dashboard/loops")
	is.True(list.has(`class="destination-hubspot"`) && list.has("…abcd"))

	// A delivery's summary is on the Loop's page.
	e.startWorkers()
	e.do("POST", "/v1/loops/"+id+"/run", map[string]string{"email": "jane@acme.com"})
	e.waitDelivery(id, succeeded)
	contact := hs.only(t, "contacts")
	page := b.get("/dashboard/loops/" + id)
	is.True(page.has(`class="summary">created contact ` + contact + ` with `))

	// Settings: a token HubSpot refuses changes nothing; options change.
	p = b.post("/dashboard/loops/"+id, url.Values{"name": {"HubSpot people"}, "enabled": {"on"}, "token": {"pat-na1-nope"}, "refresh": {"on"}})
	is.Equal(p.status, http.StatusUnprocessableEntity)
	is.True(p.has("HubSpot refused the token"))
	is.Equal(e.do("GET", "/v1/loops/"+id, nil).get("data.destination.refresh"), false)
	p = b.post("/dashboard/loops/"+id, url.Values{"name": {"HubSpot people"}, "enabled": {"on"}, "refresh": {"on"}})
	is.Equal(p.status, http.StatusSeeOther) // on to the Loop's page
	got := e.do("GET", "/v1/loops/"+id, nil)
	is.Equal(got.get("data.destination.refresh"), true)
	is.Equal(got.get("data.destination.gdpr_delete"), false) // unticked
	is.Equal(got.str("data.destination.token_last4"), "…abcd")
	is.True(!strings.Contains(string(got.raw), hubspotToken))

	// No secret to rotate, whatever is posted.
	p = b.post("/dashboard/loops/"+id+"/rotate", url.Values{"grace_hours": {"0"}})
	is.Equal(p.status, http.StatusBadRequest)
	is.True(p.has("there is no secret to rotate"))
}
