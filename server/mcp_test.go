package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"enrichd/server"
	"enrichd/server/servertest"
	"enrichd/store"
	"enrichd/store/storetest"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/matryer/is"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"
)

// The MCP endpoint, driven by the official SDK's own client over its Streamable HTTP
// transport, against the real handler on a loopback listener.

// toolResult is a tool call's answer: its structured content read as the API's bodies
// are, and its text.
type toolResult struct {
	*servertest.Response
	isError bool
	text    string
}

func call(t testing.TB, cs *mcp.ClientSession, tool string, args any) *toolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	out := &toolResult{isError: res.IsError, Response: &servertest.Response{}}
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out.text += tc.Text
		}
	}
	if out.Raw, err = json.Marshal(res.StructuredContent); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out.Raw, &out.Body); err != nil {
		t.Fatalf("%s: the structured content is not an object: %s", tool, out.Raw)
	}
	// The TypeScript SDK's client, which most agents run, checks the structured content
	// against the tool's output schema, a tool error's too, and throws where it does not
	// fit: the agent would read a protocol error instead of the answer.
	if err := outputSchemaOf(t, cs, tool).Validate(out.Body); err != nil {
		t.Fatalf("%s: the structured content does not fit the tool's output schema: %v: %s", tool, err, out.Raw)
	}
	return out
}

// outputSchemas holds each session's tools' output schemas, resolved, as a client
// keeps them from tools/list.
var outputSchemas sync.Map // *mcp.ClientSession → map[string]*jsonschema.Resolved

func outputSchemaOf(t testing.TB, cs *mcp.ClientSession, tool string) *jsonschema.Resolved {
	t.Helper()
	if m, ok := outputSchemas.Load(cs); ok {
		return m.(map[string]*jsonschema.Resolved)[tool]
	}
	list, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]*jsonschema.Resolved{}
	for _, tl := range list.Tools {
		raw, _ := json.Marshal(tl.OutputSchema)
		var schema jsonschema.Schema
		if err := json.Unmarshal(raw, &schema); err != nil {
			t.Fatalf("%s's output schema: %v", tl.Name, err)
		}
		if m[tl.Name], err = schema.Resolve(nil); err != nil {
			t.Fatalf("%s's output schema: %v", tl.Name, err)
		}
	}
	outputSchemas.Store(cs, m)
	return m[tool]
}

// succeeded fails the test unless the call answered without a tool error.
func (r *toolResult) ok(t testing.TB) *toolResult {
	t.Helper()
	if r.isError {
		t.Fatalf("tool error: %s", r.text)
	}
	return r
}

// toolRefused checks a tool error that says what the API's answer says.
func toolRefused(t testing.TB, r *toolResult, status int, code, message string) {
	t.Helper()
	is := is.NewRelaxed(t)
	is.True(r.isError)
	is.Equal(r.Get("status"), float64(status))
	is.Equal(r.Str("code"), code)
	is.Equal(r.Str("error"), message)
	is.Equal(r.text, message+" ("+code+")") // what an agent reads names the code too
	if t.Failed() {
		t.Logf("got %s %s", r.text, r.Raw)
	}
}

func TestMCPListsItsTools(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	cs := e.MCP(e.Key)
	is.Equal(cs.InitializeResult().ServerInfo.Name, "enrichd")
	is.True(cs.InitializeResult().Instructions != "")
	// The tools never change, so no notification that they did is promised.
	is.True(cs.InitializeResult().Capabilities.Tools != nil)
	is.True(!cs.InitializeResult().Capabilities.Tools.ListChanged)

	list, err := cs.ListTools(t.Context(), nil)
	is.NoErr(err)
	tools := map[string]*mcp.Tool{}
	for _, tool := range list.Tools {
		tools[tool.Name] = tool
	}
	is.Equal(len(tools), 5)
	for name, args := range map[string][]string{
		"enrich_company": {"domain", "networkUrl", "idempotency_key", "wait_seconds", "loop_id"},
		"enrich_person":  {"networkUrl", "email", "fullName", "title", "location", "idempotency_key", "wait_seconds", "loop_id"},
		"get_task":       {"task_id"},
		"list_tasks":     {"status", "page", "pageSize"},
		"get_balance":    {},
	} {
		tool := tools[name]
		if tool == nil {
			t.Errorf("no tool %s", name)
			continue
		}
		is.True(len(tool.Description) > 80) // a description an agent can act on
		is.True(tool.OutputSchema != nil)
		var schema struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Additional *bool                      `json:"additionalProperties"`
		}
		raw, _ := json.Marshal(tool.InputSchema)
		is.NoErr(json.Unmarshal(raw, &schema))
		is.Equal(schema.Type, "object")
		is.True(schema.Additional != nil && !*schema.Additional)
		got := []string{}
		for p, def := range schema.Properties {
			got = append(got, p)
			is.True(strings.Contains(string(def), `"description"`) || name == "list_tasks") // each argument says what it is
		}
		slices.Sort(got)
		slices.Sort(args)
		is.Equal(got, args)
	}
	is.True(tools["get_task"].Annotations.ReadOnlyHint)
	is.True(!tools["enrich_company"].Annotations.ReadOnlyHint)
}

