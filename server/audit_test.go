package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"enrichd/server/servertest"

	"github.com/matryer/is"
)

// TestTheAuditLogRecordsEveryWayIntoPeoplesData: an enrichment through the API, MCP,
// a Loop's run, a batch's row and a watch's check; a batch uploaded and its results
// downloaded; a watch made; a suppression added and lifted: each is an entry of the
// organization's chain, by the key, the MCP client, the batch or the watch, with the
// subject as sent, the request's id as its answer gave it, the task or batch, the
// credits; and the chain verifies.
func TestTheAuditLogRecordsEveryWayIntoPeoplesData(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks, watchesOften)
	for _, d := range []string{"acme.com", "globex.com", "initech.com", "umbrella.com"} {
		e.Net.AddCompany(servertest.Company(strings.TrimSuffix(d, ".com"), d))
	}
	e.Net.AddPerson(person("jane-doe", "Jane Doe", position("Acme", "acme", "Engineer", "2020-03-01", true)))
	rcv := servertest.NewReceiver(t)
	e.StartWorkers()

	api := e.Do("POST", "/v1/companies/enrich", map[string]any{"domain": "ACME.com"})
	is.Equal(api.Status, http.StatusAccepted)
	apiTask := api.Str("task.id")
	e.WaitSettled(apiTask)

	byMCP := call(t, e.MCP(e.Key), "enrich_company", map[string]any{"domain": "globex.com", "wait_seconds": 10})
	is.True(!byMCP.isError)
	mcpTask := byMCP.Str("task.id")

	loopID, _ := e.CreateLoop("crm", rcv.Srv.URL+"/hook", "company")
	run := e.Do("POST", "/v1/loops/"+loopID+"/run", map[string]any{"domain": "initech.com"})
	is.Equal(run.Status, http.StatusAccepted)

	up := e.UploadCSV("domain\numbrella.com\n", "?name=list.csv")
	is.Equal(up.Status, http.StatusAccepted)
	batchID := up.Str("data.id")
	e.WaitBatchDone(batchID)
	dl := e.Do("GET", "/v1/batches/"+batchID+"/results", nil)
	is.Equal(dl.Status, http.StatusOK)

	people, _ := e.CreateLoop("people", rcv.Srv.URL+"/people", "person")
	w := e.CreateWatch(map[string]any{"object_type": "person", "networkUrl": "https://linkedin.com/in/Jane-Doe/", "loop_id": people})
	watchID := w.Str("data.id")
	check := e.NextCheck(watchID)
	is.Equal(check.Str("task.status"), "succeeded")

	sup := e.Suppress(map[string]any{"email": "jane.doe@acme.com"})
	is.Equal(e.Do("DELETE", "/v1/suppressions/"+sup, nil).Status, http.StatusNoContent)

	entries := e.AuditEntries("")
	is.Equal(servertest.ActionsOf(entries), map[string]int{"key.created": 1, "task.created": 5, "batch.created": 1, "batch.downloaded": 1,
		"watch.created": 1, "suppression.added": 1, "suppression.lifted": 1})
	for i, en := range entries {
		is.Equal(en["seq"], float64(len(entries)-i)) // the chain's order, newest first
		if i+1 < len(entries) {
			is.Equal(en["prev_hash"], entries[i+1]["hash"])
		}
	}
	first := entries[len(entries)-1]
	is.Equal(first["action"], "key.created")
	kind, _ := servertest.ActorOf(first)
	is.Equal(kind, "system") // the test's own setup, outside any request

	byAPI := servertest.EntryOf(t, entries, "task.created", "task_id", apiTask)
	kind, name := servertest.ActorOf(byAPI)
	is.Equal([]any{kind, name}, []any{"key", "test"})
	is.Equal(byAPI["subject"], "ACME.com") // as sent
	is.Equal(byAPI["credits"], float64(1))
	is.Equal(byAPI["request_id"], api.Header.Get("X-Request-Id"))
	is.Equal(byAPI["batch_id"], nil)

	kind, name = servertest.ActorOf(servertest.EntryOf(t, entries, "task.created", "task_id", mcpTask))
	is.Equal(kind, "mcp")
	is.True(strings.HasPrefix(name.(string), "test")) // the key's name, and the client's own
	is.Equal(servertest.EntryOf(t, entries, "task.created", "task_id", run.Str("task.id"))["request_id"], run.Header.Get("X-Request-Id"))

	rowTask := servertest.EntryOf(t, entries, "task.created", "batch_id", batchID)
	kind, _ = servertest.ActorOf(rowTask)
	is.Equal(kind, "batch")
	is.Equal(rowTask["actor"].(map[string]any)["id"], batchID)
	is.Equal(rowTask["subject"], "umbrella.com")
	uploaded := servertest.EntryOf(t, entries, "batch.created", "batch_id", batchID)
	kind, _ = servertest.ActorOf(uploaded)
	is.Equal(kind, "key")
	is.Equal(uploaded["request_id"], up.Header.Get("X-Request-Id"))
	is.Equal(uploaded["detail"].(map[string]any)["name"], "list.csv")
	downloaded := servertest.EntryOf(t, entries, "batch.downloaded", "batch_id", batchID)
	is.Equal(downloaded["request_id"], dl.Header.Get("X-Request-Id"))

	checked := servertest.EntryOf(t, entries, "task.created", "task_id", check.Str("task.id"))
	kind, _ = servertest.ActorOf(checked)
	is.Equal(kind, "watch")
	is.Equal(checked["actor"].(map[string]any)["id"], watchID)
	made := servertest.EntryOf(t, entries, "watch.created", "object_id", watchID)
	is.Equal(made["subject"], "https://www.linkedin.com/in/jane-doe") // as the watch keeps its input
	is.Equal(made["subject_hash"], checked["subject_hash"])           // one person, however written

	added := servertest.EntryOf(t, entries, "suppression.added", "object_id", sup)
	is.Equal(added["subject"], nil) // a suppression is kept by its hash alone
	is.True(added["subject_hash"] != nil)
	is.True(!strings.Contains(string(e.Do("GET", "/v1/audit?action=suppression.added", nil).Raw), "jane"))

	// Each filter, through the handler.
	is.Equal(len(e.AuditEntries("action=task.created")), 5)
	about := e.AuditEntries("subject=" + url.QueryEscape("https://www.linkedin.com/in/jane-doe"))
	is.Equal(servertest.ActionsOf(about), map[string]int{"watch.created": 1, "task.created": 1})
	is.Equal(len(e.AuditEntries("subject=acme.com")), 1)
	is.Equal(servertest.ActionsOf(e.AuditEntries("subject=Jane.Doe%40acme.com")), map[string]int{"suppression.added": 1, "suppression.lifted": 1})
	// The test's clock stands still but for the watch's check, which moved it on.
	at, err := time.Parse(time.RFC3339Nano, checked["at"].(string))
	is.NoErr(err)
	since := e.AuditEntries("since=" + url.QueryEscape(at.Format(time.RFC3339Nano)))
	is.Equal(servertest.ActionsOf(since), map[string]int{"task.created": 1, "suppression.added": 1, "suppression.lifted": 1})
	before := e.AuditEntries("until=" + url.QueryEscape(at.Format(time.RFC3339Nano)))
	is.Equal(len(since)+len(before), len(entries))
	is.Equal(len(e.AuditEntries("since="+at.Format("2006-01-02")+"&action=suppression.added")), 1)
	page := e.Do("GET", "/v1/audit?pageSize=3", nil)
	is.Equal(page.Get("has_more"), true)
	is.Equal(len(page.Get("data").([]any)), 3)

	// The whole log as JSON Lines, oldest first.
	export := e.Do("GET", "/v1/audit?format=jsonl", nil)
	is.Equal(export.Status, http.StatusOK)
	is.Equal(export.Header.Get("Content-Type"), "application/x-ndjson")
	is.True(strings.Contains(export.Header.Get("Content-Disposition"), "audit.jsonl"))
	var lines []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(export.Raw))
	for sc.Scan() {
		var en map[string]any
		is.NoErr(json.Unmarshal(sc.Bytes(), &en))
		lines = append(lines, en)
	}
	is.Equal(len(lines), len(entries))
	for i, en := range lines {
		is.Equal(en["hash"], entries[len(entries)-1-i]["hash"])
	}
	tasks := e.Do("GET", "/v1/audit?format=jsonl&action=task.created", nil)
	is.Equal(bytes.Count(tasks.Raw, []byte("\n")), 5)

	chains, err := e.DB.VerifyAudit(context.Background(), e.OrgID, false)
	is.NoErr(err)
	is.Equal(len(chains), 1)
	is.Equal(chains[0].Bad, nil)
	is.Equal(chains[0].Entries, int64(len(entries)))
}

