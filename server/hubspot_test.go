package server_test

import (
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"enrichd/server/servertest"

	"github.com/matryer/is"

	"enrichd/enrich"
	"enrichd/server"
)

// A company HubSpot has, where a person typed the name and left the description
// blank: the Loop fills what is blank and keeps what was typed; a company HubSpot does
// not have is created once with every mapped property, and a second run finds it
// rather than creating another.
func TestHubSpotLoopFillsOnlyWhatIsBlankAndNeverOverwritesATypedValue(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	hs := servertest.NewFakeHubSpot(t, servertest.HubspotToken)
	e := servertest.NewEnv(t, servertest.WithHubSpot(t, hs))
	acme := servertest.Company("Acme", "acme.com")
	acme.About, acme.PrimaryIndustry, acme.YearFounded = enrich.Ptr("Rockets and anvils."), enrich.Ptr("Computer Software"), enrich.Ptr(1949)
	acme.Headquarters = map[string]any{"city": "Phoenix", "country": "US"}
	e.Net.AddCompany(acme)
	globex := servertest.Company("Globex", "globex.com")
	globex.PrimaryIndustry = enrich.Ptr("Something HubSpot has no option for")
	e.Net.AddCompany(globex)
	typed := hs.Put("companies", map[string]string{"domain": "acme.com", "name": "ACME Corporation (typed)", "description": "", "city": "Tucson"})
	loopID := e.CreateHubSpotLoop("HubSpot companies", "company", nil)
	e.StartWorkers()

	r := e.Do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"domain": "acme.com"})
	is.Equal(r.Status, http.StatusAccepted)
	d := e.WaitDelivery(loopID, servertest.Succeeded)
	is.Equal(d["event"], "task.succeeded")
	is.Equal(d["last_status_code"], 200.0)
	is.Equal(d["summary"], "company "+typed+": filled country, description, founded_year, industry, linkedin_company_page, numberofemployees; "+
		"kept the values already there in city, name")
	got := hs.Object("companies", typed)
	is.Equal(got["name"], "ACME Corporation (typed)") // typed: kept
	is.Equal(got["city"], "Tucson")                   // typed: kept
	is.Equal(got["description"], "Rockets and anvils.")
	is.Equal(got["numberofemployees"], "42")
	is.Equal(got["founded_year"], "1949")
	is.Equal(got["industry"], "COMPUTER_SOFTWARE")
	is.Equal(got["country"], "US")
	is.Equal(got["linkedin_company_page"], "https://www.linkedin.com/company/acme")
	is.Equal(hs.Count("companies"), 1)

	// Absent: created with every mapped property, the industry HubSpot has no option
	// for left out.
	r = e.Do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"domain": "globex.com"})
	is.Equal(r.Status, http.StatusAccepted)
	d = e.WaitDelivery(loopID, func(d map[string]any) bool { return servertest.Succeeded(d) && d["task_id"] == r.Str("task.id") })
	is.Equal(hs.Count("companies"), 2)
	var created string
	for _, id := range []string{"101", "102", "103"} {
		if hs.Object("companies", id)["domain"] == "globex.com" {
			created = id
		}
	}
	is.Equal(d["summary"], "created company "+created+" with domain, linkedin_company_page, name, numberofemployees")
	is.Equal(hs.Object("companies", created), map[string]string{"domain": "globex.com", "name": "Globex", "numberofemployees": "42",
		"linkedin_company_page": "https://www.linkedin.com/company/globex", "enrichd_domain": "globex.com"}) // the key it is found by

	// A second run finds the object it wrote: nothing created, nothing blank to fill.
	r = e.Do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"domain": "globex.com"})
	d = e.WaitDelivery(loopID, func(d map[string]any) bool { return servertest.Succeeded(d) && d["task_id"] == r.Str("task.id") })
	is.Equal(d["summary"], "company "+created+": nothing blank to fill")
	is.Equal(hs.Count("companies"), 2)
	is.Equal(hs.CallsTo("GET", "/companies/"+created), 1) // read by the id it kept, not searched again
}