func TestMCPNeedsTheAPIKey(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t)
	revoked, _ := e.NewOrg("other", 10)
	if err := e.DB.RevokeKey(t.Context(), store.BySystem, "other", e.KeyByPrefix("other", revoked).ID); err != nil {
		t.Fatal(err)
	}
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	for name, auth := range map[string]string{
		"no key":          "",
		"another scheme":  "Basic " + e.Key,
		"an unknown key":  "Bearer sk_live_nope",
		"a key's prefix":  "Bearer " + e.Key[:12],
		"an empty bearer": "Bearer ",
		"a revoked key":   "Bearer " + revoked,
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			r := e.Do("POST", "/mcp", initialize, "Authorization", auth, "Accept", "application/json, text/event-stream")
			is.Equal(r.Status, http.StatusUnauthorized)
			is.Equal(r.Header.Get("WWW-Authenticate"), "Bearer")
			is.Equal(string(r.Raw), "Unauthorized")
		})
	}
	is := is.New(t)
	_, err := servertest.MCPConnect(t, e.HTTP.URL, "")
	is.True(err != nil) // the SDK's client cannot even start without a key
	_, err = servertest.MCPConnect(t, e.HTTP.URL, "sk_live_nope")
	is.True(err != nil)
	is.Equal(e.Balance("acme").Charged, int64(0))

	// With the key, a bare POST answers: one request is a whole exchange.
	r := e.Do("POST", "/mcp", initialize, "Accept", "application/json, text/event-stream")
	is.Equal(r.Status, http.StatusOK)
	is.Equal(r.Str("result.serverInfo.name"), "enrichd")
	// GET (a stream of the server's own messages) is not offered: 405, as the transport allows.
	get := e.Do("GET", "/mcp", nil, "Accept", "text/event-stream")
	is.Equal(get.Status, http.StatusMethodNotAllowed)
	is.Equal(get.Header.Get("Allow"), "POST")
}

func TestMCPEnrichCompanyWaitsForTheResult(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	e.StartWorkers()
	cs := e.MCP(e.Key)

	r := call(t, cs, "enrich_company", map[string]any{"domain": "HTTPS://WWW.Acme.COM/about"}).ok(t)
	is.Equal(r.Str("task.status"), "succeeded") // queued, fetched and settled while the tool waited
	is.Equal(r.Str("task.target"), "acme.com")
	is.Equal(r.Get("task.credits_charged"), 1.0)
	is.Equal(r.Get("task.input"), map[string]any{"domain": "HTTPS://WWW.Acme.COM/about"})
	is.Equal(r.Str("data.name"), "Acme")
	is.Equal(r.Str("data.domain"), "acme.com")
	is.True(!r.Has("error") && !r.Has("next") && !r.Has("replayed"))
	var text map[string]any
	is.NoErr(json.Unmarshal([]byte(r.text), &text))
	is.Equal(text, r.Body) // the text is the same JSON, for clients that read text only
	is.Equal(e.Net.Calls.Load(), int64(1))

	// The same task as the API shows it.
	got := e.Do("GET", "/v1/tasks/"+r.Str("task.id"), nil)
	is.Equal(got.Get("task"), r.Get("task"))
	is.Equal(got.Get("data"), r.Get("data"))

	// From the store by its page URL: settled at once, charged again, no fetch.
	byURL := call(t, cs, "enrich_company", map[string]any{"networkUrl": "https://linkedin.com/company/ACME/about/?x=1", "wait_seconds": 0}).ok(t)
	is.Equal(byURL.Str("task.status"), "succeeded")
	is.Equal(byURL.Str("data.name"), "Acme")
	is.Equal(e.Net.Calls.Load(), int64(1))
	is.Equal(e.Balance("acme").Balance, int64(98))
}

func TestMCPEnrichPersonAndAFailureRefunded(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	servertest.AcmeNetwork(e)
	e.StartWorkers()
	cs := e.MCP(e.Key)

	r := call(t, cs, "enrich_person", map[string]any{"email": "jane.smith@acme.com"}).ok(t)
	is.Equal(r.Str("task.status"), "succeeded")
	is.Equal(r.Get("task.credits_charged"), 3.0)
	is.Equal(r.Str("data.network_url"), "https://www.linkedin.com/in/jane-smith")
	is.Equal(r.Str("data.email_match.method"), "resolved")

	// jsmith fits three people: failed with the hints that would help, and refunded.
	amb := call(t, cs, "enrich_person", map[string]any{"email": "jsmith@acme.com"}).ok(t)
	is.Equal(amb.Str("task.status"), "failed")
	is.Equal(amb.Str("error.code"), "ambiguous")
	is.Equal(amb.Get("error.hintsAccepted"), []any{"fullName", "title", "location"})
	is.True(!amb.Has("data"))
	// The hints break the tie.
	hinted := call(t, cs, "enrich_person", map[string]any{"email": "jsmith@acme.com", "fullName": "John Smith"}).ok(t)
	is.Equal(hinted.Str("data.network_url"), "https://www.linkedin.com/in/john-smith")

	// A personal mailbox is refused without asking anyone: failed at once, refunded.
	gmail := call(t, cs, "enrich_person", map[string]any{"email": "jane@gmail.com"}).ok(t)
	is.Equal(gmail.Str("task.status"), "failed")

	byURL := call(t, cs, "enrich_person", map[string]any{"networkUrl": "https://www.linkedin.com/in/jack-smith"}).ok(t)
	is.Equal(byURL.Get("task.credits_charged"), 1.0)
	is.Equal(byURL.Str("data.full_name"), "Jack Smith")
	is.Equal(e.Balance("acme").Balance, int64(100-3-3-1))
}

