package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"enrichd/server/servertest"

	"github.com/matryer/is"
)

// A people Loop finds the contact by the address looked up: the title a person typed
// is kept, the blank name and city filled. A lookup by profile alone, with no address,
// is skipped with the reason in the history; a failed task too.
func TestHubSpotPeopleLoopWritesContactsFoundByEmail(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	hs := servertest.NewFakeHubSpot(t, servertest.HubspotToken)
	e := servertest.NewEnv(t, servertest.WithHubSpot(t, hs))
	servertest.JaneOnRecord(e)
	contact := hs.Put("contacts", map[string]string{"email": "jane@acme.com", "jobtitle": "Chief Technology Officer", "lifecyclestage": "customer"})
	loopID := e.CreateHubSpotLoop("HubSpot people", "person", nil)
	e.StartWorkers()

	r := e.Do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"email": "jane@acme.com"})
	is.True(r.Status == http.StatusAccepted || r.Status == http.StatusOK)
	d := e.WaitDelivery(loopID, servertest.Succeeded)
	is.Equal(d["summary"], "contact "+contact+": filled city, company, country, firstname, hs_linkedin_url, lastname; kept the values already there in jobtitle")
	is.Equal(hs.Object("contacts", contact), map[string]string{"email": "jane@acme.com", "jobtitle": "Chief Technology Officer", "lifecyclestage": "customer",
		"firstname": "Jane", "lastname": "Doe", "company": "Acme", "city": "Berlin", "country": "DE", "hs_linkedin_url": "https://www.linkedin.com/in/jane-doe"})

	byProfile := e.Do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"networkUrl": "https://www.linkedin.com/in/jane-doe"})
	d = e.WaitDelivery(loopID, func(d map[string]any) bool {
		return servertest.Succeeded(d) && d["task_id"] == byProfile.Str("task.id")
	})
	is.Equal(d["summary"], "skipped: the lookup was by profile, with no email address, and HubSpot's contacts are found by email")
	is.Equal(hs.Count("contacts"), 1)

	unknown := e.Do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"networkUrl": "https://www.linkedin.com/in/nobody-here"})
	d = e.WaitDelivery(loopID, func(d map[string]any) bool { return servertest.Succeeded(d) && d["task_id"] == unknown.Str("task.id") })
	is.Equal(d["event"], "task.failed")
	is.Equal(d["summary"], "skipped: the task failed, there is nothing to write")

	test := e.Do("POST", "/v1/loops/"+loopID+"/test", nil)
	is.Equal(test.Status, http.StatusAccepted)
	d = e.WaitDelivery(loopID, func(d map[string]any) bool { return servertest.Succeeded(d) && d["event"] == "test" })
	is.Equal(d["summary"], "HubSpot accepted the token (a page of contacts read)")
}

// With refresh, a value enrichd wrote is rewritten when the record changes, and a
// value a person typed over it is not; provenance says which source gave each field.
func TestHubSpotRefreshRewritesOnlyWhatEnrichdWrote(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	hs := servertest.NewFakeHubSpot(t, servertest.HubspotToken)
	e := servertest.NewEnv(t, servertest.WithHubSpot(t, hs))
	acme := servertest.Company("Acme", "acme.com")
	acme.About = strPtr("Rockets.")
	e.Net.AddCompany(acme)
	loopID := e.CreateHubSpotLoop("HubSpot", "company", map[string]any{"refresh": true, "provenance": true})
	is.Equal(hs.CallsTo("POST", "/properties/companies"), 1)
	e.StartWorkers()

	r := e.Do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"domain": "acme.com"})
	e.WaitDelivery(loopID, func(d map[string]any) bool { return servertest.Succeeded(d) && d["task_id"] == r.Str("task.id") })
	id := hs.Only(t, "companies")
	got := hs.Object("companies", id)
	is.Equal(got["description"], "Rockets.")
	is.Equal(got["numberofemployees"], "42")
	is.True(strings.Contains(got["enrichd_provenance"], "numberofemployees: fake-network"))

	// Someone rewrites the description; the company grows; a month later it is
	// looked up again.
	hs.Mu.Lock()
	hs.Objects["companies"][id]["description"] = "Rockets, typed by sales."
	hs.Mu.Unlock()
	grown := servertest.Company("Acme", "acme.com")
	grown.About, grown.EmployeeCount = strPtr("Rockets and anvils."), int64Ptr(420)
	e.Net.AddCompany(grown)
	e.Clock.Add(31 * 24 * time.Hour)
	r = e.Do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"domain": "acme.com"})
	d := e.WaitDelivery(loopID, func(d map[string]any) bool { return servertest.Succeeded(d) && d["task_id"] == r.Str("task.id") })
	is.Equal(d["summary"], "company "+id+": refreshed numberofemployees; kept the values already there in description")
	got = hs.Object("companies", id)
	is.Equal(got["numberofemployees"], "420")                // enrichd's own: refreshed
	is.Equal(got["description"], "Rockets, typed by sales.") // typed: kept
	is.Equal(hs.Count("companies"), 1)
}