// TestAuditRefusesBadFiltersAndOffersNoWrite: every bad filter, page or format is a
// 400 that says what is wrong, no method changes or deletes an entry, and another
// organization's log shows none of this one's; the log is as it was.
func TestAuditRefusesBadFiltersAndOffersNoWrite(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	otherKey, _ := e.NewOrg("globex", 10)
	e.Suppress(map[string]any{"domain": "acme.com"})
	before := e.Do("GET", "/v1/audit?format=jsonl", nil).Raw

	for query, says := range map[string]string{
		"action=task.deleted":                                                 "action must be one of",
		"subject=" + url.QueryEscape("not a subject"):                         "domain",
		"subject=" + url.QueryEscape("https://www.linkedin.com/company/acme"): "a company's page names no subject",
		"subject=" + strings.Repeat("a", 3000) + ".com":                       "longer than 2048",
		"since=yesterday":                                                     "since \"yesterday\" is neither",
		"until=2026-13-01":                                                    "until",
		"since=2026-11-28&until=2026-11-28":                                   "must be before until",
		"page=x":                                                              "page must be an integer",
		"page=200&pageSize=100":                                               "page × pageSize must be at most",
		"pageSize=101":                                                        "pageSize must be an integer",
		"format=csv":                                                          "format must be json or jsonl",
		"format=jsonl&page=1":                                                 "not paged",
		"action=task.created&action=key.created":                              "sent 2 times",
	} {
		r := e.Do("GET", "/v1/audit?"+query, nil)
		if r.Status != http.StatusBadRequest || r.Str("code") != "invalid_input" || !strings.Contains(r.Str("error"), says) {
			t.Errorf("GET /v1/audit?%s: %d %s, want 400 saying %q", clipTo(query, 80), r.Status, r.Raw, says)
		}
	}
	is.Equal(e.Do("GET", "/v1/audit", nil, "Authorization", "").Status, http.StatusUnauthorized)
	for _, method := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		r := e.Do(method, "/v1/audit", map[string]any{"seq": 1})
		is.Equal(r.Status, http.StatusMethodNotAllowed)
		is.Equal(r.Header.Get("Allow"), "GET")
	}
	for _, path := range []string{"/v1/audit/1", "/v1/audit/" + e.OrgID} {
		is.Equal(e.Do("DELETE", path, nil).Status, http.StatusNotFound)
	}
	is.Equal(string(e.Do("GET", "/v1/audit?format=jsonl", nil).Raw), string(before)) // nothing changed

	// Another organization sees its own log alone, and finds nothing of this one's.
	theirs := e.AuditEntries("", "Authorization", "Bearer "+otherKey)
	is.Equal(servertest.ActionsOf(theirs), map[string]int{"key.created": 1})
	is.Equal(len(e.AuditEntries("subject=acme.com", "Authorization", "Bearer "+otherKey)), 0)
	is.Equal(len(e.AuditEntries("subject=acme.com")), 1)
}

