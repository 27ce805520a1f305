package server_test

import (
	"database/sql"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"enrichd/server/servertest"
	"enrichd/store"

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

// HubSpot's validation errors quote the value refused: what enrichd logs and keeps of
// them (the delivery's history, the Loop's last error, neither reached by an erasure)
// names the property and HubSpot's code, never the value.
func TestHubSpotErrorsQuotingAValueKeepNoneOfIt(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	hs := servertest.NewFakeHubSpot(t, servertest.HubspotToken)
	e := servertest.NewEnv(t, servertest.WithHubSpot(t, hs))
	servertest.JaneOnRecord(e)
	loopID := e.CreateHubSpotLoop("HubSpot people", "person", nil)
	e.StartWorkers()
	for i, refusal := range []string{
		`Property values were not valid: [{"isValid":false,"message":"Email address jane@acme.com is invalid","error":"INVALID_EMAIL","name":"email",` +
			`"localizedErrorMessage":"Email address jane@acme.com is invalid"}]`,
		`Email address Jane@Acme.com is invalid; "Jane" and 'Doe' were not taken, see https://www.linkedin.com/in/jane-doe`,
	} {
		hs.Refuse = refusal
		e.Do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"email": "jane@acme.com"})
		d := e.WaitDelivery(loopID, func(d map[string]any) bool { return d["last_status_code"] == 400.0 })
		t.Logf("kept: %v", d["last_error"])
		if i == 0 {
			is.Equal(d["last_error"], "HubSpot answered 400 Bad Request: Property values were not valid: email INVALID_EMAIL")
		}
		e.Clock.Add(10 * time.Second) // the retry writes her
		e.WaitDelivery(loopID, servertest.Succeeded)
		for _, kept := range []string{e.Logs.String(), string(e.Do("GET", "/v1/loops/"+loopID+"/deliveries", nil).Raw),
			string(e.Do("GET", "/v1/loops/"+loopID, nil).Raw)} {
			for _, her := range []string{"jane@acme.com", "Jane", "Doe", "jane-doe"} {
				is.True(!strings.Contains(strings.ToLower(kept), strings.ToLower(her)))
			}
		}
		var lastErr sql.NullString
		is.NoErr(e.DB.Reader().QueryRow(t.Context(), `SELECT last_delivery_error FROM loops WHERE id = ?`, loopID).Scan(&lastErr))
		is.True(lastErr.Valid)
		is.True(!strings.Contains(strings.ToLower(lastErr.String), "jane"))
		hs.Mu.Lock()
		for id := range hs.Objects["contacts"] {
			delete(hs.Objects["contacts"], id) // the next run creates her again
		}
		hs.Mu.Unlock()
	}
}

// A contact found by the id enrichd kept is hers only while it holds her address: one
// whose address was changed in HubSpot since (another person's record now, or another
// portal's under a new token) is left alone, and she is searched for by her address.
func TestHubSpotLeavesAContactWhoseAddressChangedAlone(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	hs := servertest.NewFakeHubSpot(t, servertest.HubspotToken)
	e := servertest.NewEnv(t, servertest.WithHubSpot(t, hs))
	servertest.JaneOnRecord(e)
	loopID := e.CreateHubSpotLoop("HubSpot people", "person", nil)
	e.StartWorkers()
	first := e.Do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"email": "jane@acme.com"})
	e.WaitDelivery(loopID, func(d map[string]any) bool { return servertest.Succeeded(d) && d["task_id"] == first.Str("task.id") })
	contact := hs.Only(t, "contacts")

	hs.Mu.Lock()
	john := hs.Objects["contacts"][contact]
	john["email"], john["firstname"] = "john@globex.com", "John"
	delete(john, "city")
	delete(john, "jobtitle")
	hs.Mu.Unlock()
	before := hs.Object("contacts", contact)

	again := e.Do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"email": "jane@acme.com"})
	d := e.WaitDelivery(loopID, func(d map[string]any) bool { return servertest.Succeeded(d) && d["task_id"] == again.Str("task.id") })
	is.Equal(hs.Object("contacts", contact), before) // none of her values in his blanks
	is.Equal(hs.Count("contacts"), 2)
	is.True(strings.HasPrefix(d["summary"].(string), "created contact "))
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

