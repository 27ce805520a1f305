package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
)

// auditEntries lists the key's organization's whole audit log through the API, newest
// first.
func (e *env) auditEntries(query string, headers ...string) []map[string]any {
	e.t.Helper()
	var all []map[string]any
	for page := 0; ; page++ {
		sep := "?"
		if query != "" {
			sep = "?" + query + "&"
		}
		r := e.do("GET", fmt.Sprintf("/v1/audit%spage=%d&pageSize=100", sep, page), nil, headers...)
		if r.status != http.StatusOK {
			e.t.Fatalf("GET /v1/audit?%s: %d %s", query, r.status, r.raw)
		}
		for _, d := range r.get("data").([]any) {
			all = append(all, d.(map[string]any))
		}
		if r.get("has_more") != true {
			return all
		}
	}
}

// actionsOf counts the entries of each action.
func actionsOf(entries []map[string]any) map[string]int {
	out := map[string]int{}
	for _, en := range entries {
		out[en["action"].(string)]++
	}
	return out
}

// entryOf is the one entry of action whose field is value.
func entryOf(t *testing.T, entries []map[string]any, action, field, value string) map[string]any {
	t.Helper()
	for _, en := range entries {
		if en["action"] == action && en[field] == value {
			return en
		}
	}
	t.Fatalf("no %s entry with %s %q", action, field, value)
	return nil
}

func actorOf(en map[string]any) (kind string, name any) {
	a := en["actor"].(map[string]any)
	return a["kind"].(string), a["name"]
}

