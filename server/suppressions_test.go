package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/server/servertest"

	"github.com/matryer/is"
)

func TestSuppressionsAreAddedListedAndLifted(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	otherKey, _ := e.NewOrg("globex", 10)

	r := e.Do("POST", "/v1/suppressions", map[string]any{"email": "Jane.Doe+crm@Acme.COM", "reason": "asked not to be contacted"})
	is.Equal(r.Status, http.StatusCreated)
	id := r.Str("data.id")
	is.Equal(r.Str("data.kind"), "email")
	is.Equal(r.Str("data.hint"), "J***@acme.com")
	is.Equal(r.Str("data.reason"), "asked not to be contacted")
	is.Equal(r.Str("data.added_by.kind"), "key")
	is.Equal(r.Str("data.added_by.name"), "test") // the key's name
	is.Equal(r.Get("data.all_orgs"), false)
	is.True(!strings.Contains(string(r.Raw), "jane")) // never the address

	// The same mailbox written another way is the same subject.
	dup := e.Do("POST", "/v1/suppressions", map[string]any{"email": "jane.doe@acme.com"})
	is.Equal(dup.Status, http.StatusConflict)
	is.Equal(dup.Str("code"), "suppression_exists")

	profile := e.Suppress(map[string]any{"networkUrl": "https://linkedin.com/in/John-Roe/"})
	domain := e.Suppress(map[string]any{"domain": "WWW.Initech.com"})
	list := e.Do("GET", "/v1/suppressions?pageSize=2", nil)
	is.Equal(list.Status, http.StatusOK)
	is.Equal(list.Get("total"), 3.0)
	data := list.Get("data").([]any)
	is.Equal(len(data), 2)
	is.Equal(data[0].(map[string]any)["id"], domain) // newest first
	is.Equal(data[0].(map[string]any)["hint"], "i***.com")
	is.Equal(data[1].(map[string]any)["hint"], "https://www.linkedin.com/in/j***")
	next := e.Do("GET", "/v1/suppressions?page=1&pageSize=2", nil)
	is.Equal(next.Get("data").([]any)[0].(map[string]any)["id"], id)
	is.Equal(e.Do("GET", "/v1/suppressions/"+profile, nil).Str("data.kind"), "profile")

	// Another organization sees none of them, and cannot read or lift them.
	is.Equal(e.SuppressionsTotal("Authorization", "Bearer "+otherKey), 0.0)
	for _, method := range []string{"GET", "DELETE"} {
		r := e.Do(method, "/v1/suppressions/"+id, nil, "Authorization", "Bearer "+otherKey)
		is.Equal(r.Status, http.StatusNotFound)
		is.Equal(r.Str("code"), "not_found")
	}
	for _, bad := range []string{"00000000-0000-0000-0000-000000000000", "not-an-id", strings.Repeat("x", 300)} {
		is.Equal(e.Do("DELETE", "/v1/suppressions/"+bad, nil).Status, http.StatusNotFound)
	}
	is.Equal(e.SuppressionsTotal(), 3.0) // nothing changed

	del := e.Do("DELETE", "/v1/suppressions/"+id, nil)
	is.Equal(del.Status, http.StatusNoContent)
	is.Equal(len(del.Raw), 0)
	is.Equal(e.Do("GET", "/v1/suppressions/"+id, nil).Status, http.StatusNotFound)
	is.Equal(e.Do("DELETE", "/v1/suppressions/"+id, nil).Status, http.StatusNotFound)
	is.Equal(e.SuppressionsTotal(), 2.0)
}

func TestBadSuppressionsAreRefusedAndChangeNothing(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t)
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
			r := e.Do("POST", "/v1/suppressions", body)
			is.Equal(r.Status, http.StatusBadRequest)
			is.True(r.Str("error") != "")
		})
	}
	is := is.New(t)
	// Without Content-Type: JSON is refused, as every JSON body is.
	r := e.Do("POST", "/v1/suppressions", `{"email":"jane@acme.com"}`, "Content-Type", "")
	is.Equal(r.Status, http.StatusBadRequest)
	for _, page := range []string{"page=-1", "pageSize=0", "pageSize=101", "page=x", "page=500&pageSize=100"} {
		is.Equal(e.Do("GET", "/v1/suppressions?"+page, nil).Status, http.StatusBadRequest)
	}
	is.Equal(e.SuppressionsTotal(), 0.0)
}