// A create whose answer is lost (HubSpot made the object, then answered 502) is not
// made twice: the retry finds it, by the unique property enrichd set, though HubSpot's
// search does not show it yet.
func TestHubSpotLoopCreatesOnceThroughARetry(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	hs := servertest.NewFakeHubSpot(t, servertest.HubspotToken)
	e := servertest.NewEnv(t, servertest.WithHubSpot(t, hs))
	e.Net.AddCompany(servertest.Company("Initech", "initech.com"))
	loopID := e.CreateHubSpotLoop("HubSpot", "company", nil)
	hs.FailAfterCreate = true
	e.StartWorkers()
	hs.SearchLags = true

	e.Do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"domain": "initech.com"})
	d := e.WaitDelivery(loopID, servertest.Attempts(1))
	is.Equal(d["status"], "pending")
	is.Equal(d["last_status_code"], 502.0)
	is.True(strings.Contains(d["last_error"].(string), "HubSpot answered 502 Bad Gateway: the answer was lost"))
	e.Clock.Add(10 * time.Second)
	d = e.WaitDelivery(loopID, servertest.Attempts(2))
	is.Equal(d["status"], "succeeded")
	id := hs.Only(t, "companies")
	is.Equal(d["summary"], "company "+id+": nothing blank to fill")
	is.Equal(hs.CallsTo("POST", "/objects/companies"), 1) // created once
}

// Two results about a company HubSpot does not have, delivered at once, make one
// company, though HubSpot's search does not show it yet when the second comes.
func TestHubSpotLoopCreatesOnceWhenTwoResultsComeAtOnce(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	hs := servertest.NewFakeHubSpot(t, servertest.HubspotToken)
	hs.SearchLags = true
	e := servertest.NewEnv(t, servertest.WithHubSpot(t, hs))
	e.Net.AddCompany(servertest.Company("Initech", "initech.com"))
	loopID := e.CreateHubSpotLoop("HubSpot", "company", nil)
	first := e.Do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"domain": "initech.com"})
	second := e.Do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"domain": "initech.com"}, "Idempotency-Key", "another")
	is.True(first.Str("task.id") != second.Str("task.id"))
	e.StartWorkers()
	var summaries []string
	for deadline := time.Now().Add(servertest.SettleWithin); len(summaries) < 2 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		summaries = nil
		for _, d := range e.Do("GET", "/v1/loops/"+loopID+"/deliveries", nil).Get("data").([]any) {
			if d := d.(map[string]any); servertest.Succeeded(d) {
				summaries = append(summaries, d["summary"].(string))
			}
		}
	}
	is.Equal(len(summaries), 2)
	id := hs.Only(t, "companies")
	slices.Sort(summaries)
	is.Equal(summaries, []string{"company " + id + ": nothing blank to fill", "created company " + id + " with domain, linkedin_company_page, name, numberofemployees"})
	is.Equal(hs.CallsTo("POST", "/objects/companies"), 1)
}

// HubSpot's 429 (Retry-After 30, its rate limit spent) and 5xx are retried on the
// schedule, no sooner than HubSpot asked.
func TestHubSpotLoopRetriesOnRateLimitsAndServerErrors(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	hs := servertest.NewFakeHubSpot(t, servertest.HubspotToken)
	e := servertest.NewEnv(t, servertest.WithHubSpot(t, hs))
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	loopID := e.CreateHubSpotLoop("HubSpot", "company", nil)
	hs.FailNext(http.StatusTooManyRequests, http.StatusServiceUnavailable)
	e.StartWorkers()
	start := e.Clock.Now().Truncate(time.Millisecond) // as the store keeps times

	e.Do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"domain": "acme.com"})
	d := e.WaitDelivery(loopID, servertest.Attempts(1))
	is.Equal(d["status"], "pending")
	is.Equal(d["last_status_code"], 429.0)
	is.Equal(d["last_error"], "HubSpot answered 429 Too Many Requests: You have reached your secondly limit. (retry after 30s)")
	next, err := time.Parse(time.RFC3339Nano, d["next_attempt_at"].(string))
	is.NoErr(err)
	is.True(next.Sub(start) >= 30*time.Second) // Retry-After, not the schedule's 10 s

	e.Clock.Add(30 * time.Second)
	d = e.WaitDelivery(loopID, servertest.Attempts(2))
	is.Equal(d["last_status_code"], 503.0)
	is.Equal(d["status"], "pending")
	e.Clock.Add(time.Minute)
	d = e.WaitDelivery(loopID, servertest.Attempts(3))
	is.Equal(d["status"], "succeeded")
	is.Equal(hs.Count("companies"), 1)
	loop := e.Do("GET", "/v1/loops/"+loopID, nil)
	is.Equal(loop.Get("data.failing"), false)
}