// TestTheAuditLogRecordsEveryWayIntoPeoplesData: an enrichment through the API, MCP,
// a Loop's run, a batch's row and a watch's check; a batch uploaded and its results
// downloaded; a watch made; a suppression added and lifted: each is an entry of the
// organization's chain, by the key, the MCP client, the batch or the watch, with the
// subject as sent, the request's id as its answer gave it, the task or batch, the
// credits; and the chain verifies.
func TestTheAuditLogRecordsEveryWayIntoPeoplesData(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks, watchesOften)
	for _, d := range []string{"acme.com", "globex.com", "initech.com", "umbrella.com"} {
		e.net.addCompany(company(strings.TrimSuffix(d, ".com"), d))
	}
	e.net.addPerson(person("jane-doe", "Jane Doe", position("Acme", "acme", "Engineer", "2020-03-01", true)))
	rcv := newReceiver(t)
	e.startWorkers()

	api := e.do("POST", "/v1/companies/enrich", map[string]any{"domain": "ACME.com"})
	is.Equal(api.status, http.StatusAccepted)
	apiTask := api.str("task.id")
	e.waitSettled(apiTask)

	byMCP := call(t, e.mcp(e.key), "enrich_company", map[string]any{"domain": "globex.com", "wait_seconds": 10})
	is.True(!byMCP.isError)
	mcpTask := byMCP.str("task.id")

	loopID, _ := e.createLoop("crm", rcv.srv.URL+"/hook", "company")
	run := e.do("POST", "/v1/loops/"+loopID+"/run", map[string]any{"domain": "initech.com"})
	is.Equal(run.status, http.StatusAccepted)

	up := e.uploadCSV("domain\numbrella.com\n", "?name=list.csv")
	is.Equal(up.status, http.StatusAccepted)
	batchID := up.str("data.id")
	e.waitBatchDone(batchID)
	dl := e.do("GET", "/v1/batches/"+batchID+"/results", nil)
	is.Equal(dl.status, http.StatusOK)

	people, _ := e.createLoop("people", rcv.srv.URL+"/people", "person")
	w := e.createWatch(map[string]any{"object_type": "person", "networkUrl": "https://linkedin.com/in/Jane-Doe/", "loop_id": people})
	watchID := w.str("data.id")
	check := e.nextCheck(watchID)
	is.Equal(check.str("task.status"), "succeeded")

	sup := e.suppress(map[string]any{"email": "jane.doe@acme.com"})
	is.Equal(e.do("DELETE", "/v1/suppressions/"+sup, nil).status, http.StatusNoContent)

	entries := e.auditEntries("")
	is.Equal(actionsOf(entries), map[string]int{"key.created": 1, "task.created": 5, "batch.created": 1, "batch.downloaded": 1,
		"watch.created": 1, "suppression.added": 1, "suppression.lifted": 1})
	for i, en := range entries {
		is.Equal(en["seq"], float64(len(entries)-i)) // the chain's order, newest first
		if i+1 < len(entries) {
			is.Equal(en["prev_hash"], entries[i+1]["hash"])
		}
	}
	first := entries[len(entries)-1]
	is.Equal(first["action"], "key.created")
	kind, _ := actorOf(first)
	is.Equal(kind, "system") // the test's own setup, outside any request

	byAPI := entryOf(t, entries, "task.created", "task_id", apiTask)
	kind, name := actorOf(byAPI)
	is.Equal([]any{kind, name}, []any{"key", "test"})
	is.Equal(byAPI["subject"], "ACME.com") // as sent
	is.Equal(byAPI["credits"], float64(1))
	is.Equal(byAPI["request_id"], api.header.Get("X-Request-Id"))
	is.Equal(byAPI["batch_id"], nil)

	kind, name = actorOf(entryOf(t, entries, "task.created", "task_id", mcpTask))
	is.Equal(kind, "mcp")
	is.True(strings.HasPrefix(name.(string), "test")) // the key's name, and the client's own
	is.Equal(entryOf(t, entries, "task.created", "task_id", run.str("task.id"))["request_id"], run.header.Get("X-Request-Id"))

	rowTask := entryOf(t, entries, "task.created", "batch_id", batchID)
	kind, _ = actorOf(rowTask)
	is.Equal(kind, "batch")
	is.Equal(rowTask["actor"].(map[string]any)["id"], batchID)
	is.Equal(rowTask["subject"], "umbrella.com")
	uploaded := entryOf(t, entries, "batch.created", "batch_id", batchID)
	kind, _ = actorOf(uploaded)
	is.Equal(kind, "key")
	is.Equal(uploaded["request_id"], up.header.Get("X-Request-Id"))
	is.Equal(uploaded["detail"].(map[string]any)["name"], "list.csv")
	downloaded := entryOf(t, entries, "batch.downloaded", "batch_id", batchID)
	is.Equal(downloaded["request_id"], dl.header.Get("X-Request-Id"))

	checked := entryOf(t, entries, "task.created", "task_id", check.str("task.id"))
	kind, _ = actorOf(checked)
	is.Equal(kind, "watch")
	is.Equal(checked["actor"].(map[string]any)["id"], watchID)
	made := entryOf(t, entries, "watch.created", "object_id", watchID)
	is.Equal(made["subject"], "https://www.linkedin.com/in/jane-doe") // as the watch keeps its input
	is.Equal(made["subject_hash"], checked["subject_hash"])           // one person, however written

	added := entryOf(t, entries, "suppression.added", "object_id", sup)
	is.Equal(added["subject"], nil) // a suppression is kept by its hash alone
	is.True(added["subject_hash"] != nil)
	is.True(!strings.Contains(string(e.do("GET", "/v1/audit?action=suppression.added", nil).raw), "jane"))

	// Each filter, through the handler.
	is.Equal(len(e.auditEntries("action=task.created")), 5)
	about := e.auditEntries("subject=" + url.QueryEscape("https://www.linkedin.com/in/jane-doe"))
	is.Equal(actionsOf(about), map[string]int{"watch.created": 1, "task.created": 1})
	is.Equal(len(e.auditEntries("subject=acme.com")), 1)
	is.Equal(actionsOf(e.auditEntries("subject=Jane.Doe%40acme.com")), map[string]int{"suppression.added": 1, "suppression.lifted": 1})
	// The test's clock stands still but for the watch's check, which moved it on.
	at, err := time.Parse(time.RFC3339Nano, checked["at"].(string))
	is.NoErr(err)
	since := e.auditEntries("since=" + url.QueryEscape(at.Format(time.RFC3339Nano)))
	is.Equal(actionsOf(since), map[string]int{"task.created": 1, "suppression.added": 1, "suppression.lifted": 1})
	before := e.auditEntries("until=" + url.QueryEscape(at.Format(time.RFC3339Nano)))
	is.Equal(len(since)+len(before), len(entries))
	is.Equal(len(e.auditEntries("since="+at.Format("2006-01-02")+"&action=suppression.added")), 1)
	page := e.do("GET", "/v1/audit?pageSize=3", nil)
	is.Equal(page.get("has_more"), true)
	is.Equal(len(page.get("data").([]any)), 3)

	// The whole log as JSON Lines, oldest first.
	export := e.do("GET", "/v1/audit?format=jsonl", nil)
	is.Equal(export.status, http.StatusOK)
	is.Equal(export.header.Get("Content-Type"), "application/x-ndjson")
	is.True(strings.Contains(export.header.Get("Content-Disposition"), "audit.jsonl"))
	var lines []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(export.raw))
	for sc.Scan() {
		var en map[string]any
		is.NoErr(json.Unmarshal(sc.Bytes(), &en))
		lines = append(lines, en)
	}
	is.Equal(len(lines), len(entries))
	for i, en := range lines {
		is.Equal(en["hash"], entries[len(entries)-1-i]["hash"])
	}
	tasks := e.do("GET", "/v1/audit?format=jsonl&action=task.created", nil)
	is.Equal(bytes.Count(tasks.raw, []byte("\n")), 5)

	chains, err := e.db.VerifyAudit(context.Background(), e.orgID, false)
	is.NoErr(err)
	is.Equal(len(chains), 1)
	is.Equal(chains[0].Bad, nil)
	is.Equal(chains[0].Entries, int64(len(entries)))
}

