package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"

	"github.com/matryer/is"
)

// suppress adds a suppression through the API and returns its id.
func (e *env) suppress(body map[string]any, headers ...string) string {
	e.t.Helper()
	r := e.do("POST", "/v1/suppressions", body, headers...)
	if r.status != http.StatusCreated {
		e.t.Fatalf("suppress %v: %d %s", body, r.status, r.raw)
	}
	return r.str("data.id")
}

// suppressionsTotal is how many entries the key's organization lists.
func (e *env) suppressionsTotal(headers ...string) float64 {
	e.t.Helper()
	r := e.do("GET", "/v1/suppressions", nil, headers...)
	if r.status != http.StatusOK {
		e.t.Fatalf("list suppressions: %d %s", r.status, r.raw)
	}
	n, _ := r.get("total").(float64)
	return n
}

func TestSuppressionsAreAddedListedAndLifted(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	otherKey, _ := e.newOrg("globex", 10)

	r := e.do("POST", "/v1/suppressions", map[string]any{"email": "Jane.Doe+crm@Acme.COM", "reason": "asked not to be contacted"})
	is.Equal(r.status, http.StatusCreated)
	id := r.str("data.id")
	is.Equal(r.str("data.kind"), "email")
	is.Equal(r.str("data.hint"), "J***@acme.com")
	is.Equal(r.str("data.reason"), "asked not to be contacted")
	is.Equal(r.str("data.added_by.kind"), "key")
	is.Equal(r.str("data.added_by.name"), "test") // the key's name
	is.Equal(r.get("data.all_orgs"), false)
	is.True(!strings.Contains(string(r.raw), "jane")) // never the address

	// The same mailbox written another way is the same subject.
	dup := e.do("POST", "/v1/suppressions", map[string]any{"email": "jane.doe@acme.com"})
	is.Equal(dup.status, http.StatusConflict)
	is.Equal(dup.str("code"), "suppression_exists")

	profile := e.suppress(map[string]any{"networkUrl": "https://linkedin.com/in/John-Roe/"})
	domain := e.suppress(map[string]any{"domain": "WWW.Initech.com"})
	list := e.do("GET", "/v1/suppressions?pageSize=2", nil)
	is.Equal(list.status, http.StatusOK)
	is.Equal(list.get("total"), 3.0)
	data := list.get("data").([]any)
	is.Equal(len(data), 2)
	is.Equal(data[0].(map[string]any)["id"], domain) // newest first
	is.Equal(data[0].(map[string]any)["hint"], "i***.com")
	is.Equal(data[1].(map[string]any)["hint"], "https://www.linkedin.com/in/j***")
	next := e.do("GET", "/v1/suppressions?page=1&pageSize=2", nil)
	is.Equal(next.get("data").([]any)[0].(map[string]any)["id"], id)
	is.Equal(e.do("GET", "/v1/suppressions/"+profile, nil).str("data.kind"), "profile")

	// Another organization sees none of them, and cannot read or lift them.
	is.Equal(e.suppressionsTotal("Authorization", "Bearer "+otherKey), 0.0)
	for _, method := range []string{"GET", "DELETE"} {
		r := e.do(method, "/v1/suppressions/"+id, nil, "Authorization", "Bearer "+otherKey)
		is.Equal(r.status, http.StatusNotFound)
		is.Equal(r.str("code"), "not_found")
	}
	for _, bad := range []string{"00000000-0000-0000-0000-000000000000", "not-an-id", strings.Repeat("x", 300)} {
		is.Equal(e.do("DELETE", "/v1/suppressions/"+bad, nil).status, http.StatusNotFound)
	}
	is.Equal(e.suppressionsTotal(), 3.0) // nothing changed

	del := e.do("DELETE", "/v1/suppressions/"+id, nil)
	is.Equal(del.status, http.StatusNoContent)
	is.Equal(len(del.raw), 0)
	is.Equal(e.do("GET", "/v1/suppressions/"+id, nil).status, http.StatusNotFound)
	is.Equal(e.do("DELETE", "/v1/suppressions/"+id, nil).status, http.StatusNotFound)
	is.Equal(e.suppressionsTotal(), 2.0)
}

