package server_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"enrichd/server/servertest"

	"github.com/matryer/is"
)

// deliveriesOf are the Loop's deliveries, by the task each is about.
func deliveriesOf(e *servertest.Env, loopID string) map[string]map[string]any {
	e.T.Helper()
	out := map[string]map[string]any{}
	for _, d := range e.Do("GET", "/v1/loops/"+loopID+"/deliveries", nil).Get("data").([]any) {
		d := d.(map[string]any)
		out[d["task_id"].(string)] = d
	}
	return out
}

// waitDeliveries waits until every delivery of the tasks is as ok says.
func waitDeliveries(e *servertest.Env, loopID string, tasks []string, ok func(d map[string]any) bool) map[string]map[string]any {
	e.T.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		all := deliveriesOf(e, loopID)
		n := 0
		for _, task := range tasks {
			if d := all[task]; d != nil && ok(d) {
				n++
			}
		}
		if n == len(tasks) {
			return all
		}
		if time.Now().After(deadline) {
			e.T.Fatalf("the deliveries did not get there: %v", all)
		}
	}
}

// upTo waits until the deliveries of the tasks have had n attempts.
func upTo(n int) func(map[string]any) bool {
	return func(d map[string]any) bool { return d["attempts"] == float64(n) }
}

// runEach runs the Loop once for each input and returns the tasks' ids.
func runEach(e *servertest.Env, loopID, field string, values ...string) []string {
	e.T.Helper()
	var tasks []string
	for _, v := range values {
		r := e.Do("POST", "/v1/loops/"+loopID+"/run", map[string]string{field: v})
		if r.Status != http.StatusAccepted && r.Status != http.StatusOK {
			e.T.Fatalf("run the loop: %d %s", r.Status, r.Raw)
		}
		tasks = append(tasks, r.Str("task.id"))
	}
	return tasks
}

// Three company results due at once (HubSpot was down for their first attempts) go in
// one batch: one search and one batch/read find them, one batch/create makes the two
// HubSpot does not have, one batch/update fills the one it has, blank-only. The
// create's answer is lost: the retry finds both by the unique property enrichd set,
// though the search does not show them yet, and makes none twice.
func TestHubSpotLoopWritesResultsDueAtOnceInOneBatch(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	hs := servertest.NewFakeHubSpot(t, servertest.HubspotToken)
	hs.SearchLags = true
	e := servertest.NewEnv(t, servertest.WithHubSpot(t, hs))
	acme := servertest.Company("Acme", "acme.com")
	acme.About = strPtr("Rockets and anvils.")
	e.Net.AddCompany(acme)
	e.Net.AddCompany(servertest.Company("Globex", "globex.com"))
	e.Net.AddCompany(servertest.Company("Initech", "initech.com"))
	typed := hs.Put("companies", map[string]string{"domain": "acme.com", "name": "ACME Corporation (typed)"})
	loopID := e.CreateHubSpotLoop("HubSpot companies", "company", nil)
	hs.SetDown(true)
	e.StartWorkers()
	tasks := runEach(e, loopID, "domain", "acme.com", "globex.com", "initech.com")
	waitDeliveries(e, loopID, tasks, upTo(1))

	hs.SetDown(false)
	hs.FailAfterCreate = true
	e.Clock.Add(10 * time.Second)
	all := waitDeliveries(e, loopID, tasks, upTo(2))
	is.Equal(all[tasks[0]]["status"], "succeeded")
	is.Equal(all[tasks[0]]["summary"], "company "+typed+": filled description, linkedin_company_page, numberofemployees; kept the values already there in name")
	for _, task := range tasks[1:] {
		is.Equal(all[task]["status"], "pending")
		is.Equal(all[task]["last_status_code"], 502.0)
	}
	is.Equal(hs.CallsTo("POST", "/objects/companies/search"), 1)
	is.Equal(hs.CallsTo("POST", "/objects/companies/batch/read"), 1) // by enrichd_domain
	is.Equal(hs.CallsTo("POST", "/objects/companies/batch/create"), 1)
	is.Equal(hs.CallsTo("POST", "/objects/companies/batch/update"), 1)
	is.Equal(hs.CallsTo("POST", "/objects/companies"), 0) // none one at a time
	is.Equal(hs.CallsTo("PATCH", ""), 0)
	is.Equal(hs.Count("companies"), 3)
	is.Equal(hs.Object("companies", typed)["name"], "ACME Corporation (typed)")

	e.Clock.Add(time.Minute)
	all = waitDeliveries(e, loopID, tasks[1:], upTo(3))
	var ids []string
	for _, task := range tasks[1:] {
		is.Equal(all[task]["status"], "succeeded")
		s := all[task]["summary"].(string)
		is.True(strings.HasPrefix(s, "company ") && strings.HasSuffix(s, ": nothing blank to fill"))
		ids = append(ids, strings.TrimSuffix(strings.Fields(s)[1], ":"))
	}
	is.Equal(hs.Count("companies"), 3) // none made twice
	is.Equal(hs.CallsTo("POST", "/objects/companies/batch/create"), 1)
	is.Equal(hs.CallsTo("POST", "/objects/companies/batch/read"), 2)
	slices.Sort(ids)
	is.Equal(len(slices.Compact(ids)), 2)
	is.Equal(hs.Object("companies", ids[0])["enrichd_domain"] != "", true)
}