func TestMCPTaskNotSettledIsPolledWithGetTask(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	release := e.Net.Hold()
	defer release()
	e.StartWorkers()
	cs := e.MCP(e.Key)

	began := time.Now()
	r := call(t, cs, "enrich_company", map[string]any{"domain": "acme.com", "wait_seconds": 1}).ok(t)
	is.True(time.Since(began) >= time.Second) // it waited as long as asked
	status := r.Str("task.status")
	is.True(status == "queued" || status == "running")
	is.True(!r.Has("data"))
	id := r.Str("task.id")
	is.True(strings.Contains(r.Str("next"), "get_task") && strings.Contains(r.Str("next"), id))
	is.Equal(r.Get("task.credits_charged"), 1.0)

	pending := call(t, cs, "get_task", map[string]any{"task_id": id}).ok(t)
	is.True(pending.Str("task.status") == "queued" || pending.Str("task.status") == "running")
	is.True(pending.Has("next"))

	release()
	e.WaitSettled(id)
	done := call(t, cs, "get_task", map[string]any{"task_id": id}).ok(t)
	is.Equal(done.Str("task.status"), "succeeded")
	is.Equal(done.Str("data.name"), "Acme")
	is.True(!done.Has("next"))
	is.Equal(e.Balance("acme").Charged, int64(1))

	// Another organization's task, an unknown id and a malformed one are not found.
	otherKey, _ := e.NewOrg("other", 10)
	for _, tid := range []string{id, "0195f3a2-6b1c-7cde-8f00-123456789abc", "nope"} {
		api := e.Do("GET", "/v1/tasks/"+tid, nil, "Authorization", "Bearer "+otherKey)
		toolRefused(t, call(t, e.MCP(otherKey), "get_task", map[string]any{"task_id": tid}), api.Status, api.Str("code"), api.Str("error"))
	}
	toolRefused(t, call(t, cs, "get_task", map[string]any{}), 400, "invalid_input", "task_id is required: the id of a task an enrichment returned")
}

// TestMCPWaitOutlastsTheWriteTimeout: a tool's wait is not cut off by the listener's
// write or read timeout, which are shorter than the longest wait.
func TestMCPWaitOutlastsTheWriteTimeout(t *testing.T) {
	// Not in parallel: what it checks is bounded in time, which other tests running
	// at once would stretch.
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	release := e.Net.Hold()
	defer release()
	e.StartWorkers()
	addr := serveLimited(t, e, server.HTTPLimits{WriteTimeout: 500 * time.Millisecond, ReadTimeout: 500 * time.Millisecond})
	cs, err := servertest.MCPConnect(t, "http://"+addr, e.Key)
	is.NoErr(err)
	go func() {
		time.Sleep(1500 * time.Millisecond)
		release()
	}()
	r := call(t, cs, "enrich_company", map[string]any{"domain": "acme.com", "wait_seconds": 10}).ok(t)
	is.Equal(r.Str("task.status"), "succeeded")
	is.Equal(r.Str("data.name"), "Acme")
}

// TestMCPHoldsAConnectionNoLongerThanAWait: the protocol's subscriptions/listen opens
// a stream the SDK keeps until the client leaves. enrichd has nothing to send on it
// (its tools never change), and a connection held without end is one the listener
// cannot give to anyone else: it ends when a tool's longest wait would.
func TestMCPHoldsAConnectionNoLongerThanAWait(t *testing.T) {
	// Not in parallel: it shortens the hold of every server in the process (SetMCPHold).
	is := is.New(t)
	limits := server.HTTPLimits{WriteTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond}
	e := servertest.NewEnv(t, func(c *server.Config) { c.HTTP = limits })
	server.SetMCPHold(t, 200*time.Millisecond)
	addr := serveLimited(t, e, limits)
	const version = "2026-07-28"
	listen := `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"` + version + `","io.modelcontextprotocol/clientCapabilities":{},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"x","version":"1"}}}}`
	req, err := http.NewRequest("POST", "http://"+addr+"/mcp", strings.NewReader(listen))
	is.NoErr(err)
	for k, v := range map[string]string{"Authorization": "Bearer " + e.Key, "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": version, "Mcp-Method": "subscriptions/listen"} {
		req.Header.Set(k, v)
	}
	began := time.Now()
	res, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	is.NoErr(err)
	defer res.Body.Close()
	is.Equal(res.StatusCode, http.StatusOK)
	is.Equal(res.Header.Get("Content-Type"), "text/event-stream") // the stream was opened
	_, err = io.ReadAll(res.Body)
	is.NoErr(err) // ended by the server, not by the client's timeout
	is.True(time.Since(began) < 5*time.Second)
}

// TestMCPWaitEndsWhenTheWorkersStop: a process shutting down settles no more tasks, so
// a tool waiting for one answers at once with the task as it is and how to poll.
func TestMCPWaitEndsWhenTheWorkersStop(t *testing.T) {
	// Not in parallel: what it checks is bounded in time, which other tests running
	// at once would stretch.
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	release := e.Net.Hold()
	defer release()
	e.StartWorkers()
	cs := e.MCP(e.Key)
	answered := make(chan *toolResult, 1)
	began := time.Now()
	go func() {
		answered <- call(t, cs, "enrich_company", map[string]any{"domain": "acme.com", "wait_seconds": 30})
	}()
	for e.Net.Calls.Load() == 0 { // the task is in a worker's hands
		time.Sleep(5 * time.Millisecond)
	}
	e.StopWorkers() // as serve does on SIGTERM, with no grace: the task goes back to the queue
	r := (<-answered).ok(t)
	is.True(time.Since(began) < 10*time.Second)
	is.True(r.Str("task.status") == "running" || r.Str("task.status") == "queued") // on its way back to the queue
	is.True(strings.Contains(r.Str("next"), "get_task"))
	is.Equal(e.Balance("acme").Charged, int64(1)) // charged once; it settles when a worker takes it again

	release()
	e.StartWorkers()
	is.Equal(e.WaitSettled(r.Str("task.id")).Str("task.status"), "succeeded")
	// Workers running again, a tool waits again.
	e.Net.AddCompany(servertest.Company("Other", "other.com"))
	release = e.Net.Hold()
	time.AfterFunc(300*time.Millisecond, release)
	again := call(t, cs, "enrich_company", map[string]any{"domain": "other.com", "wait_seconds": 10}).ok(t)
	is.Equal(again.Str("task.status"), "succeeded")
}