func TestBadSuppressionsAreRefusedAndChangeNothing(t *testing.T) {
	e := newEnv(t)
	for name, body := range map[string]any{
		"none":            map[string]any{"reason": "why"},
		"two subjects":    map[string]any{"email": "jane@acme.com", "domain": "acme.com"},
		"three subjects":  map[string]any{"email": "jane@acme.com", "domain": "acme.com", "networkUrl": "https://www.linkedin.com/in/jane"},
		"not an address":  map[string]any{"email": "jane"},
		"a company page":  map[string]any{"networkUrl": "https://www.linkedin.com/company/acme"},
		"an IP":           map[string]any{"domain": "10.0.0.1"},
		"empty":           map[string]any{"email": ""},
		"a NUL":           map[string]any{"email": "jane@acme.com", "reason": "a\u0000b"},
		"long reason":     map[string]any{"email": "jane@acme.com", "reason": strings.Repeat("é", 501)},
		"unknown field":   map[string]any{"email": "jane@acme.com", "name": "Jane"},
		"wrong type":      map[string]any{"email": 42},
		"not JSON":        "{",
		"null":            map[string]any{"email": nil},
		"an array":        []string{"jane@acme.com"},
		"invalid UTF-8":   "{\"email\": \"jane\xff@acme.com\"}",
		"bad domain":      map[string]any{"domain": "acme"},
		"email as domain": map[string]any{"domain": "jane@acme.com"},
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			r := e.do("POST", "/v1/suppressions", body)
			is.Equal(r.status, http.StatusBadRequest)
			is.True(r.str("error") != "")
		})
	}
	is := is.New(t)
	// Without Content-Type: JSON is refused, as every JSON body is.
	r := e.do("POST", "/v1/suppressions", `{"email":"jane@acme.com"}`, "Content-Type", "")
	is.Equal(r.status, http.StatusBadRequest)
	for _, page := range []string{"page=-1", "pageSize=0", "pageSize=101", "page=x", "page=500&pageSize=100"} {
		is.Equal(e.do("GET", "/v1/suppressions?"+page, nil).status, http.StatusBadRequest)
	}
	is.Equal(e.suppressionsTotal(), 0.0)
}

func TestASuppressionCSVIsCheckedWholeThenAddedInOneCall(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	upload := func(file string) *response {
		t.Helper()
		return e.do("POST", "/v1/suppressions", file, "Content-Type", "text/csv")
	}
	// Every bad row is listed by number; nothing is added.
	bad := upload("Email,networkUrl,domain,reason,name\n" +
		"jane@acme.com,,,asked,Jane\n" +
		"john@acme.com,,acme.com,,John\n" + // two subjects
		",,,,Nobody\n" + // none
		"not-an-address,,,,\n" +
		",https://www.linkedin.com/in/ann,,\"" + strings.Repeat("x", 501) + "\",Ann\n" +
		"short,row\n")
	is.Equal(bad.status, http.StatusBadRequest)
	is.Equal(bad.str("code"), "invalid_input")
	rows := bad.get("rows").([]any)
	is.Equal(len(rows), 5)
	var numbers []float64
	for _, row := range rows {
		numbers = append(numbers, row.(map[string]any)["row"].(float64))
	}
	is.Equal(numbers, []float64{2, 3, 4, 5, 6})
	is.True(strings.Contains(rows[0].(map[string]any)["error"].(string), "only one of"))
	is.Equal(e.suppressionsTotal(), 0.0)

	for _, file := range []string{"name,phone\nJane,123\n", "email\n", ""} {
		r := upload(file)
		is.Equal(r.status, http.StatusBadRequest)
	}
	is.Equal(e.suppressionsTotal(), 0.0)

	good := "email,networkUrl,domain,reason,name\n" +
		"jane@acme.com,,,asked on the phone,Jane Doe\n" +
		",https://www.linkedin.com/in/john-roe,,,John Roe\n" +
		",,initech.com,whole company,\n" +
		"JANE@acme.com,,,,again\n"
	r := upload(good)
	is.Equal(r.status, http.StatusCreated)
	is.Equal(r.get("added"), 3.0)
	is.Equal(r.get("existing"), 1.0)
	is.Equal(e.suppressionsTotal(), 3.0)
	list := e.do("GET", "/v1/suppressions", nil)
	is.True(!strings.Contains(string(list.raw), "Jane Doe")) // the other columns are kept nowhere
	again := upload(good)
	is.Equal(again.status, http.StatusOK) // nothing new
	is.Equal(again.get("added"), 0.0)
	is.Equal(again.get("existing"), 4.0)

	var big strings.Builder
	big.WriteString("email\n")
	for i := range 10001 {
		big.WriteString("p" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + "@" + "acme.com\n")
	}
	is.Equal(upload(big.String()).status, http.StatusBadRequest)
	is.Equal(e.suppressionsTotal(), 3.0)
}

