package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"enrichd/server/servertest"

	"github.com/matryer/is"
)

func TestWatchLifecycle(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t)
	loopID, _ := e.CreateLoop("Companies", rcv.Srv.URL, "company")
	before := e.Balance("acme")

	created := e.CreateWatch(map[string]any{"object_type": "company", "domain": "HTTPS://WWW.Acme.COM/about", "loop_id": loopID})
	id := created.Str("data.id")
	is.Equal(created.Str("data.object_type"), "company")
	is.Equal(created.Get("data.input"), map[string]any{"domain": "acme.com"}) // normalized as the enrichment endpoint does
	is.Equal(created.Str("data.loop_id"), loopID)
	is.Equal(created.Get("data.every_days"), float64(30))
	is.Equal(created.Get("data.fields"), nil) // every field
	is.Equal(created.Get("data.notify_unchanged"), false)
	is.Equal(created.Get("data.enabled"), true)
	is.Equal(created.Get("data.last_run_at"), nil)
	is.Equal(created.Get("data.last_task_id"), nil)
	is.Equal(created.Get("data.paused_reason"), nil)
	// The baseline comes within the hour.
	next, err := time.Parse(time.RFC3339Nano, created.Str("data.next_run_at"))
	is.NoErr(err)
	now := e.Clock.Now()
	is.True(!next.Before(now.Truncate(time.Millisecond)) && next.Before(now.Add(time.Hour)))

	got := e.Do("GET", "/v1/watches/"+id, nil)
	is.Equal(got.Status, 200)
	is.Equal(got.Str("data.id"), id)

	list := e.Do("GET", "/v1/watches?loop_id="+loopID, nil)
	is.Equal(list.Status, 200)
	is.Equal(list.Get("total"), float64(1))
	is.Equal(len(list.Get("data").([]any)), 1)
	is.Equal(list.Get("meta.watch_credits_this_month"), float64(0))
	is.Equal(list.Get("meta.watch_monthly_cap"), nil)

	patched := e.Do("PATCH", "/v1/watches/"+id, map[string]any{"every_days": 7, "fields": []string{"employee_count", "headquarters"},
		"notify_unchanged": true, "enabled": false})
	is.Equal(patched.Status, 200)
	is.Equal(patched.Get("data.every_days"), float64(7))
	is.Equal(patched.Get("data.fields"), []any{"employee_count", "headquarters"})
	is.Equal(patched.Get("data.notify_unchanged"), true)
	is.Equal(patched.Get("data.enabled"), false)
	is.Equal(patched.Get("data.next_run_at"), nil) // a disabled watch is never due

	// Turning it on again makes it due within the hour, as a new one is; [] goes back to
	// every field.
	resumed := e.Do("PATCH", "/v1/watches/"+id, map[string]any{"enabled": true, "fields": []string{}})
	is.Equal(resumed.Status, 200)
	is.Equal(resumed.Get("data.enabled"), true)
	is.Equal(resumed.Get("data.fields"), nil)
	is.True(resumed.Str("data.next_run_at") != "")

	is.Equal(e.Do("DELETE", "/v1/watches/"+id, nil).Status, http.StatusNoContent)
	is.Equal(e.Do("GET", "/v1/watches/"+id, nil).Status, http.StatusNotFound)
	is.Equal(e.Do("DELETE", "/v1/watches/"+id, nil).Status, http.StatusNotFound)
	is.Equal(e.Balance("acme"), before) // watching costs nothing until a check runs
}

func TestWatchPersonByEmailKeepsItsHints(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t)
	loopID, _ := e.CreateLoop("People", rcv.Srv.URL, "person")
	created := e.CreateWatch(map[string]any{"object_type": "person", "email": " Jane.Doe@Acme.com ", "fullName": "Jane Doe", "loop_id": loopID,
		"every_days": 365, "fields": []string{"positions"}})
	is.Equal(created.Get("data.input"), map[string]any{"email": "Jane.Doe@acme.com", "fullName": "Jane Doe"})
	is.Equal(created.Get("data.every_days"), float64(365))
	is.Equal(created.Get("data.fields"), []any{"positions"})
}