// personOnRecord imports a person with her address.
func personOnRecord(e *servertest.Env, first, last, email, employer string) {
	e.ImportJSONL(`{"type":"person","network_url":"https://www.linkedin.com/in/` + strings.ToLower(first+"-"+last) + `","full_name":"` + first + " " + last +
		`","first_name":"` + first + `","last_name":"` + last + `","city":"Berlin","country_code":"DE","emails":["` + email + `"],` +
		`"positions":[{"title":"Engineer","company_name":"` + employer + `","is_current":true}],` +
		`"last_enriched_at":"` + e.Clock.Now().Add(-24*time.Hour).Format(time.RFC3339) + `"}`)
}

// In a batch of four contacts, the one whose update HubSpot answers as failed in its
// 207 fails alone, and the batch/create HubSpot refuses whole for one invalid address
// is made one contact at a time, so that only that address fails; the retries, in a
// batch again, make nothing twice.
func TestHubSpotBatchInputFailsAlone(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	hs := servertest.NewFakeHubSpot(t, servertest.HubspotToken)
	e := servertest.NewEnv(t, servertest.WithHubSpot(t, hs))
	servertest.JaneOnRecord(e)
	personOnRecord(e, "Bob", "Smith", "bob@acme.com", "Acme")
	personOnRecord(e, "John", "Roe", "john@globex.com", "Globex")
	personOnRecord(e, "Ada", "Byron", "ada@initech.com", "Initech")
	jane := hs.Put("contacts", map[string]string{"email": "jane@acme.com", "jobtitle": "Chief Technology Officer"})
	bob := hs.Put("contacts", map[string]string{"email": "bob@acme.com"})
	hs.InvalidEmails = map[string]bool{"ada@initech.com": true}
	hs.FailUpdate = map[string]bool{bob: true}
	loopID := e.CreateHubSpotLoop("HubSpot people", "person", nil)
	hs.SetDown(true)
	e.StartWorkers()
	tasks := runEach(e, loopID, "email", "jane@acme.com", "bob@acme.com", "john@globex.com", "ada@initech.com")
	waitDeliveries(e, loopID, tasks, upTo(1))

	hs.SetDown(false)
	e.Clock.Add(10 * time.Second)
	all := waitDeliveries(e, loopID, tasks, upTo(2))
	is.Equal(all[tasks[0]]["status"], "succeeded")
	is.Equal(all[tasks[0]]["summary"], "contact "+jane+": filled city, company, country, firstname, hs_linkedin_url, lastname; kept the values already there in jobtitle")
	is.Equal(all[tasks[1]]["status"], "pending") // its update failed in the 207
	is.Equal(all[tasks[1]]["last_status_code"], 207.0)
	is.True(strings.Contains(all[tasks[1]]["last_error"].(string), "resource not found"))
	is.Equal(all[tasks[2]]["status"], "succeeded") // made alone once the batch was refused
	is.True(strings.HasPrefix(all[tasks[2]]["summary"].(string), "created contact "))
	is.Equal(all[tasks[3]]["status"], "pending")
	is.Equal(all[tasks[3]]["last_status_code"], 400.0)
	is.Equal(all[tasks[3]]["last_error"], "HubSpot answered 400 Bad Request: Property values were not valid: email INVALID_EMAIL")
	is.Equal(hs.CallsTo("POST", "/objects/contacts/batch/read"), 1) // by email
	is.Equal(hs.CallsTo("POST", "/objects/contacts/batch/create"), 1)
	is.Equal(hs.CallsTo("POST", "/objects/contacts/batch/update"), 1)
	is.Equal(hs.CallsTo("POST", "/objects/contacts"), 2) // John and Ada, one at a time
	is.Equal(hs.Count("contacts"), 3)
	is.Equal(hs.Object("contacts", jane)["jobtitle"], "Chief Technology Officer")

	hs.Mu.Lock()
	hs.InvalidEmails, hs.FailUpdate = nil, nil
	hs.Mu.Unlock()
	e.Clock.Add(time.Minute)
	all = waitDeliveries(e, loopID, []string{tasks[1], tasks[3]}, upTo(3))
	is.Equal(all[tasks[1]]["status"], "succeeded")
	is.Equal(all[tasks[1]]["summary"], "contact "+bob+": filled city, company, country, firstname, hs_linkedin_url, jobtitle, lastname")
	is.Equal(all[tasks[3]]["status"], "succeeded")
	is.True(strings.HasPrefix(all[tasks[3]]["summary"].(string), "created contact "))
	is.Equal(hs.Count("contacts"), 4) // John not made twice
	is.Equal(hs.CallsTo("POST", "/objects/contacts/batch/create"), 2)
	is.Equal(hs.CallsTo("POST", "/objects/contacts/batch/update"), 2)
	is.Equal(hs.CallsTo("POST", "/objects/contacts"), 2)
}