// TestMCPWaitEndsWhenTheClientLeaves: an agent that gives up on a call (its own
// timeout, a cancel) leaves nobody to answer; the tool stops waiting at once rather
// than polling the task for the rest of wait_seconds, and the request ends.
func TestMCPWaitEndsWhenTheClientLeaves(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	release := e.Net.Hold()
	defer release()
	e.StartWorkers()
	cs := e.MCP(e.Key)
	// The requests that are calls: a notification (the client's cancel is one) is 202.
	logged := func() int {
		logs := e.Logs.String()
		return strings.Count(logs, `"route":"mcp"`) - strings.Count(logs, `"route":"mcp","path":"/mcp","status":202`)
	}
	ctx, cancel := context.WithCancel(t.Context())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "enrich_company", Arguments: map[string]any{"domain": "acme.com", "wait_seconds": 30}})
		gaveUp <- err
	}()
	for e.Net.Calls.Load() == 0 { // the task is in a worker's hands, the tool waiting
		time.Sleep(5 * time.Millisecond)
	}
	before := logged()
	cancel()
	is.True(<-gaveUp != nil)
	deadline := time.Now().Add(servertest.SettleWithin)
	for logged() == before {
		if time.Now().After(deadline) {
			t.Fatal("the request of a client that left did not end: its tool is still waiting")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Logged as the API logs a hang-up: the client's doing, not an error of ours.
	if !strings.Contains(e.Logs.String(), `"level":"INFO","msg":"request","method":"POST","route":"mcp","path":"/mcp","status":499`) {
		t.Fatalf("no 499 line:\n%s", e.Logs.String())
	}
	is.True(strings.Contains(e.Logs.String(), `"err":"client closed the request: the client left while the tool waited for its task"`))
	is.True(!strings.Contains(e.Logs.String(), `"level":"ERROR"`))
	// The task carries on, charged once, for get_task to read.
	release()
	task := e.Do("GET", "/v1/tasks", nil).Get("data").([]any)[0].(map[string]any)
	is.Equal(e.WaitSettled(task["id"].(string)).Str("task.status"), "succeeded")
	is.Equal(e.Balance("acme").Charged, int64(1))
}

// TestMCPRefusesWhatTheAPIRefuses: each input the API answers 400 is a tool error with
// the same sentence and code, and costs nothing.
func TestMCPRefusesWhatTheAPIRefuses(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t)
	cs := e.MCP(e.Key)
	for name, c := range map[string]struct {
		tool, path string
		args       string
	}{
		"nothing":             {"enrich_company", "/v1/companies/enrich", `{}`},
		"both":                {"enrich_company", "/v1/companies/enrich", `{"domain":"acme.com","networkUrl":"https://www.linkedin.com/company/acme"}`},
		"a bad domain":        {"enrich_company", "/v1/companies/enrich", `{"domain":"not a domain"}`},
		"a person's page":     {"enrich_company", "/v1/companies/enrich", `{"networkUrl":"https://www.linkedin.com/in/jane"}`},
		"an unknown field":    {"enrich_company", "/v1/companies/enrich", `{"domain":"acme.com","name":"Acme"}`},
		"a number":            {"enrich_company", "/v1/companies/enrich", `{"domain":42}`},
		"a null":              {"enrich_company", "/v1/companies/enrich", `{"domain":null}`},
		"a bad loop_id":       {"enrich_company", "/v1/companies/enrich", `{"domain":"acme.com","loop_id":"nope"}`},
		"no person input":     {"enrich_person", "/v1/people/enrich", `{"fullName":"Jane Doe"}`},
		"email and url":       {"enrich_person", "/v1/people/enrich", `{"email":"jane@acme.com","networkUrl":"https://www.linkedin.com/in/jane"}`},
		"not an email":        {"enrich_person", "/v1/people/enrich", `{"email":"jane"}`},
		"hints with a url":    {"enrich_person", "/v1/people/enrich", `{"networkUrl":"https://www.linkedin.com/in/jane","title":"CTO"}`},
		"a company page":      {"enrich_person", "/v1/people/enrich", `{"networkUrl":"https://www.linkedin.com/company/acme"}`},
		"a long hint":         {"enrich_person", "/v1/people/enrich", `{"email":"jane@acme.com","fullName":"` + strings.Repeat("J", 1000) + `"}`},
		"a list status":       {"list_tasks", "/v1/tasks?status=done", `{"status":"done"}`},
		"a page size of zero": {"list_tasks", "/v1/tasks?pageSize=0", `{"pageSize":0}`},
		"too far a page":      {"list_tasks", "/v1/tasks?page=200&pageSize=100", `{"page":200,"pageSize":100}`},
	} {
		t.Run(name, func(t *testing.T) {
			var api *servertest.Response
			if c.tool == "list_tasks" {
				api = e.Do("GET", c.path, nil)
			} else {
				api = e.Do("POST", c.path, c.args)
			}
			if api.Status != http.StatusBadRequest {
				t.Fatalf("the API answers %d %s: not a refused input", api.Status, api.Raw)
			}
			toolRefused(t, call(t, cs, c.tool, json.RawMessage(c.args)), http.StatusBadRequest, "invalid_input", api.Str("error"))
		})
	}
	// The tools' own arguments are bounded too.
	for name, c := range map[string]struct{ args, message string }{
		"a long wait":     {`{"domain":"acme.com","wait_seconds":61}`, "wait_seconds must be an integer from 0 to 60"},
		"a negative wait": {`{"domain":"acme.com","wait_seconds":-1}`, "wait_seconds must be an integer from 0 to 60"},
		"a fraction":      {`{"domain":"acme.com","wait_seconds":1.5}`, "wait_seconds must be an integer, not a JSON number 1.5"},
		"a long key":      {`{"domain":"acme.com","idempotency_key":"` + strings.Repeat("k", 256) + `"}`, "idempotency_key is longer than 255 characters (256 sent)"},
		"a key as number": {`{"domain":"acme.com","idempotency_key":7}`, "idempotency_key must be a string, not a JSON number"},
	} {
		t.Run(name, func(t *testing.T) {
			toolRefused(t, call(t, cs, "enrich_company", json.RawMessage(c.args)), http.StatusBadRequest, "invalid_input", c.message)
		})
	}
	toolRefused(t, call(t, cs, "get_balance", map[string]any{"org": "other"}), http.StatusBadRequest, "invalid_input", `unknown field "org"`)
	e.NothingCharged()
}