// TestWatchRefusesBadInput: each refusal is a 400 naming the field, and creates and
// charges nothing.
func TestWatchRefusesBadInput(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t)
	companyLoop, _ := e.CreateLoop("Companies", rcv.Srv.URL, "company")
	personLoop, _ := e.CreateLoop("People", rcv.Srv.URL, "person")
	before := e.Balance("acme")
	company := func(extra ...any) map[string]any {
		m := map[string]any{"object_type": "company", "domain": "acme.com", "loop_id": companyLoop}
		for i := 0; i+1 < len(extra); i += 2 {
			if extra[i+1] == nil {
				delete(m, extra[i].(string))
			} else {
				m[extra[i].(string)] = extra[i+1]
			}
		}
		return m
	}
	many := make([]string, 31)
	for i := range many {
		many[i] = fmt.Sprintf("f%d", i)
	}
	for _, tt := range []struct {
		name string
		body any
		want string // in the message
	}{
		{"no object_type", company("object_type", nil), "object_type is required"},
		{"bad object_type", company("object_type", "place"), "object_type must be company or person"},
		{"no input", company("domain", nil), "send one of domain or networkUrl"},
		{"two inputs", company("networkUrl", "https://www.linkedin.com/company/acme"), "either domain or networkUrl"},
		{"bad domain", company("domain", "not a domain"), "domain"},
		{"email for a company", company("domain", nil, "email", "jane@acme.com"), "object_type company watches companies"},
		{"domain for a person", company("object_type", "person", "loop_id", personLoop), "object_type person watches people"},
		{"profile for a company", company("domain", nil, "networkUrl", "https://www.linkedin.com/in/jane"), "networkUrl must be a company page"},
		{"hint without email", map[string]any{"object_type": "person", "networkUrl": "https://www.linkedin.com/in/jane", "fullName": "Jane", "loop_id": personLoop}, "fullName"},
		{"no loop_id", company("loop_id", nil), "loop_id is required"},
		{"loop_id not a uuid", company("loop_id", "crm"), "loop_id must be the uuid"},
		{"loop of another object type", company("loop_id", personLoop), "loop_id"},
		{"every_days too small", company("every_days", 6), "every_days must be an integer from 7 to 365"},
		{"every_days too large", company("every_days", 366), "every_days must be an integer from 7 to 365"},
		{"every_days a fraction", company("every_days", 7.5), "every_days must be an integer"},
		{"every_days a string", company("every_days", "30"), "every_days must be an integer"},
		{"unknown field in fields", company("fields", []string{"salary"}), `fields: "salary" is not a field of a company record`},
		{"a person's field for a company", company("fields", []string{"positions"}), `"positions" is not a field of a company record`},
		{"volatile field", company("fields", []string{"last_enriched_at"}), `"last_enriched_at" is not a field`},
		{"a field twice", company("fields", []string{"name", "name"}), `fields names "name" twice`},
		{"too many fields", company("fields", many), "name at most 30"},
		{"fields not an array", company("fields", "name"), "fields must be an array of strings"},
		{"unknown field", company("webhook_url", "https://example.com"), `unknown field "webhook_url"`},
		{"a field in another case", company("domain", nil, "DOMAIN", "acme.com"), `unknown field "DOMAIN"`},
		{"null", `{"object_type":"company","domain":"acme.com","loop_id":"` + companyLoop + `","fields":null}`, "fields must not be null"},
		{"personal mailbox", map[string]any{"object_type": "person", "email": "jane@gmail.com", "loop_id": personLoop}, "email: jane@gmail.com is a personal mailbox"},
		{"notify_unchanged not a boolean", company("notify_unchanged", "yes"), "notify_unchanged must be a boolean"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			r := e.Do("POST", "/v1/watches", tt.body)
			is.Equal(r.Status, http.StatusBadRequest)
			is.Equal(r.Str("code"), "invalid_input")
			if !strings.Contains(r.Str("error"), tt.want) {
				t.Errorf("error %q does not say %q", r.Str("error"), tt.want)
			}
		})
	}
	is := is.New(t)
	// A field shared with the other inputs is named as sent, not through the Go struct
	// that holds it.
	is.Equal(e.Do("POST", "/v1/watches", company("domain", 42)).Str("error"), "domain must be a string, not a JSON number")
	is.Equal(e.WatchTotal(), float64(0))
	is.Equal(e.Balance("acme"), before)

	// PATCH checks what it changes the same way.
	id := e.CreateWatch(company()).Str("data.id")
	for _, tt := range []struct {
		body any
		want string
	}{
		{map[string]any{"every_days": 3}, "every_days must be an integer from 7 to 365"},
		{map[string]any{"every_days": 400}, "every_days must be an integer from 7 to 365"},
		{map[string]any{"fields": []string{"positions"}}, `"positions" is not a field of a company record`},
		{map[string]any{"loop_id": "x"}, "loop_id must be the uuid"},
		{map[string]any{"loop_id": personLoop}, "loop_id"},
		{map[string]any{"domain": "globex.com"}, `unknown field "domain"`},
		{map[string]any{"object_type": "person"}, `unknown field "object_type"`},
	} {
		r := e.Do("PATCH", "/v1/watches/"+id, tt.body)
		is.Equal(r.Status, http.StatusBadRequest)
		if !strings.Contains(r.Str("error"), tt.want) {
			t.Errorf("PATCH %v: error %q does not say %q", tt.body, r.Str("error"), tt.want)
		}
	}
	is.Equal(e.Do("GET", "/v1/watches/"+id, nil).Get("data.every_days"), float64(30))
	is.Equal(e.Do("GET", "/v1/watches?loop_id=nope", nil).Status, http.StatusBadRequest)
	is.Equal(e.Do("GET", "/v1/watches?pageSize=101", nil).Status, http.StatusBadRequest)
	is.Equal(e.Balance("acme"), before)
}