// HubSpot's 401 fails the delivery at once and disables the destination, as a
// webhook's 410 does; a new token set by PATCH, checked, enables it to be retried.
func TestHubSpotLoopIsDisabledWhenHubSpotRefusesItsToken(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	hs := servertest.NewFakeHubSpot(t, servertest.HubspotToken)
	e := servertest.NewEnv(t, servertest.WithHubSpot(t, hs))
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	loopID := e.CreateHubSpotLoop("HubSpot", "company", nil)
	e.StartWorkers()
	hs.SetToken("pat-na1-revoked")

	e.Do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"domain": "acme.com"})
	d := e.WaitDelivery(loopID, servertest.Attempts(1))
	is.Equal(d["status"], "failed")
	is.Equal(d["last_status_code"], 401.0)
	is.True(strings.Contains(d["last_error"].(string), "HubSpot answered 401 Unauthorized: Authentication credentials not found"))
	loop := e.Do("GET", "/v1/loops/"+loopID, nil)
	is.Equal(loop.Get("data.destination.enabled"), false)
	is.True(strings.Contains(loop.Str("data.destination.disabled_reason"), "HubSpot refused the Loop's token (401)"))
	retry := e.Do("POST", "/v1/deliveries/"+d["id"].(string)+"/retry", nil)
	is.Equal(retry.Status, http.StatusConflict)
	is.Equal(retry.Str("code"), "destination_disabled")

	patched := e.Do("PATCH", "/v1/loops/"+loopID, map[string]any{"destination": map[string]any{"token": "pat-na1-revoked", "enabled": true}})
	is.Equal(patched.Status, http.StatusOK)
	is.Equal(patched.Str("data.destination.token_last4"), "…oked")
	is.Equal(patched.Get("data.destination.enabled"), true)
	is.Equal(e.Do("POST", "/v1/deliveries/"+d["id"].(string)+"/retry", nil).Status, http.StatusAccepted)
	d = e.WaitDelivery(loopID, servertest.Succeeded)
	is.Equal(hs.Count("companies"), 1)
}