func TestMCPWithoutCredits(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	broke, _ := e.NewOrg("broke", 0)
	cs := e.MCP(broke)
	api := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"}, "Authorization", "Bearer "+broke)
	is.Equal(api.Status, http.StatusPaymentRequired)

	r := call(t, cs, "enrich_company", map[string]any{"domain": "acme.com"})
	toolRefused(t, r, http.StatusPaymentRequired, "insufficient_credits", api.Str("error"))
	is.Equal(r.Get("creditsRemaining"), 0.0)
	apiPerson := e.Do("POST", "/v1/people/enrich", map[string]string{"email": "jane@acme.com"}, "Authorization", "Bearer "+broke)
	r = call(t, cs, "enrich_person", map[string]any{"email": "jane@acme.com"})
	toolRefused(t, r, http.StatusPaymentRequired, "insufficient_credits", apiPerson.Str("error"))
	is.True(strings.Contains(r.text, "costs 3")) // an email lookup's price
	is.Equal(call(t, cs, "list_tasks", nil).ok(t).Get("total"), 0.0)
	is.Equal(call(t, cs, "get_balance", nil).ok(t).Get("balance"), 0.0)
}

func TestMCPIdempotencyKey(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	e.Net.AddCompany(servertest.Company("Other", "other.com"))
	e.StartWorkers()
	cs := e.MCP(e.Key)

	first := call(t, cs, "enrich_company", map[string]any{"domain": "acme.com", "idempotency_key": "agent-1"}).ok(t)
	is.Equal(first.Str("task.idempotency_key"), "agent-1")
	is.True(!first.Has("replayed"))
	// The agent retries, after a timeout say: the first task, not charged again.
	again := call(t, cs, "enrich_company", map[string]any{"domain": "acme.com", "idempotency_key": "agent-1", "wait_seconds": 5}).ok(t)
	is.Equal(again.Str("task.id"), first.Str("task.id"))
	is.Equal(again.Get("replayed"), true)
	is.Equal(again.Str("data.name"), "Acme")
	is.Equal(e.Balance("acme").Charged, int64(1))

	// The key is the API's: the same request over HTTP is the same task.
	api := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"}, "Idempotency-Key", "agent-1")
	is.Equal(api.Status, http.StatusOK)
	is.Equal(api.Header.Get("Idempotent-Replayed"), "true")
	is.Equal(api.Str("task.id"), first.Str("task.id"))
	httpFirst := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "other.com"}, "Idempotency-Key", "http-1")
	viaMCP := call(t, cs, "enrich_company", map[string]any{"domain": "other.com", "idempotency_key": "http-1"}).ok(t)
	is.Equal(viaMCP.Str("task.id"), httpFirst.Str("task.id"))
	is.Equal(viaMCP.Get("replayed"), true)
	is.Equal(e.Balance("acme").Charged, int64(2))

	// Another request under the key is refused as the API refuses it.
	apiOther := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "other.com"}, "Idempotency-Key", "agent-1")
	is.Equal(apiOther.Status, http.StatusUnprocessableEntity)
	toolRefused(t, call(t, cs, "enrich_company", map[string]any{"domain": "other.com", "idempotency_key": "agent-1"}),
		http.StatusUnprocessableEntity, "idempotency_key_reused", apiOther.Str("error"))
	apiPerson := e.Do("POST", "/v1/people/enrich", map[string]string{"email": "jane@acme.com"}, "Idempotency-Key", "agent-1")
	toolRefused(t, call(t, cs, "enrich_person", map[string]any{"email": "jane@acme.com", "idempotency_key": "agent-1"}),
		apiPerson.Status, "idempotency_key_reused", apiPerson.Str("error"))
	is.Equal(e.Balance("acme").Charged, int64(2))

	// A key is the organization's: another one's key of the same name is its own.
	otherKey, _ := e.NewOrg("other", 10)
	theirs := call(t, e.MCP(otherKey), "enrich_company", map[string]any{"domain": "acme.com", "idempotency_key": "agent-1"}).ok(t)
	is.True(theirs.Str("task.id") != first.Str("task.id"))
	is.True(!theirs.Has("replayed"))
	is.Equal(e.Balance("other").Charged, int64(1))

	// A person's key is the API's too, whichever came first. (A personal mailbox settles
	// at once, refused and refunded: no network is needed for the task to exist.)
	person := call(t, cs, "enrich_person", map[string]any{"email": "jane@gmail.com", "idempotency_key": "agent-p"}).ok(t)
	charged := e.Balance("acme").Charged
	apiAgain := e.Do("POST", "/v1/people/enrich", map[string]string{"email": "jane@gmail.com"}, "Idempotency-Key", "agent-p")
	is.Equal(apiAgain.Status, http.StatusOK)
	is.Equal(apiAgain.Header.Get("Idempotent-Replayed"), "true")
	is.Equal(apiAgain.Str("task.id"), person.Str("task.id"))
	is.Equal(e.Balance("acme").Charged, charged)
	httpPerson := e.Do("POST", "/v1/people/enrich", map[string]string{"email": "john@gmail.com"}, "Idempotency-Key", "http-p")
	charged = e.Balance("acme").Charged
	personViaMCP := call(t, cs, "enrich_person", map[string]any{"email": "john@gmail.com", "idempotency_key": "http-p"}).ok(t)
	is.Equal(personViaMCP.Str("task.id"), httpPerson.Str("task.id"))
	is.Equal(personViaMCP.Get("replayed"), true)
	is.Equal(e.Balance("acme").Charged, charged)
}