func TestASuppressionCSVIsCheckedWholeThenAddedInOneCall(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	upload := func(file string) *servertest.Response {
		t.Helper()
		return e.Do("POST", "/v1/suppressions", file, "Content-Type", "text/csv")
	}
	// Every bad row is listed by number; nothing is added.
	bad := upload("Email,networkUrl,domain,reason,name\n" +
		"jane@acme.com,,,asked,Jane\n" +
		"john@acme.com,,acme.com,,John\n" + // two subjects
		",,,,Nobody\n" + // none
		"not-an-address,,,,\n" +
		",https://www.linkedin.com/in/ann,,\"" + strings.Repeat("x", 501) + "\",Ann\n" +
		"short,row\n")
	is.Equal(bad.Status, http.StatusBadRequest)
	is.Equal(bad.Str("code"), "invalid_input")
	rows := bad.Get("rows").([]any)
	is.Equal(len(rows), 5)
	var numbers []float64
	for _, row := range rows {
		numbers = append(numbers, row.(map[string]any)["row"].(float64))
	}
	is.Equal(numbers, []float64{2, 3, 4, 5, 6})
	is.True(strings.Contains(rows[0].(map[string]any)["error"].(string), "only one of"))
	is.Equal(e.SuppressionsTotal(), 0.0)

	for _, file := range []string{"name,phone\nJane,123\n", "email\n", ""} {
		r := upload(file)
		is.Equal(r.Status, http.StatusBadRequest)
	}
	is.Equal(e.SuppressionsTotal(), 0.0)

	good := "email,networkUrl,domain,reason,name\n" +
		"jane@acme.com,,,asked on the phone,Jane Doe\n" +
		",https://www.linkedin.com/in/john-roe,,,John Roe\n" +
		",,initech.com,whole company,\n" +
		"JANE@acme.com,,,,again\n"
	r := upload(good)
	is.Equal(r.Status, http.StatusCreated)
	is.Equal(r.Get("added"), 3.0)
	is.Equal(r.Get("existing"), 1.0)
	is.Equal(e.SuppressionsTotal(), 3.0)
	list := e.Do("GET", "/v1/suppressions", nil)
	is.True(!strings.Contains(string(list.Raw), "Jane Doe")) // the other columns are kept nowhere
	again := upload(good)
	is.Equal(again.Status, http.StatusOK) // nothing new
	is.Equal(again.Get("added"), 0.0)
	is.Equal(again.Get("existing"), 4.0)

	var big strings.Builder
	big.WriteString("email\n")
	for i := range 10001 {
		big.WriteString("p" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + "@" + "acme.com\n")
	}
	is.Equal(upload(big.String()).Status, http.StatusBadRequest)
	is.Equal(e.SuppressionsTotal(), 3.0)
}

// TestASuppressedSubjectIsNeverEnriched: once suppressed, an address (whatever its
// case), a profile or a domain (and every address at it) fails not_found in the
// request, refunded, with no source asked and nothing stored; lifted, it is enriched
// again.
func TestASuppressedSubjectIsNeverEnriched(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	servertest.AcmeNetwork(e)
	e.Net.AddCompany(servertest.Company("Initech", "initech.com"))
	e.StartWorkers()
	e.Suppress(map[string]any{"email": "jane.smith@acme.com"})
	e.Suppress(map[string]any{"networkUrl": "https://www.linkedin.com/in/john-smith"})
	initech := e.Suppress(map[string]any{"domain": "initech.com"})

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
		r := e.Do("POST", c.path, c.body)
		is.Equal(r.Status, http.StatusOK) // settled in the request
		is.Equal(r.Str("task.status"), "failed")
		is.Equal(r.Str("error.code"), "not_found")
		is.True(strings.Contains(r.Str("error.message"), c.says))
		is.True(!r.Has("data"))
		is.Equal(e.LedgerKinds(r.Str("task.id")), []string{"charge", "refund"})
	}
	is.Equal(e.Net.Calls.Load(), int64(0)) // no source was asked
	is.Equal(e.Balance("acme").Balance, int64(100))
	for _, in := range []enrich.Input{{Lookup: enrich.LookupDomain, Target: "initech.com"}, {Lookup: enrich.LookupPersonURL, Target: "https://www.linkedin.com/in/john-smith"}} {
		held, err := e.DB.FindStored(t.Context(), in)
		is.NoErr(err)
		is.Equal(held, nil) // nothing stored
	}

	// Lifted, the domain is enriched again.
	is.Equal(e.Do("DELETE", "/v1/suppressions/"+initech, nil).Status, http.StatusNoContent)
	r := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "initech.com"})
	is.Equal(e.WaitSettled(r.Str("task.id")).Str("task.status"), "succeeded")
}