// Retention deletes the tasks and deliveries that said a gdpr_delete Loop was sent
// Jane; what enrichd kept of its writes (the contact it created) is kept until the
// person is erased, and still names the Loop: the erasure tells it, and the contact goes.
func TestHubSpotErasureAfterRetentionTellsTheLoopThatWroteTheContact(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	hs := servertest.NewFakeHubSpot(t, servertest.HubspotToken)
	e := servertest.NewEnv(t, servertest.WithHubSpot(t, hs), servertest.ErasuresOften)
	servertest.JaneOnRecord(e)
	deletes := e.CreateHubSpotLoop("Deletes", "person", map[string]any{"gdpr_delete": true})
	e.StartWorkers()
	e.Do("POST", "/v1/loops/"+deletes+"/run", map[string]string{"email": "jane@acme.com"})
	e.WaitDelivery(deletes, servertest.Succeeded)
	contact := hs.Only(t, "contacts")

	e.Clock.Add(40 * 24 * time.Hour)
	// Retention runs round after round: the purge is repeated until it has taken what
	// it may (on a loaded machine the sender may still be closing the delivery's books).
	var tasks, deliveries, kept int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, err := e.DB.PurgeSettled(t.Context(), e.Clock.Now().Add(-30*24*time.Hour), 1000)
		is.NoErr(err)
		is.NoErr(e.DB.Reader().QueryRow(t.Context(), `SELECT (SELECT count(*) FROM tasks), (SELECT count(*) FROM deliveries),
		(SELECT count(*) FROM hubspot_writes)`).Scan(&tasks, &deliveries, &kept))
		if tasks == 0 && deliveries == 0 || time.Now().After(deadline) {
			break
		}
	}
	is.Equal([]int{tasks, deliveries, kept}, []int{0, 0, 1})

	r := e.Do("POST", "/v1/erasures", map[string]any{"email": "jane@acme.com"})
	is.Equal(r.Status, http.StatusCreated)
	is.Equal(len(r.Get("data.loops").([]any)), 1)
	is.Equal(r.Str("data.loops.0.id"), deletes)
	d := e.WaitDelivery(deletes, func(d map[string]any) bool { return d["event"] == "person.erased" && servertest.Succeeded(d) })
	is.Equal(d["summary"], "deleted contact "+contact+" under HubSpot's GDPR delete")
	is.Equal(hs.Count("contacts"), 0)
}

// An erasure right after a gdpr_delete Loop created the contact: HubSpot's search does
// not show it yet, and the erasure deletes what enrichd kept of the write in its own
// transaction. The contact is deleted all the same, by the id enrichd wrote it under.
func TestHubSpotErasureSoonAfterTheContactWasCreatedDeletesIt(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	hs := servertest.NewFakeHubSpot(t, servertest.HubspotToken)
	hs.SearchLags = true
	e := servertest.NewEnv(t, servertest.WithHubSpot(t, hs), servertest.ErasuresOften)
	servertest.JaneOnRecord(e)
	deletes := e.CreateHubSpotLoop("Deletes", "person", map[string]any{"gdpr_delete": true})
	e.StartWorkers()
	e.Do("POST", "/v1/loops/"+deletes+"/run", map[string]string{"email": "jane@acme.com"})
	e.WaitDelivery(deletes, servertest.Succeeded)
	contact := hs.Only(t, "contacts")

	r := e.Do("POST", "/v1/erasures", map[string]any{"email": "jane@acme.com"})
	is.Equal(r.Status, http.StatusCreated)
	d := e.WaitDelivery(deletes, func(d map[string]any) bool { return d["event"] == "person.erased" && servertest.Succeeded(d) })
	is.Equal(d["summary"], "deleted contact "+contact+" under HubSpot's GDPR delete")
	is.Equal(hs.Count("contacts"), 0)
	hs.Mu.Lock()
	is.Equal(hs.GdprDeleted, []string{contact}) // once, though the id was known twice
	hs.Mu.Unlock()
}