// TestMCPLoopID: loop_id posts the result to the organization's own Loop, as the API's
// field does, and names no other organization's.
func TestMCPLoopID(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	rcv := servertest.NewReceiver(t)
	loopID, _ := e.CreateLoop("Companies", rcv.Srv.URL+"/hook", "company")
	e.StartWorkers()
	cs := e.MCP(e.Key)

	r := call(t, cs, "enrich_company", map[string]any{"domain": "acme.com", "loop_id": loopID}).ok(t)
	is.Equal(r.Str("task.status"), "succeeded")
	is.Equal(r.Str("task.loop_id"), loopID)
	var sent map[string]any
	is.NoErr(json.Unmarshal(rcv.Wait(t, 1)[0].Body, &sent))
	is.Equal(sent["task"].(map[string]any)["id"], r.Str("task.id"))

	// A person to a company Loop, and another organization naming this one's Loop, are
	// refused as the API refuses them, and charge nothing.
	api := e.Do("POST", "/v1/people/enrich", map[string]string{"email": "jane@acme.com", "loop_id": loopID})
	is.True(api.Status >= 400)
	toolRefused(t, call(t, cs, "enrich_person", map[string]any{"email": "jane@acme.com", "loop_id": loopID}), api.Status, api.Str("code"), api.Str("error"))
	otherKey, _ := e.NewOrg("other", 10)
	api = e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com", "loop_id": loopID}, "Authorization", "Bearer "+otherKey)
	is.True(api.Status >= 400)
	toolRefused(t, call(t, e.MCP(otherKey), "enrich_company", map[string]any{"domain": "acme.com", "loop_id": loopID}), api.Status, api.Str("code"), api.Str("error"))
	is.Equal(e.Balance("other").Charged, int64(0))
	is.Equal(e.Balance("acme").Charged, int64(1))
}

// TestMCPStorageUnavailable: a database that takes no writes is the API's 503 for a
// tool too, with its code and Retry-After, no requestId and no internals; nothing is
// charged, and the reads still answer.
func TestMCPStorageUnavailable(t *testing.T) {
	t.Parallel()
	servertest.SQLiteOnly(t, "storage faults are made on the database file")
	is := is.New(t)
	e := servertest.NewEnv(t)
	cs := e.MCP(e.Key)
	files := []string{e.Path, e.Path + "-wal"} // not -shm: it is mapped in memory
	storetest.Chattr(t, "+i", files...)
	defer storetest.Chattr(t, "-i", files...)

	api := e.Do("POST", "/v1/companies/enrich", map[string]any{"domain": "acme.com"})
	checkStorageUnavailable(t, api)
	r := call(t, cs, "enrich_company", map[string]any{"domain": "acme.com", "idempotency_key": "ro-1"})
	toolRefused(t, r, http.StatusServiceUnavailable, "storage_unavailable", api.Str("error"))
	is.Equal(r.Get("retryAfter"), 5.0)
	is.True(!r.Has("requestId"))
	is.True(!strings.Contains(strings.ToUpper(r.text), "SQLITE"))
	is.Equal(call(t, cs, "list_tasks", nil).ok(t).Get("total"), 0.0)
	is.Equal(call(t, cs, "get_balance", nil).ok(t).Get("balance"), 100.0)
}

func TestMCPListTasksAndBalance(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	e.StartWorkers()
	cs := e.MCP(e.Key)
	for _, d := range []string{"acme.com", "missing.com", "acme.com"} {
		call(t, cs, "enrich_company", map[string]any{"domain": d}).ok(t)
	}

	all := call(t, cs, "list_tasks", nil).ok(t)
	api := e.Do("GET", "/v1/tasks", nil)
	is.Equal(all.Get("total"), 3.0)
	is.Equal(all.Get("data"), api.Get("data")) // the API's list, task for task
	failed := call(t, cs, "list_tasks", map[string]any{"status": "failed"}).ok(t)
	is.Equal(failed.Get("total"), 1.0)
	is.Equal(failed.Get("data").([]any)[0].(map[string]any)["target"], "missing.com")
	page := call(t, cs, "list_tasks", map[string]any{"page": 1, "pageSize": 2}).ok(t)
	is.Equal(len(page.Get("data").([]any)), 1)
	is.Equal(page.Get("data"), e.Do("GET", "/v1/tasks?page=1&pageSize=2", nil).Get("data"))

	b := call(t, cs, "get_balance", nil).ok(t)
	want := e.Balance("acme")
	is.Equal(want.Balance, int64(98)) // the miss was refunded
	is.Equal(b.Get("balance"), float64(want.Balance))
	is.Equal(b.Get("granted"), float64(want.Granted))
	is.Equal(b.Get("charged"), float64(want.Charged))
	is.Equal(b.Get("refunded"), float64(want.Refund))
	is.Equal(b.Get("expired"), 0.0)

	// Each organization sees its own.
	otherKey, _ := e.NewOrg("other", 7)
	theirs := e.MCP(otherKey)
	is.Equal(call(t, theirs, "list_tasks", nil).ok(t).Get("total"), 0.0)
	is.Equal(call(t, theirs, "get_balance", nil).ok(t).Get("balance"), 7.0)
}