// TestASuppressedSubjectIsNeverEnriched: once suppressed, an address (whatever its
// case), a profile or a domain (and every address at it) fails not_found in the
// request, refunded, with no source asked and nothing stored; lifted, it is enriched
// again.
func TestASuppressedSubjectIsNeverEnriched(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	acmeNetwork(e)
	e.net.addCompany(company("Initech", "initech.com"))
	e.startWorkers()
	e.suppress(map[string]any{"email": "jane.smith@acme.com"})
	e.suppress(map[string]any{"networkUrl": "https://www.linkedin.com/in/john-smith"})
	initech := e.suppress(map[string]any{"domain": "initech.com"})

	for _, c := range []struct {
		path string
		body map[string]string
		says string
	}{
		{"/v1/people/enrich", map[string]string{"email": "Jane.Smith+x@ACME.com"}, "Jane.Smith+x@acme.com is suppressed"},
		{"/v1/people/enrich", map[string]string{"networkUrl": "https://de.linkedin.com/in/John-Smith/"}, "is suppressed"},
		{"/v1/people/enrich", map[string]string{"email": "peter@initech.com"}, "initech.com, the domain of peter@initech.com, is suppressed"},
		{"/v1/companies/enrich", map[string]string{"domain": "www.initech.com"}, "initech.com is suppressed"},
	} {
		r := e.do("POST", c.path, c.body)
		is.Equal(r.status, http.StatusOK) // settled in the request
		is.Equal(r.str("task.status"), "failed")
		is.Equal(r.str("error.code"), "not_found")
		is.True(strings.Contains(r.str("error.message"), c.says))
		is.True(!r.has("data"))
		is.Equal(e.ledgerKinds(r.str("task.id")), []string{"charge", "refund"})
	}
	is.Equal(e.net.calls.Load(), int64(0)) // no source was asked
	is.Equal(e.balance("acme").Balance, int64(100))
	for _, in := range []enrich.Input{{Lookup: enrich.LookupDomain, Target: "initech.com"}, {Lookup: enrich.LookupPersonURL, Target: "https://www.linkedin.com/in/john-smith"}} {
		held, err := e.db.FindStored(t.Context(), in)
		is.NoErr(err)
		is.Equal(held, nil) // nothing stored
	}

	// Lifted, the domain is enriched again.
	is.Equal(e.do("DELETE", "/v1/suppressions/"+initech, nil).status, http.StatusNoContent)
	r := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "initech.com"})
	is.Equal(e.waitSettled(r.str("task.id")).str("task.status"), "succeeded")
}

// TestAnAnswerAboutASuppressedSubjectIsNotKept: an input that does not name the
// suppressed subject but whose answer is about them (an address that resolves to a
// suppressed profile, a company page of a suppressed domain) fails the same way once
// the source has answered: nothing of them is stored, nor what the lookup gathered.
func TestAnAnswerAboutASuppressedSubjectIsNotKept(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	acmeNetwork(e)
	e.net.addPerson(employee("ann-lee", "Ann", "Lee", acmeURL, "Buyer", "Lyon", "FR", false))
	e.net.addCompany(company("Initech", "initech.com"))
	e.startWorkers()
	e.suppress(map[string]any{"networkUrl": "https://www.linkedin.com/in/ann-lee"})
	e.suppress(map[string]any{"networkUrl": "https://www.linkedin.com/in/john-smith"})
	e.suppress(map[string]any{"domain": "initech.com"})

	_, settled := e.emailLookup("ann.lee@acme.com")
	is.Equal(settled.str("task.status"), "failed")
	is.Equal(settled.str("error.code"), "not_found")
	is.True(strings.Contains(settled.str("error.message"), "the person ann.lee@acme.com belongs to is suppressed"))
	is.True(!strings.Contains(settled.str("error.message"), "ann-lee"))
	is.True(e.net.calls.Load() > 0) // the address named nobody suppressed: it was resolved
	held, err := e.db.FindStored(t.Context(), enrich.Input{Lookup: enrich.LookupPersonURL, Target: "https://www.linkedin.com/in/ann-lee"})
	is.NoErr(err)
	is.Equal(held, nil)
	byEmail, err := e.db.FindStored(t.Context(), enrich.Input{Lookup: enrich.LookupEmail, Target: "ann.lee@acme.com"})
	is.NoErr(err)
	is.Equal(byEmail, nil)

	// An ambiguous address among whose candidates is the suppressed person keeps
	// nothing it gathered: a retry with a hint searches again.
	_, smith := e.emailLookup("jsmith@acme.com")
	is.Equal(smith.str("error.code"), "ambiguous")
	g, err := e.db.Gathering(t.Context(), enrich.AddressKey("jsmith@acme.com"), time.Time{})
	is.NoErr(err)
	is.Equal(g, nil)
	_, jane := e.emailLookup("jsmith@acme.com", "fullName", "Jane Smith")
	is.Equal(jane.str("task.status"), "succeeded") // someone not suppressed is answered
	_, john := e.emailLookup("jsmith@acme.com", "fullName", "John Smith")
	is.Equal(john.str("error.code"), "not_found") // the suppressed one is not

	r := e.do("POST", "/v1/companies/enrich", map[string]string{"networkUrl": "https://www.linkedin.com/company/initech"})
	got := e.waitSettled(r.str("task.id"))
	is.Equal(got.str("task.status"), "failed")
	is.True(strings.Contains(got.str("error.message"), "the company at https://www.linkedin.com/company/initech is suppressed"))
	stored, err := e.db.FindStored(t.Context(), enrich.Input{Lookup: enrich.LookupCompanyURL, Target: "https://www.linkedin.com/company/initech"})
	is.NoErr(err)
	is.Equal(stored, nil)
	is.Equal(e.balance("acme").Balance, int64(100-3)) // every one refunded but the answer about Jane Smith
}