// The same after a restart, which forgets the objects the process created: the
// person.erased event carries the ids of the objects enrichd wrote about the person,
// read before the erasure deleted them; once it is delivered, the payload kept names
// the erasure alone.
func TestHubSpotErasureAfterARestartDeletesTheContactSearchDoesNotShowYet(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	hs := servertest.NewFakeHubSpot(t, servertest.HubspotToken)
	hs.SearchLags = true
	e := servertest.NewEnv(t, servertest.WithHubSpot(t, hs), servertest.ErasuresOften)
	servertest.JaneOnRecord(e)
	deletes := e.CreateHubSpotLoop("Deletes", "person", map[string]any{"gdpr_delete": true})
	e.StartWorkers()
	e.Do("POST", "/v1/loops/"+deletes+"/run", map[string]string{"email": "jane@acme.com"})
	e.WaitDelivery(deletes, servertest.Succeeded)
	contact := hs.Only(t, "contacts")
	e.Restart()
	e.StartWorkers()

	r := e.Do("POST", "/v1/erasures", map[string]any{"email": "jane@acme.com"})
	is.Equal(r.Status, http.StatusCreated)
	erasure := r.Str("data.id")
	d := e.WaitDelivery(deletes, func(d map[string]any) bool { return d["event"] == "person.erased" && servertest.Succeeded(d) })
	is.Equal(d["summary"], "deleted contact "+contact+" under HubSpot's GDPR delete")
	is.Equal(hs.Count("contacts"), 0)
	var payload string
	is.NoErr(e.DB.Reader().QueryRow(t.Context(), `SELECT payload FROM deliveries WHERE event = 'person.erased'`).Scan(&payload))
	is.Equal(payload, string(store.SpentErasurePayload(erasure)))
}

// An export lists, per Loop, the HubSpot object the Loop wrote about the person and
// the properties it wrote, without values (enrichd keeps keyed hashes of them alone),
// after retention has deleted the deliveries too.
func TestHubSpotExportShowsWhatALoopWrote(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	hs := servertest.NewFakeHubSpot(t, servertest.HubspotToken)
	e := servertest.NewEnv(t, servertest.WithHubSpot(t, hs))
	servertest.JaneOnRecord(e)
	loopID := e.CreateHubSpotLoop("HubSpot people", "person", nil)
	e.StartWorkers()
	e.Do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"email": "jane@acme.com"})
	e.WaitDelivery(loopID, servertest.Succeeded)
	contact := hs.Only(t, "contacts")
	var written string
	is.NoErr(e.DB.Reader().QueryRow(t.Context(), `SELECT written FROM hubspot_writes`).Scan(&written))

	x := e.Do("GET", "/v1/people/export?email=jane@acme.com", nil)
	is.Equal(x.Status, http.StatusOK)
	is.Equal(x.Str("loops.0.id"), loopID)
	is.Equal(x.Str("loops.0.hubspot.0.object_type"), "contacts")
	is.Equal(x.Str("loops.0.hubspot.0.object_id"), contact)
	props := x.Get("loops.0.hubspot.0.properties_written").([]any)
	is.True(slices.Contains(props, any("email")))
	is.True(slices.Contains(props, any("firstname")))
	is.True(strings.Contains(x.Str("loops.0.hubspot.0.values"), "not kept"))
	var hashes map[string]string
	is.NoErr(json.Unmarshal([]byte(written), &hashes))
	for _, h := range hashes {
		is.True(!strings.Contains(string(x.Raw), h)) // the hashes are no one's data to read
	}

	e.Clock.Add(40 * 24 * time.Hour)
	_, err := e.DB.PurgeSettled(t.Context(), e.Clock.Now().Add(-30*24*time.Hour), 1000)
	is.NoErr(err)
	x = e.Do("GET", "/v1/people/export?email=jane@acme.com", nil)
	is.Equal(x.Status, http.StatusOK)
	is.Equal(len(x.Get("loops").([]any)), 1)
	is.Equal(x.Str("loops.0.name"), "HubSpot people")
	is.Equal(len(x.Get("loops.0.deliveries").([]any)), 0)
	is.Equal(x.Str("loops.0.hubspot.0.object_id"), contact)
}