func clipTo(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// TestErasuresAndExportsAreInTheAuditLog: Rosa, looked up by profile through a Loop, by
// address, in a batch and watched, is in the log by the subject sent; her export
// through the API lists those entries and who made each task, and is itself recorded,
// by the key, with the request's id; bad requests to export or erase her record
// nothing; her erasure blanks every entry about her, found by hash still, and records
// itself after them, by the key, by hash alone, and the chain verifies. A dashboard
// user's export and erasure are recorded as theirs.
func TestErasuresAndExportsAreInTheAuditLog(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks, servertest.ErasuresOften)
	servertest.RosaNetwork(e)
	e.StartWorkers()
	rcv := servertest.NewReceiver(t)
	servertest.LookUpRosaEverywhere(t, e, rcv)
	byProfile := "subject=" + url.QueryEscape(servertest.Rosa.URL)
	byEmail := "subject=" + url.QueryEscape(servertest.Rosa.Email)
	hers := append(e.AuditEntries(byProfile), e.AuditEntries(byEmail)...)
	is.True(len(hers) >= 4) // the Loop's run, the address, the batch's row, the watch
	for _, en := range hers {
		is.True(en["subject"] != nil)
	}

	x := e.Do("GET", "/v1/people/export?networkUrl="+url.QueryEscape(servertest.Rosa.URL), nil)
	is.Equal(x.Status, http.StatusOK)
	is.Equal(len(x.Get("audit").([]any)), len(hers))
	for _, task := range x.Get("tasks").([]any) {
		by := task.(map[string]any)["by"].(map[string]any)
		is.True(by["kind"] == "key" || by["kind"] == "batch" || by["kind"] == "watch")
	}
	exported := e.AuditEntries("action=person.exported")
	is.Equal(len(exported), 1)
	kind, name := servertest.ActorOf(exported[0])
	is.Equal([]any{kind, name}, []any{"key", "test"})
	is.Equal(exported[0]["subject"], servertest.Rosa.URL)
	is.Equal(exported[0]["request_id"], x.Header.Get("X-Request-Id"))

	before := len(e.AuditEntries(""))
	for _, bad := range []map[string]any{{"email": servertest.Rosa.Email, "networkUrl": servertest.Rosa.URL}, {}, {"email": "not an address"}} {
		is.Equal(e.Do("POST", "/v1/erasures", bad).Status, http.StatusBadRequest)
	}
	is.Equal(e.Do("GET", "/v1/people/export?email=nope", nil).Status, http.StatusBadRequest)
	is.Equal(len(e.AuditEntries("")), before) // nothing recorded

	r := e.Do("POST", "/v1/erasures", map[string]any{"networkUrl": servertest.Rosa.URL})
	is.Equal(r.Status, http.StatusCreated)
	id := r.Str("data.id")
	is.True(r.Get("data.removed.audit_log").(float64) >= float64(len(hers)))
	erased := servertest.EntryOf(t, e.AuditEntries("action=person.erased"), "person.erased", "object_id", id)
	kind, name = servertest.ActorOf(erased)
	is.Equal([]any{kind, name}, []any{"key", "test"})
	is.Equal(erased["request_id"], r.Header.Get("X-Request-Id"))
	is.Equal(erased["subject"], nil)
	is.Equal(erased["subject_hash"], servertest.EntryOf(t, e.AuditEntries(byProfile), "person.erased", "object_id", id)["subject_hash"])
	for _, q := range []string{byProfile, byEmail} {
		for _, en := range e.AuditEntries(q) {
			is.Equal(en["subject"], nil) // found by her hash, without her
			is.True(en["erased"] == true || en["action"] == "person.erased")
		}
	}
	all := e.Do("GET", "/v1/audit?format=jsonl", nil)
	for _, s := range servertest.RosaSays {
		if strings.Contains(strings.ToLower(string(all.Raw)), strings.ToLower(s)) {
			t.Errorf("the audit log holds %q after her erasure", s)
		}
	}
	chains, err := e.DB.VerifyAudit(context.Background(), e.OrgID, false)
	is.NoErr(err)
	is.Equal(chains[0].Bad, nil)
	is.True(chains[0].Erased >= int64(len(hers)))

	// In the dashboard, the user's own.
	admin := e.SignIn("acme", "admin")
	p := admin.Post("/dashboard/erasures/export", url.Values{"kind": {"email"}, "value": {"someone.else@acme.com"}})
	is.Equal(p.Status, http.StatusOK)
	kind, name = servertest.ActorOf(servertest.EntryOf(t, e.AuditEntries("action=person.exported"), "person.exported", "subject", "someone.else@acme.com"))
	is.Equal([]any{kind, name}, []any{"user", "admin@acme.example"})
	p = admin.Post("/dashboard/erasures", url.Values{"kind": {"email"}, "value": {"someone.else@acme.com"}, "confirm": {"yes"}})
	is.Equal(p.Status, http.StatusSeeOther)
	last := e.AuditEntries("action=person.erased")[0]
	kind, name = servertest.ActorOf(last)
	is.Equal([]any{kind, name}, []any{"user", "admin@acme.example"})
	is.Equal(last["request_id"], p.Header.Get("X-Request-Id"))
	chains, err = e.DB.VerifyAudit(context.Background(), e.OrgID, false)
	is.NoErr(err)
	is.Equal(chains[0].Bad, nil)
}