// TestAnAnswerAboutASuppressedSubjectIsNotKept: an input that does not name the
// suppressed subject but whose answer is about them (an address that resolves to a
// suppressed profile, a company page of a suppressed domain) fails the same way once
// the source has answered: nothing of them is stored, nor what the lookup gathered.
func TestAnAnswerAboutASuppressedSubjectIsNotKept(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	servertest.AcmeNetwork(e)
	e.Net.AddPerson(servertest.Employee("ann-lee", "Ann", "Lee", servertest.AcmeURL, "Buyer", "Lyon", "FR", false))
	e.Net.AddCompany(servertest.Company("Initech", "initech.com"))
	e.StartWorkers()
	e.Suppress(map[string]any{"networkUrl": "https://www.linkedin.com/in/ann-lee"})
	e.Suppress(map[string]any{"networkUrl": "https://www.linkedin.com/in/john-smith"})
	e.Suppress(map[string]any{"domain": "initech.com"})

	_, settled := e.EmailLookup("ann.lee@acme.com")
	is.Equal(settled.Str("task.status"), "failed")
	is.Equal(settled.Str("error.code"), "not_found")
	is.True(strings.Contains(settled.Str("error.message"), "the person ann.lee@acme.com belongs to is suppressed"))
	is.True(!strings.Contains(settled.Str("error.message"), "ann-lee"))
	is.True(e.Net.Calls.Load() > 0) // the address named nobody suppressed: it was resolved
	held, err := e.DB.FindStored(t.Context(), enrich.Input{Lookup: enrich.LookupPersonURL, Target: "https://www.linkedin.com/in/ann-lee"})
	is.NoErr(err)
	is.Equal(held, nil)
	byEmail, err := e.DB.FindStored(t.Context(), enrich.Input{Lookup: enrich.LookupEmail, Target: "ann.lee@acme.com"})
	is.NoErr(err)
	is.Equal(byEmail, nil)

	// An ambiguous address among whose candidates is the suppressed person keeps
	// nothing it gathered: a retry with a hint searches again.
	_, smith := e.EmailLookup("jsmith@acme.com")
	is.Equal(smith.Str("error.code"), "ambiguous")
	g, err := e.DB.Gathering(t.Context(), enrich.AddressKey("jsmith@acme.com"), time.Time{})
	is.NoErr(err)
	is.Equal(g, nil)
	_, jane := e.EmailLookup("jsmith@acme.com", "fullName", "Jane Smith")
	is.Equal(jane.Str("task.status"), "succeeded") // someone not suppressed is answered
	_, john := e.EmailLookup("jsmith@acme.com", "fullName", "John Smith")
	is.Equal(john.Str("error.code"), "not_found") // the suppressed one is not

	r := e.Do("POST", "/v1/companies/enrich", map[string]string{"networkUrl": "https://www.linkedin.com/company/initech"})
	got := e.WaitSettled(r.Str("task.id"))
	is.Equal(got.Str("task.status"), "failed")
	is.True(strings.Contains(got.Str("error.message"), "the company at https://www.linkedin.com/company/initech is suppressed"))
	stored, err := e.DB.FindStored(t.Context(), enrich.Input{Lookup: enrich.LookupCompanyURL, Target: "https://www.linkedin.com/company/initech"})
	is.NoErr(err)
	is.Equal(stored, nil)
	is.Equal(e.Balance("acme").Balance, int64(100-3)) // every one refunded but the answer about Jane Smith
}