// The token is checked with HubSpot on create: one HubSpot refuses is 422 and nothing
// is created. The one accepted is sealed: never in an answer, nor in the database in
// clear; its last four characters alone are shown.
func TestHubSpotTokenIsCheckedOnceSealedAndNeverShown(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	hs := servertest.NewFakeHubSpot(t, servertest.HubspotToken)
	e := servertest.NewEnv(t, servertest.WithHubSpot(t, hs))

	refused := e.Do("POST", "/v1/loops", map[string]any{"name": "HubSpot", "destination": map[string]any{"kind": "hubspot", "token": "pat-na1-wrong"}})
	is.Equal(refused.Status, http.StatusUnprocessableEntity)
	is.Equal(refused.Str("code"), "hubspot_token_refused")
	is.True(strings.Contains(refused.Str("error"), "HubSpot refused the token, so the Loop was not saved: HubSpot answered 401"))
	is.True(!strings.Contains(string(refused.Raw), "pat-na1-wrong"))
	is.Equal(len(e.Do("GET", "/v1/loops", nil).Get("data").([]any)), 0) // nothing created

	created := e.Do("POST", "/v1/loops", map[string]any{"name": "HubSpot", "object_type": "person",
		"destination": map[string]any{"kind": "hubspot", "token": servertest.HubspotToken, "provenance": true, "mapping": map[string]any{"jobtitle": "", "hs_persona_headline": "headline"}}})
	is.Equal(created.Status, http.StatusCreated)
	is.Equal(created.Str("data.destination.kind"), "hubspot")
	is.Equal(created.Str("data.destination.token_last4"), "…abcd")
	is.Equal(created.Get("data.destination.provenance"), true)
	is.Equal(created.Get("data.destination.refresh"), false)
	is.Equal(created.Get("data.destination.gdpr_delete"), false)
	is.Equal(created.Get("data.destination.mapping"), map[string]any{"jobtitle": "", "hs_persona_headline": "headline"})
	is.True(!created.Has("data.destination.secret") && !created.Has("data.destination.url"))
	is.Equal(hs.CallsTo("GET", "/objects/companies"), 1)    // the refused check
	is.Equal(hs.CallsTo("GET", "/objects/contacts"), 1)     // this one's
	is.Equal(hs.CallsTo("POST", "/properties/contacts"), 1) // the provenance property made
	id := created.Str("data.id")
	for _, r := range []*servertest.Response{created, e.Do("GET", "/v1/loops/"+id, nil), e.Do("GET", "/v1/loops", nil)} {
		is.True(!strings.Contains(string(r.Raw), servertest.HubspotToken))
		is.True(!strings.Contains(string(r.Raw), servertest.HubspotToken[:len(servertest.HubspotToken)-4]))
	}
	var stored string
	is.NoErr(e.DB.Reader().QueryRow(t.Context(), `SELECT hubspot_token FROM loops WHERE id = ?`, id).Scan(&stored))
	is.True(stored != "" && !strings.Contains(stored, servertest.HubspotToken))
	if !servertest.OnPostgres() {
		e.Close() // the file whole, its log checkpointed
		raw, err := os.ReadFile(e.Path)
		is.NoErr(err)
		is.True(!strings.Contains(string(raw), servertest.HubspotToken))
		is.True(!strings.Contains(string(raw), "11111111-2222-3333"))
	}
}