// A domain so many companies hold that the batch's search cannot read them all does
// not fail the batch's other results, nor its own: each is written one at a time,
// where the search needs only the first company holding its domain.
func TestHubSpotCrowdedDomainDoesNotFailTheBatch(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	hs := servertest.NewFakeHubSpot(t, servertest.HubspotToken)
	e := servertest.NewEnv(t, servertest.WithHubSpot(t, hs))
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	e.Net.AddCompany(servertest.Company("Globex", "globex.com"))
	for range 1001 {
		hs.Put("companies", map[string]string{"domain": "acme.com"})
	}
	loopID := e.CreateHubSpotLoop("HubSpot companies", "company", nil)
	hs.SetDown(true)
	e.StartWorkers()
	tasks := runEach(e, loopID, "domain", "acme.com", "globex.com")
	waitDeliveries(e, loopID, tasks, upTo(1))

	hs.SetDown(false)
	e.Clock.Add(10 * time.Second)
	all := waitDeliveries(e, loopID, tasks, upTo(2))
	is.Equal(hs.CallsTo("POST", "/objects/companies/search"), 5+2) // the batch's five pages, then one search for each result
	is.Equal(all[tasks[0]]["last_error"], nil)
	is.Equal(all[tasks[0]]["status"], "succeeded")
	is.True(strings.HasPrefix(all[tasks[0]]["summary"].(string), "company "))
	is.Equal(all[tasks[1]]["status"], "succeeded")
	is.True(strings.HasPrefix(all[tasks[1]]["summary"].(string), "created company "))
	is.Equal(hs.Count("companies"), 1002)
}