func TestWatchDuplicateIsConflict(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t)
	loopID, _ := e.CreateLoop("Companies", rcv.Srv.URL, "company")
	otherLoop, _ := e.CreateLoop("Other", rcv.Srv.URL, "company")
	e.CreateWatch(map[string]any{"object_type": "company", "domain": "acme.com", "loop_id": loopID})
	// The same company, however it is written, for the same Loop.
	dup := e.Do("POST", "/v1/watches", map[string]any{"object_type": "company", "domain": "https://www.ACME.com", "loop_id": loopID, "every_days": 7})
	is.Equal(dup.Status, http.StatusConflict)
	is.Equal(dup.Str("code"), "watch_exists")
	// Another Loop may watch it too.
	e.CreateWatch(map[string]any{"object_type": "company", "domain": "acme.com", "loop_id": otherLoop})
	is.Equal(e.WatchTotal(), float64(2))
}

// TestWatchOfAnotherOrganizationIsNotFound: another organization's watch and Loop are
// answered as ones that do not exist, whatever is asked of them.
func TestWatchOfAnotherOrganizationIsNotFound(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t)
	loopID, _ := e.CreateLoop("Companies", rcv.Srv.URL, "company")
	id := e.CreateWatch(map[string]any{"object_type": "company", "domain": "acme.com", "loop_id": loopID}).Str("data.id")

	otherKey, _ := e.NewOrg("globex", 100)
	as := []string{"Authorization", "Bearer " + otherKey}
	otherLoopRes := e.Do("POST", "/v1/loops", map[string]any{"name": "Theirs", "webhook_url": rcv.Srv.URL}, as...)
	is.Equal(otherLoopRes.Status, http.StatusCreated)
	otherLoop := otherLoopRes.Str("data.id")
	before := e.Balance("globex")

	for _, r := range []*servertest.Response{
		e.Do("GET", "/v1/watches/"+id, nil, as...),
		e.Do("PATCH", "/v1/watches/"+id, map[string]any{"every_days": 7}, as...),
		e.Do("POST", "/v1/watches/"+id+"/run", nil, as...),
		e.Do("DELETE", "/v1/watches/"+id, nil, as...),
		// A watch of theirs on our Loop, and a list of our Loop's watches.
		e.Do("POST", "/v1/watches", map[string]any{"object_type": "company", "domain": "acme.com", "loop_id": loopID}, as...),
		e.Do("GET", "/v1/watches?loop_id="+loopID, nil, as...),
		// Our watch moved to their Loop.
		e.Do("PATCH", "/v1/watches/"+id, map[string]any{"loop_id": otherLoop}),
		// A Loop that does not exist at all.
		e.Do("POST", "/v1/watches", map[string]any{"object_type": "company", "domain": "acme.com", "loop_id": "0195f3a2-6b1c-7cde-8f00-123456789abc"}),
	} {
		is.Equal(r.Status, http.StatusNotFound)
		is.Equal(r.Str("code"), "not_found")
	}
	is.Equal(e.Do("GET", "/v1/watches/"+id, nil).Str("data.loop_id"), loopID) // untouched
	theirs := e.Do("GET", "/v1/watches", nil, as...)
	is.Equal(theirs.Get("total"), float64(0))
	is.Equal(e.Balance("globex"), before)
}