// TestMCPChargesAsTheHTTPAPI makes the same calls over HTTP in one enrichd and through
// the tools in another, on the same network: the ledgers and the tasks are the same.
func TestMCPChargesAsTheHTTPAPI(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	calls := []struct {
		tool string
		args map[string]any
	}{
		{"enrich_company", map[string]any{"domain": "acme.com"}},
		{"enrich_company", map[string]any{"domain": "missing.com"}},
		{"enrich_company", map[string]any{"networkUrl": "https://www.linkedin.com/company/acme"}},
		{"enrich_person", map[string]any{"email": "jane.smith@acme.com"}},
		{"enrich_person", map[string]any{"email": "jsmith@acme.com", "title": "Software Engineer"}},
		{"enrich_person", map[string]any{"email": "info@acme.com"}},
		{"enrich_person", map[string]any{"networkUrl": "https://www.linkedin.com/in/john-smith"}},
		{"enrich_person", map[string]any{"networkUrl": "https://www.linkedin.com/in/nobody"}},
	}
	paths := map[string]string{"enrich_company": "/v1/companies/enrich", "enrich_person": "/v1/people/enrich"}
	run := func(viaMCP bool) (ledger []string, tasks []any) {
		e := servertest.NewEnv(t)
		servertest.AcmeNetwork(e)
		e.StartWorkers()
		var cs *mcp.ClientSession
		if viaMCP {
			cs = e.MCP(e.Key)
		}
		for i, c := range calls {
			key := fmt.Sprintf("k%d", i)
			if viaMCP {
				args := map[string]any{"idempotency_key": key}
				for k, v := range c.args {
					args[k] = v
				}
				call(t, cs, c.tool, args).ok(t)
			} else {
				r := e.Do("POST", paths[c.tool], c.args, "Idempotency-Key", key)
				if r.Status != 200 && r.Status != 202 {
					t.Fatalf("%s %v: %d %s", c.tool, c.args, r.Status, r.Raw)
				}
				e.WaitSettled(r.Str("task.id"))
			}
		}
		for _, l := range e.LedgerOf("acme") {
			ledger = append(ledger, fmt.Sprintf("%s %d", l.Kind, l.Amount))
		}
		for _, task := range e.Do("GET", "/v1/tasks?pageSize=100", nil).Get("data").([]any) {
			m := task.(map[string]any)
			tasks = append(tasks, []any{m["object_type"], m["status"], m["target"], m["input"], m["credits_charged"], m["idempotency_key"]})
		}
		return ledger, tasks
	}
	httpLedger, httpTasks := run(false)
	mcpLedger, mcpTasks := run(true)
	is.Equal(mcpLedger, httpLedger)
	is.Equal(mcpTasks, httpTasks)
	// The calls cost something and refunded something: the comparison is not of nothing.
	is.True(slices.Contains(httpLedger, "charge 3") && slices.Contains(httpLedger, "refund 3") && slices.Contains(httpLedger, "refund 1"))
	t.Logf("ledger: %v", httpLedger)
}

func TestMCPSharesTheKeysRateLimit(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, func(c *server.Config) { c.RateKey = server.Rate{Limit: rate.Limit(0.01), Burst: 3} })
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	accept := "application/json, text/event-stream"
	is.Equal(e.Do("GET", "/v1/tasks", nil).Status, http.StatusOK)
	is.Equal(e.Do("POST", "/mcp", list, "Accept", accept).Status, http.StatusOK)
	is.Equal(e.Do("POST", "/mcp", list, "Accept", accept).Status, http.StatusOK)
	limited := e.Do("POST", "/mcp", list, "Accept", accept)
	is.Equal(limited.Status, http.StatusTooManyRequests)
	is.Equal(limited.Str("code"), "rate_limited")
	is.True(limited.Header.Get("Retry-After") != "")
	is.Equal(e.Do("GET", "/v1/tasks", nil).Status, http.StatusTooManyRequests) // one bucket for both

	// The SDK's client sees the refusal as an error, and nothing is charged.
	_, err := servertest.MCPConnect(t, e.HTTP.URL, e.Key)
	is.True(err != nil)
	is.Equal(e.Balance("acme").Charged, int64(0))
}