// TestATaskQueuedBeforeItsSubjectWasSuppressedAsksNoSource: the workers check the
// subject again when they take the task.
func TestATaskQueuedBeforeItsSubjectWasSuppressedAsksNoSource(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.net.addCompany(company("Acme", "acme.com"))
	r := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"})
	is.Equal(r.status, http.StatusAccepted)
	e.suppress(map[string]any{"domain": "acme.com"})
	e.startWorkers()
	got := e.waitSettled(r.str("task.id"))
	is.Equal(got.str("task.status"), "failed")
	is.Equal(got.str("error.code"), "not_found")
	is.True(strings.Contains(got.str("error.message"), "suppressed"))
	is.Equal(e.net.calls.Load(), int64(0))
	is.Equal(e.balance("acme").Balance, int64(100))
}

// TestSuppressionsHoldOnEveryPathThatTakesASubject: a Loop's run, a batch's rows (the
// suppressed row fails alone), a watch (paused, its check skipped) and the MCP tools.
func TestSuppressionsHoldOnEveryPathThatTakesASubject(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks, watchesOften)
	e.net.addCompany(company("Acme", "acme.com"))
	e.net.addCompany(company("Initech", "initech.com"))
	rcv := newReceiver(t)
	loopID, _ := e.createLoop("Companies", rcv.srv.URL+"/hook", "company")
	w := e.createWatch(map[string]any{"object_type": "company", "domain": "initech.com", "loop_id": loopID})
	e.suppress(map[string]any{"domain": "initech.com"})
	// Suppressing paused the watch of its subject at once.
	paused := e.do("GET", "/v1/watches/"+w.str("data.id"), nil)
	is.Equal(paused.str("data.paused_reason"), "suppressed")
	is.Equal(paused.get("data.next_run_at"), nil)
	e.startWorkers()

	run := e.do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"domain": "initech.com"})
	is.Equal(run.status, http.StatusOK)
	is.Equal(run.str("task.status"), "failed")
	is.True(strings.Contains(run.str("error.message"), "suppressed"))
	rcv.wait(t, 1) // its task.failed event, as for any failed task of a Loop

	b := e.uploadCSV("domain,note\nacme.com,keep\ninitech.com,suppressed\n", "")
	is.Equal(b.status, http.StatusAccepted)
	done := e.waitBatchDone(b.str("data.id"))
	is.Equal(count(done, "succeeded"), 1)
	is.Equal(count(done, "failed"), 1)

	cs := e.mcp(e.key)
	tool := call(t, cs, "enrich_company", map[string]any{"domain": "initech.com"})
	is.Equal(tool.str("task.status"), "failed")
	is.True(strings.Contains(tool.str("error.message"), "suppressed"))

	// A watch of an address at a suppressed domain is paused when it comes due: its
	// check is skipped, unpaid.
	personLoop, _ := e.createLoop("People", rcv.srv.URL+"/people", "person")
	pw := e.createWatch(map[string]any{"object_type": "person", "email": "peter@initech.com", "loop_id": personLoop})
	before := e.balance("acme").Balance
	calls := e.net.calls.Load()
	next, _ := time.Parse(time.RFC3339Nano, pw.str("data.next_run_at"))
	e.clock.Add(next.Sub(e.clock.Now()) + time.Second)
	got := e.waitWatch(pw.str("data.id"), func(r *response) bool { return r.str("data.paused_reason") == "suppressed" })
	is.Equal(got.get("data.last_task_id"), nil)
	is.Equal(e.balance("acme").Balance, before)
	is.Equal(e.net.calls.Load(), calls)
	is.Equal(e.net.calls.Load() > 0, true) // acme.com's row was fetched

	// None of those kept Initech.
	held, err := e.db.FindStored(context.Background(), enrich.Input{Lookup: enrich.LookupDomain, Target: "initech.com"})
	is.NoErr(err)
	is.Equal(held, nil)
}