// Every bad destination is refused with 400 and what is wrong, before HubSpot is
// asked; nothing is created or changed.
func TestHubSpotLoopRefusesBadInput(t *testing.T) {
	t.Parallel()
	hs := servertest.NewFakeHubSpot(t, servertest.HubspotToken)
	e := servertest.NewEnv(t, servertest.WithHubSpot(t, hs), servertest.AllowPrivateWebhooks)
	id := e.CreateHubSpotLoop("Existing", "person", nil)
	hook, _ := e.CreateLoop("Hook", "https://hooks.example/x", "company")
	asked := len(hs.Calls)
	hub := func(extra map[string]any) map[string]any {
		d := map[string]any{"kind": "hubspot", "token": servertest.HubspotToken}
		for k, v := range extra {
			d[k] = v
		}
		return map[string]any{"name": "x", "object_type": "person", "destination": d}
	}
	for _, c := range []struct {
		name, method, path string
		body               any
		want               string
	}{
		{"no kind", "POST", "/v1/loops", map[string]any{"name": "x", "destination": map[string]any{"token": servertest.HubspotToken}}, "destination.kind must be webhook or hubspot"},
		{"unknown kind", "POST", "/v1/loops", map[string]any{"name": "x", "destination": map[string]any{"kind": "salesforce"}}, "destination.kind must be webhook or hubspot"},
		{"both forms", "POST", "/v1/loops", map[string]any{"name": "x", "webhook_url": "https://hooks.example/", "destination": map[string]any{"kind": "hubspot", "token": servertest.HubspotToken}}, "not both"},
		{"no token", "POST", "/v1/loops", map[string]any{"name": "x", "destination": map[string]any{"kind": "hubspot"}}, "destination.token is required"},
		{"blank token", "POST", "/v1/loops", hub(map[string]any{"token": ""}), "destination.token must be"},
		{"token with a space", "POST", "/v1/loops", hub(map[string]any{"token": "pat na1"}), "destination.token must be"},
		{"token too long", "POST", "/v1/loops", hub(map[string]any{"token": strings.Repeat("p", 513)}), "destination.token must be"},
		{"token not text", "POST", "/v1/loops", `{"name":"x","destination":{"kind":"hubspot","token":42}}`, "destination.token"},
		{"url with hubspot", "POST", "/v1/loops", hub(map[string]any{"url": "https://hooks.example/"}), "destination.url is a webhook's"},
		{"token with webhook", "POST", "/v1/loops", map[string]any{"name": "x", "destination": map[string]any{"kind": "webhook", "url": "https://hooks.example/", "token": "t"}}, "a webhook destination takes url only"},
		{"mapping to no field", "POST", "/v1/loops", hub(map[string]any{"mapping": map[string]any{"jobtitle": "salary"}}), `"salary" is not a field of a person result`},
		{"mapping a bad property", "POST", "/v1/loops", hub(map[string]any{"mapping": map[string]any{"Job Title": "title"}}), "is not a HubSpot property name"},
		{"mapping the key", "POST", "/v1/loops", hub(map[string]any{"mapping": map[string]any{"email": ""}}), "email is enrichd's own"},
		{"gdpr_delete on companies", "POST", "/v1/loops", map[string]any{"name": "x", "destination": map[string]any{"kind": "hubspot", "token": servertest.HubspotToken, "gdpr_delete": true}}, "gdpr_delete deletes contacts"},
		{"enabled on create", "POST", "/v1/loops", hub(map[string]any{"enabled": false}), "destination.enabled is changed with PATCH"},
		{"patch a webhook_url", "PATCH", "/v1/loops/" + id, map[string]any{"webhook_url": "https://hooks.example/"}, "webhook_url is a webhook's"},
		{"patch a rotation", "PATCH", "/v1/loops/" + id, map[string]any{"rotate_secret": true}, "there is no secret to rotate"},
		{"patch the kind", "PATCH", "/v1/loops/" + id, map[string]any{"destination": map[string]any{"kind": "webhook"}}, "destination.kind cannot change"},
		{"patch a bad token", "PATCH", "/v1/loops/" + id, map[string]any{"destination": map[string]any{"token": "a b"}}, "destination.token must be"},
		{"patch provenance on without the token", "PATCH", "/v1/loops/" + id, map[string]any{"destination": map[string]any{"provenance": true}}, "send the token with it"},
		{"patch nothing in destination", "PATCH", "/v1/loops/" + id, map[string]any{"destination": map[string]any{}}, "destination takes enabled, token"},
		{"patch a token into a webhook", "PATCH", "/v1/loops/" + hook, map[string]any{"destination": map[string]any{"token": servertest.HubspotToken}}, "destination takes enabled (true or false) only"},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			r := e.Do(c.method, c.path, c.body)
			is.Equal(r.Status, http.StatusBadRequest)
			is.True(strings.Contains(r.Str("error"), c.want))
		})
	}
	is := is.New(t)
	is.Equal(len(hs.Calls), asked) // HubSpot was not asked
	is.Equal(len(e.Do("GET", "/v1/loops", nil).Get("data").([]any)), 2)
	got := e.Do("GET", "/v1/loops/"+id, nil)
	is.Equal(got.Str("data.name"), "Existing")
	is.Equal(got.Get("data.destination.provenance"), false)
	is.Equal(got.Str("data.destination.token_last4"), "…abcd")

	// Without a secret key file no token can be kept: 503, nothing created.
	bare := servertest.NewEnv(t, func(c *server.Config) { c.HubSpotURL = hs.Srv.URL })
	r := bare.Do("POST", "/v1/loops", hub(nil))
	is.Equal(r.Status, http.StatusServiceUnavailable)
	is.True(strings.Contains(r.Str("error"), "no secret key file"))
	is.Equal(len(bare.Do("GET", "/v1/loops", nil).Get("data").([]any)), 0)
}