// TestATaskQueuedBeforeItsSubjectWasSuppressedAsksNoSource: the workers check the
// subject again when they take the task.
func TestATaskQueuedBeforeItsSubjectWasSuppressedAsksNoSource(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	r := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"})
	is.Equal(r.Status, http.StatusAccepted)
	e.Suppress(map[string]any{"domain": "acme.com"})
	e.StartWorkers()
	got := e.WaitSettled(r.Str("task.id"))
	is.Equal(got.Str("task.status"), "failed")
	is.Equal(got.Str("error.code"), "not_found")
	is.True(strings.Contains(got.Str("error.message"), "suppressed"))
	is.Equal(e.Net.Calls.Load(), int64(0))
	is.Equal(e.Balance("acme").Balance, int64(100))
}

// TestSuppressionsHoldOnEveryPathThatTakesASubject: a Loop's run, a batch's rows (the
// suppressed row fails alone), a watch (paused, its check skipped) and the MCP tools.
func TestSuppressionsHoldOnEveryPathThatTakesASubject(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks, watchesOften)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	e.Net.AddCompany(servertest.Company("Initech", "initech.com"))
	rcv := servertest.NewReceiver(t)
	loopID, _ := e.CreateLoop("Companies", rcv.Srv.URL+"/hook", "company")
	w := e.CreateWatch(map[string]any{"object_type": "company", "domain": "initech.com", "loop_id": loopID})
	e.Suppress(map[string]any{"domain": "initech.com"})
	// Suppressing paused the watch of its subject at once.
	paused := e.Do("GET", "/v1/watches/"+w.Str("data.id"), nil)
	is.Equal(paused.Str("data.paused_reason"), "suppressed")
	is.Equal(paused.Get("data.next_run_at"), nil)
	e.StartWorkers()

	run := e.Do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"domain": "initech.com"})
	is.Equal(run.Status, http.StatusOK)
	is.Equal(run.Str("task.status"), "failed")
	is.True(strings.Contains(run.Str("error.message"), "suppressed"))
	rcv.Wait(t, 1) // its task.failed event, as for any failed task of a Loop

	b := e.UploadCSV("domain,note\nacme.com,keep\ninitech.com,suppressed\n", "")
	is.Equal(b.Status, http.StatusAccepted)
	done := e.WaitBatchDone(b.Str("data.id"))
	is.Equal(servertest.Count(done, "succeeded"), 1)
	is.Equal(servertest.Count(done, "failed"), 1)

	cs := e.MCP(e.Key)
	tool := call(t, cs, "enrich_company", map[string]any{"domain": "initech.com"})
	is.Equal(tool.Str("task.status"), "failed")
	is.True(strings.Contains(tool.Str("error.message"), "suppressed"))

	// A watch of an address at a suppressed domain is paused when it comes due: its
	// check is skipped, unpaid.
	personLoop, _ := e.CreateLoop("People", rcv.Srv.URL+"/people", "person")
	pw := e.CreateWatch(map[string]any{"object_type": "person", "email": "peter@initech.com", "loop_id": personLoop})
	before := e.Balance("acme").Balance
	calls := e.Net.Calls.Load()
	next, _ := time.Parse(time.RFC3339Nano, pw.Str("data.next_run_at"))
	e.Clock.Add(next.Sub(e.Clock.Now()) + time.Second)
	got := e.WaitWatch(pw.Str("data.id"), func(r *servertest.Response) bool { return r.Str("data.paused_reason") == "suppressed" })
	is.Equal(got.Get("data.last_task_id"), nil)
	is.Equal(e.Balance("acme").Balance, before)
	is.Equal(e.Net.Calls.Load(), calls)
	is.Equal(e.Net.Calls.Load() > 0, true) // acme.com's row was fetched

	// None of those kept Initech.
	held, err := e.DB.FindStored(context.Background(), enrich.Input{Lookup: enrich.LookupDomain, Target: "initech.com"})
	is.NoErr(err)
	is.Equal(held, nil)
}