func TestWatchImport(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t)
	loopID, _ := e.CreateLoop("Companies", rcv.Srv.URL, "company")
	personLoop, _ := e.CreateLoop("People", rcv.Srv.URL, "person")
	otherKey, _ := e.NewOrg("globex", 100)
	theirLoop := e.Do("POST", "/v1/loops", map[string]any{"name": "Theirs", "webhook_url": rcv.Srv.URL}, "Authorization", "Bearer "+otherKey).Str("data.id")
	before := e.Balance("acme")

	r := e.Do("POST", "/v1/watches/import", map[string]any{"watches": []any{
		map[string]any{"object_type": "company", "domain": "acme.com", "loop_id": loopID},                                // 0: created
		map[string]any{"object_type": "company", "domain": "acme.com", "loop_id": loopID, "every_days": 3},               // 1: 400
		map[string]any{"object_type": "company", "domain": "www.acme.com", "loop_id": loopID},                            // 2: 409, a duplicate of row 0
		map[string]any{"object_type": "company", "domain": "globex.com", "loop_id": theirLoop},                           // 3: 404
		map[string]any{"object_type": "person", "networkUrl": "https://www.linkedin.com/in/jane", "loop_id": personLoop}, // 4: created
		map[string]any{"object_type": "company", "domain": "initech.com", "loop_id": loopID, "Domain": "x"},              // 5: 400, unknown field
		"acme.com", // 6: 400, not an object
	}})
	is.Equal(r.Status, 200)
	rows := r.Get("data").([]any)
	is.Equal(len(rows), 7)
	want := []float64{201, 400, 409, 404, 201, 400, 400}
	for i, row := range rows {
		row := row.(map[string]any)
		is.Equal(row["index"], float64(i))
		if row["status"] != want[i] {
			t.Errorf("row %d: status %v, want %v: %v", i, row["status"], want[i], row)
		}
	}
	is.True(strings.Contains(rows[1].(map[string]any)["error"].(map[string]any)["error"].(string), "every_days"))
	is.Equal(rows[2].(map[string]any)["error"].(map[string]any)["code"], "watch_exists")
	is.Equal(rows[3].(map[string]any)["error"].(map[string]any)["code"], "not_found")
	is.True(strings.Contains(rows[5].(map[string]any)["error"].(map[string]any)["error"].(string), `unknown field "Domain"`))
	id := rows[0].(map[string]any)["data"].(map[string]any)["id"].(string)
	is.Equal(e.Do("GET", "/v1/watches/"+id, nil).Status, 200)
	is.Equal(e.WatchTotal(), float64(2))

	// Over 1,000 rows is refused whole, naming watches.
	tooMany := make([]any, 1001)
	for i := range tooMany {
		tooMany[i] = map[string]any{"object_type": "company", "domain": fmt.Sprintf("c%d.com", i), "loop_id": loopID}
	}
	r = e.Do("POST", "/v1/watches/import", map[string]any{"watches": tooMany})
	is.Equal(r.Status, http.StatusBadRequest)
	is.True(strings.Contains(r.Str("error"), "watches holds 1001 rows; send at most 1000"))
	r = e.Do("POST", "/v1/watches/import", map[string]any{"watches": []any{}})
	is.Equal(r.Status, http.StatusBadRequest)
	is.True(strings.Contains(r.Str("error"), "watches is empty"))
	r = e.Do("POST", "/v1/watches/import", map[string]any{})
	is.Equal(r.Status, http.StatusBadRequest)
	is.True(strings.Contains(r.Str("error"), "watches is required"))
	is.Equal(e.WatchTotal(), float64(2))

	// 1,000 rows fit in one request.
	r = e.Do("POST", "/v1/watches/import", map[string]any{"watches": tooMany[:1000]})
	is.Equal(r.Status, 200)
	is.Equal(e.WatchTotal(), float64(1002))
	is.Equal(e.Balance("acme"), before)

	// Any other POST on a watch is not allowed.
	r = e.Do("POST", "/v1/watches/"+id, map[string]any{})
	is.Equal(r.Status, http.StatusMethodNotAllowed)
}

// TestWatchRunNow: a manual check is an enrichment like any other: charged, queued,
// its Idempotency-Key honoured, and marked as the watch's.
func TestWatchRunNow(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	loopID, _ := e.CreateLoop("Companies", rcv.Srv.URL, "company")
	w := e.CreateWatch(map[string]any{"object_type": "company", "domain": "acme.com", "loop_id": loopID})
	id, next := w.Str("data.id"), w.Str("data.next_run_at")

	run := e.Do("POST", "/v1/watches/"+id+"/run", nil, "Idempotency-Key", "check-1")
	is.Equal(run.Status, http.StatusAccepted)
	is.Equal(run.Str("task.watch_id"), id)
	is.Equal(run.Get("task.loop_id"), nil) // the watch's events go to its Loop, not task.succeeded
	is.Equal(run.Get("task.input"), map[string]any{"domain": "acme.com"})
	is.Equal(e.Balance("acme").Charged, int64(1))
	replay := e.Do("POST", "/v1/watches/"+id+"/run", nil, "Idempotency-Key", "check-1")
	is.Equal(replay.Status, 200)
	is.Equal(replay.Str("task.id"), run.Str("task.id"))
	is.Equal(e.Balance("acme").Charged, int64(1))

	e.StartWorkers()
	done := e.WaitSettled(run.Str("task.id"))
	is.Equal(done.Str("task.status"), "succeeded")
	is.Equal(done.Str("task.watch_id"), id)
	got := e.Do("GET", "/v1/watches/"+id, nil)
	is.Equal(got.Str("data.next_run_at"), next) // the schedule is unchanged
	list := e.Do("GET", "/v1/watches", nil)
	is.Equal(list.Get("meta.watch_credits_this_month"), float64(1))
}