// TestAuditRefusesBadFiltersAndOffersNoWrite: every bad filter, page or format is a
// 400 that says what is wrong, no method changes or deletes an entry, and another
// organization's log shows none of this one's; the log is as it was.
func TestAuditRefusesBadFiltersAndOffersNoWrite(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	otherKey, _ := e.newOrg("globex", 10)
	e.suppress(map[string]any{"domain": "acme.com"})
	before := e.do("GET", "/v1/audit?format=jsonl", nil).raw

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
		r := e.do("GET", "/v1/audit?"+query, nil)
		if r.status != http.StatusBadRequest || r.str("code") != "invalid_input" || !strings.Contains(r.str("error"), says) {
			t.Errorf("GET /v1/audit?%s: %d %s, want 400 saying %q", clipTo(query, 80), r.status, r.raw, says)
		}
	}
	is.Equal(e.do("GET", "/v1/audit", nil, "Authorization", "").status, http.StatusUnauthorized)
	for _, method := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		r := e.do(method, "/v1/audit", map[string]any{"seq": 1})
		is.Equal(r.status, http.StatusMethodNotAllowed)
		is.Equal(r.header.Get("Allow"), "GET")
	}
	for _, path := range []string{"/v1/audit/1", "/v1/audit/" + e.orgID} {
		is.Equal(e.do("DELETE", path, nil).status, http.StatusNotFound)
	}
	is.Equal(string(e.do("GET", "/v1/audit?format=jsonl", nil).raw), string(before)) // nothing changed

	// Another organization sees its own log alone, and finds nothing of this one's.
	theirs := e.auditEntries("", "Authorization", "Bearer "+otherKey)
	is.Equal(actionsOf(theirs), map[string]int{"key.created": 1})
	is.Equal(len(e.auditEntries("subject=acme.com", "Authorization", "Bearer "+otherKey)), 0)
	is.Equal(len(e.auditEntries("subject=acme.com")), 1)
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
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks, erasuresOften)
	rosaNetwork(e)
	e.startWorkers()
	rcv := newReceiver(t)
	lookUpRosaEverywhere(t, e, rcv)
	byProfile := "subject=" + url.QueryEscape(rosa.url)
	byEmail := "subject=" + url.QueryEscape(rosa.email)
	hers := append(e.auditEntries(byProfile), e.auditEntries(byEmail)...)
	is.True(len(hers) >= 4) // the Loop's run, the address, the batch's row, the watch
	for _, en := range hers {
		is.True(en["subject"] != nil)
	}

	x := e.do("GET", "/v1/people/export?networkUrl="+url.QueryEscape(rosa.url), nil)
	is.Equal(x.status, http.StatusOK)
	is.Equal(len(x.get("audit").([]any)), len(hers))
	for _, task := range x.get("tasks").([]any) {
		by := task.(map[string]any)["by"].(map[string]any)
		is.True(by["kind"] == "key" || by["kind"] == "batch" || by["kind"] == "watch")
	}
	exported := e.auditEntries("action=person.exported")
	is.Equal(len(exported), 1)
	kind, name := actorOf(exported[0])
	is.Equal([]any{kind, name}, []any{"key", "test"})
	is.Equal(exported[0]["subject"], rosa.url)
	is.Equal(exported[0]["request_id"], x.header.Get("X-Request-Id"))

	before := len(e.auditEntries(""))
	for _, bad := range []map[string]any{{"email": rosa.email, "networkUrl": rosa.url}, {}, {"email": "not an address"}} {
		is.Equal(e.do("POST", "/v1/erasures", bad).status, http.StatusBadRequest)
	}
	is.Equal(e.do("GET", "/v1/people/export?email=nope", nil).status, http.StatusBadRequest)
	is.Equal(len(e.auditEntries("")), before) // nothing recorded

	r := e.do("POST", "/v1/erasures", map[string]any{"networkUrl": rosa.url})
	is.Equal(r.status, http.StatusCreated)
	id := r.str("data.id")
	is.True(r.get("data.removed.audit_log").(float64) >= float64(len(hers)))
	erased := entryOf(t, e.auditEntries("action=person.erased"), "person.erased", "object_id", id)
	kind, name = actorOf(erased)
	is.Equal([]any{kind, name}, []any{"key", "test"})
	is.Equal(erased["request_id"], r.header.Get("X-Request-Id"))
	is.Equal(erased["subject"], nil)
	is.Equal(erased["subject_hash"], entryOf(t, e.auditEntries(byProfile), "person.erased", "object_id", id)["subject_hash"])
	for _, q := range []string{byProfile, byEmail} {
		for _, en := range e.auditEntries(q) {
			is.Equal(en["subject"], nil) // found by her hash, without her
			is.True(en["erased"] == true || en["action"] == "person.erased")
		}
	}
	all := e.do("GET", "/v1/audit?format=jsonl", nil)
	for _, s := range rosaSays {
		if strings.Contains(strings.ToLower(string(all.raw)), strings.ToLower(s)) {
			t.Errorf("the audit log holds %q after her erasure", s)
		}
	}
	chains, err := e.db.VerifyAudit(context.Background(), e.orgID, false)
	is.NoErr(err)
	is.Equal(chains[0].Bad, nil)
	is.True(chains[0].Erased >= int64(len(hers)))

	// In the dashboard, the user's own.
	admin := e.signIn("acme", "admin")
	p := admin.post("/dashboard/erasures/export", url.Values{"kind": {"email"}, "value": {"someone.else@acme.com"}})
	is.Equal(p.status, http.StatusOK)
	kind, name = actorOf(entryOf(t, e.auditEntries("action=person.exported"), "person.exported", "subject", "someone.else@acme.com"))
	is.Equal([]any{kind, name}, []any{"user", "admin@acme.example"})
	p = admin.post("/dashboard/erasures", url.Values{"kind": {"email"}, "value": {"someone.else@acme.com"}, "confirm": {"yes"}})
	is.Equal(p.status, http.StatusSeeOther)
	last := e.auditEntries("action=person.erased")[0]
	kind, name = actorOf(last)
	is.Equal([]any{kind, name}, []any{"user", "admin@acme.example"})
	is.Equal(last["request_id"], p.header.Get("X-Request-Id"))
	chains, err = e.db.VerifyAudit(context.Background(), e.orgID, false)
	is.NoErr(err)
	is.Equal(chains[0].Bad, nil)
}