// An erasure tells both people Loops that were sent Jane: the one without gdpr_delete
// leaves HubSpot's contact (skipped, with the reason); the one with it deletes the
// contact under HubSpot's GDPR delete, by id. What enrichd kept of its writes goes.
func TestHubSpotErasureDeletesTheContactOnlyWhereTheLoopSaysSo(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	hs := servertest.NewFakeHubSpot(t, servertest.HubspotToken)
	e := servertest.NewEnv(t, servertest.WithHubSpot(t, hs), servertest.ErasuresOften)
	servertest.JaneOnRecord(e)
	keeps := e.CreateHubSpotLoop("Keeps", "person", nil)
	deletes := e.CreateHubSpotLoop("Deletes", "person", map[string]any{"gdpr_delete": true})
	e.StartWorkers()
	for _, l := range []string{keeps, deletes} {
		e.Do("POST", "/v1/loops/"+l+"/run", map[string]string{"email": "jane@acme.com"})
		e.WaitDelivery(l, servertest.Succeeded)
	}
	contact := hs.Only(t, "contacts")
	var kept int
	is.NoErr(e.DB.Reader().QueryRow(t.Context(), `SELECT count(*) FROM hubspot_writes`).Scan(&kept))
	is.Equal(kept, 2)

	r := e.Do("POST", "/v1/erasures", map[string]any{"email": "jane@acme.com"})
	is.Equal(r.Status, http.StatusCreated)
	is.Equal(len(r.Get("data.loops").([]any)), 2)
	d := e.WaitDelivery(keeps, func(d map[string]any) bool { return d["event"] == "person.erased" && servertest.Succeeded(d) })
	is.Equal(d["summary"], "skipped: this Loop keeps its HubSpot contacts on an erasure (gdpr_delete is off)")
	d = e.WaitDelivery(deletes, func(d map[string]any) bool { return d["event"] == "person.erased" && servertest.Succeeded(d) })
	is.Equal(d["summary"], "deleted contact "+contact+" under HubSpot's GDPR delete")
	is.Equal(hs.Count("contacts"), 0)
	hs.Mu.Lock()
	is.Equal(hs.GdprDeleted, []string{contact})
	hs.Mu.Unlock()
	is.NoErr(e.DB.Reader().QueryRow(t.Context(), `SELECT count(*) FROM hubspot_writes`).Scan(&kept))
	is.Equal(kept, 0)
}

// A default property the portal does not have is left out, and the delivery says so,
// rather than failing every attempt on HubSpot's 400.
func TestHubSpotLeavesOutAPropertyThePortalDoesNotHave(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	hs := servertest.NewFakeHubSpot(t, servertest.HubspotToken)
	hs.Missing = map[string]bool{"hs_linkedin_url": true}
	e := servertest.NewEnv(t, servertest.WithHubSpot(t, hs))
	servertest.JaneOnRecord(e)
	loopID := e.CreateHubSpotLoop("HubSpot people", "person", nil)
	e.StartWorkers()

	e.Do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"email": "jane@acme.com"})
	d := e.WaitDelivery(loopID, servertest.Succeeded)
	id := hs.Only(t, "contacts")
	is.Equal(d["summary"], "created contact "+id+" with city, company, country, email, firstname, jobtitle, lastname; left out hs_linkedin_url, which HubSpot does not have")
	got := hs.Object("contacts", id)
	is.Equal(got["jobtitle"], "CTO")
	_, has := got["hs_linkedin_url"]
	is.True(!has)
}

func strPtr(s string) *string { return &s }
func int64Ptr(n int64) *int64 { return &n }