// TestMCPRefusesABatch: a JSON-RPC batch would run many tool calls on one request of
// the key's rate limit (the protocol before 2025-06-18 allowed them, and a request
// without its version header is read as that protocol). One message a request.
func TestMCPRefusesABatch(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	enrich := func(id int, domain string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"enrich_company","arguments":{"domain":%q,"wait_seconds":0}}}`, id, domain)
	}
	batch := "[" + enrich(1, "a.com") + "," + enrich(2, "b.com") + "," + enrich(3, "c.com") + "]"
	for name, headers := range map[string][]string{
		"no protocol version": nil,
		"2025-03-26":          {"Mcp-Protocol-Version", "2025-03-26"},
		"white space first":   nil,
	} {
		t.Run(name, func(t *testing.T) {
			body := batch
			if name == "white space first" {
				body = " \r\n\t" + batch
			}
			r := e.Do("POST", "/mcp", body, append([]string{"Accept", "application/json, text/event-stream"}, headers...)...)
			rpcRefused(t, r, http.StatusBadRequest, nil, -32600, "a JSON-RPC batch is not accepted: send one message a request")
		})
	}
	e.NothingCharged()

	// One message, white space before it or not, is answered.
	r := e.Do("POST", "/mcp", "\n  "+enrich(4, "d.com"), "Accept", "application/json, text/event-stream")
	is.Equal(r.Status, http.StatusOK)
	is.Equal(r.Get("id"), 4.0)
	is.Equal(e.Balance("acme").Charged, int64(1))
}

// TestMCPTransportRefusals: what the transport refuses before any tool runs is a
// JSON-RPC error response, JSON as every error of the API but 401, with the id of the
// message when it has one; answered as the OpenAPI document says (e.Do checks each
// answer against it), and it costs nothing.
func TestMCPTransportRefusals(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t)
	accept := "application/json, text/event-stream"
	call := func(domain string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"enrich_company","arguments":{"domain":"` + domain + `"}}}`
	}
	version := []string{"Accept", accept, "Mcp-Protocol-Version", "2025-06-18"}
	for _, c := range []struct {
		name    string
		body    string
		headers []string
		status  int
		id      any
		code    float64
		message string
	}{
		{"a body too large", call(strings.Repeat("a", 64<<10) + ".com"), version, http.StatusRequestEntityTooLarge, nil, -32600, "request body exceeds 65536 bytes"},
		{"another Content-Type", call("acme.com"), append(version, "Content-Type", "text/plain"), http.StatusUnsupportedMediaType, nil, -32600, "Content-Type must be 'application/json'"},
		{"no event stream accepted", call("acme.com"), []string{"Accept", "application/json"}, http.StatusBadRequest, nil, -32600, "Accept must contain both 'application/json' and 'text/event-stream'"},
		{"a malformed message", `{"jsonrpc":`, version, http.StatusBadRequest, nil, -32700, "malformed payload: unmarshaling jsonrpc message: unexpected EOF"},
		{"not JSON-RPC", `{"id":3}`, version, http.StatusBadRequest, 3.0, -32600, ""},
		{"not an object", `[]`, version, http.StatusBadRequest, nil, -32600, ""},
		{"an id of no type an id has", `{"jsonrpc":"2.0","id":{"a":1},"method":"no/such"}`, version, http.StatusBadRequest, nil, -32600, ""},
		{"an unknown method", `{"jsonrpc":"2.0","id":7,"method":"no/such"}`, version, http.StatusBadRequest, 7.0, -32601, `JSON RPC not handled: "no/such" unsupported`},
		{"a string id", `{"jsonrpc":"2.0","id":"abc","method":"no/such"}`, version, http.StatusBadRequest, "abc", -32601, `JSON RPC not handled: "no/such" unsupported`},
		{"a call without params", `{"jsonrpc":"2.0","id":8,"method":"tools/call"}`, version, http.StatusBadRequest, 8.0, -32600, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			rpcRefused(t, e.Do("POST", "/mcp", c.body, c.headers...), c.status, c.id, c.code, c.message)
		})
	}
	// An id is answered as it was sent, a number past float64's precision too.
	r := e.Do("POST", "/mcp", `{"jsonrpc":"2.0","id":12345678901234567891,"method":"no/such"}`, version...)
	is.New(t).True(strings.Contains(string(r.Raw), `"id":12345678901234567891,`))
	e.NothingCharged()
}

// rpcRefused checks a JSON-RPC error response: its status, and its id, code and
// message (any message when message is "").
func rpcRefused(t *testing.T, r *servertest.Response, status int, id any, code float64, message string) {
	t.Helper()
	is := is.NewRelaxed(t)
	is.Equal(r.Status, status)
	is.Equal(r.Header.Get("Content-Type"), "application/json")
	is.Equal(r.Get("jsonrpc"), "2.0")
	is.True(r.Has("id"))
	is.Equal(r.Get("id"), id)
	is.Equal(r.Get("error.code"), code)
	if message != "" {
		is.Equal(r.Str("error.message"), message)
	}
	is.True(r.Str("error.message") != "")
	if t.Failed() {
		t.Logf("got %d %s", r.Status, r.Raw)
	}
}

// TestMCPToolCallNeedsNoSession: a tool call is one POST, answered by whichever
// replica gets it; no session id is given or needed.
func TestMCPToolCallNeedsNoSession(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	e.StartWorkers()
	r := e.Do("POST", "/mcp", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"enrich_company","arguments":{"domain":"acme.com"}}}`,
		"Accept", "application/json, text/event-stream")
	is.Equal(r.Status, http.StatusOK)
	is.Equal(r.Header.Get("Mcp-Session-Id"), "")
	is.Equal(r.Get("id"), 7.0)
	is.Equal(r.Get("result.isError"), nil)
	sc, _ := r.Get("result.structuredContent").(map[string]any)
	is.Equal(sc["data"].(map[string]any)["name"], "Acme")
	is.Equal(e.Balance("acme").Charged, int64(1))

	// One log line for the request, as for any other; the SDK's INFO lines of the
	// session each request opens and closes are left out.
	logs := e.Logs.String()
	is.Equal(strings.Count(logs, `"route":"mcp"`), 1)
	is.True(strings.Contains(logs, `"route":"mcp","path":"/mcp","status":200`))
	is.True(!strings.Contains(logs, "session"))
}

// serveMCP sends one JSON-RPC message to /mcp straight to the handler.
func serveMCP(srv *server.Server, key, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", "/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, req)
	return w
}

// BenchmarkMCPEnrichStoreHit is BenchmarkEnqueueStoreHit through the enrich_company
// tool: the same task, plus the protocol, a session a request, and reading the result.
func BenchmarkMCPEnrichStoreHit(b *testing.B) {
	srv, key := benchServer(b)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"enrich_company","arguments":{"domain":"acme.com"}}}`
	for b.Loop() {
		if w := serveMCP(srv, key, body); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"succeeded"`) {
			b.Fatal(w.Code, w.Body.String())
		}
	}
}

// BenchmarkMCPGetTask is BenchmarkGetTask through the get_task tool.
func BenchmarkMCPGetTask(b *testing.B) {
	srv, key := benchServer(b)
	id := taskIDOf(b, serve(srv, "POST", "/v1/companies/enrich", key, `{"domain":"acme.com"}`))
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_task","arguments":{"task_id":"` + id + `"}}}`
	for b.Loop() {
		if w := serveMCP(srv, key, body); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"Acme"`) {
			b.Fatal(w.Code, w.Body.String())
		}
	}
}
