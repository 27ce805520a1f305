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
	"enrichd/store"
	"enrichd/store/storetest"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/matryer/is"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"
)

// The MCP endpoint, driven by the official SDK's own client over its Streamable HTTP
// transport, against the real handler on a loopback listener.

// withKey sets the API key on every request of an MCP client, as an agent's
// configuration of headers does.
type withKey struct {
	key  string
	base http.RoundTripper
}

func (k withKey) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if k.key != "" {
		r.Header.Set("Authorization", "Bearer "+k.key)
	}
	return k.base.RoundTrip(r)
}

// mcpConnect connects the SDK's client to url with key ("" sends none).
func mcpConnect(t testing.TB, url, key string) (*mcp.ClientSession, error) {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "enrichd-test", Version: "1"}, nil)
	transport := &mcp.StreamableClientTransport{Endpoint: url + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: withKey{key: key, base: http.DefaultTransport}}}
	cs, err := client.Connect(t.Context(), transport, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

func (e *env) mcp(key string) *mcp.ClientSession {
	e.t.Helper()
	cs, err := mcpConnect(e.t, e.http.URL, key)
	if err != nil {
		e.t.Fatalf("connecting to /mcp: %v", err)
	}
	return cs
}

// toolResult is a tool call's answer: its structured content read as the API's bodies
// are, and its text.
type toolResult struct {
	*response
	isError bool
	text    string
}

func call(t testing.TB, cs *mcp.ClientSession, tool string, args any) *toolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	out := &toolResult{isError: res.IsError, response: &response{}}
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out.text += tc.Text
		}
	}
	if out.raw, err = json.Marshal(res.StructuredContent); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out.raw, &out.body); err != nil {
		t.Fatalf("%s: the structured content is not an object: %s", tool, out.raw)
	}
	// The TypeScript SDK's client, which most agents run, checks the structured content
	// against the tool's output schema, a tool error's too, and throws where it does not
	// fit: the agent would read a protocol error instead of the answer.
	if err := outputSchemaOf(t, cs, tool).Validate(out.body); err != nil {
		t.Fatalf("%s: the structured content does not fit the tool's output schema: %v: %s", tool, err, out.raw)
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
	is.Equal(r.get("status"), float64(status))
	is.Equal(r.str("code"), code)
	is.Equal(r.str("error"), message)
	is.Equal(r.text, message+" ("+code+")") // what an agent reads names the code too
	if t.Failed() {
		t.Logf("got %s %s", r.text, r.raw)
	}
}

func TestMCPListsItsTools(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	cs := e.mcp(e.key)
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
	e := newEnv(t)
	revoked, _ := e.newOrg("other", 10)
	if err := e.db.RevokeKey(t.Context(), store.BySystem, "other", e.keyByPrefix("other", revoked).ID); err != nil {
		t.Fatal(err)
	}
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	for name, auth := range map[string]string{
		"no key":          "",
		"another scheme":  "Basic " + e.key,
		"an unknown key":  "Bearer sk_live_nope",
		"a key's prefix":  "Bearer " + e.key[:12],
		"an empty bearer": "Bearer ",
		"a revoked key":   "Bearer " + revoked,
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			r := e.do("POST", "/mcp", initialize, "Authorization", auth, "Accept", "application/json, text/event-stream")
			is.Equal(r.status, http.StatusUnauthorized)
			is.Equal(r.header.Get("WWW-Authenticate"), "Bearer")
			is.Equal(string(r.raw), "Unauthorized")
		})
	}
	is := is.New(t)
	_, err := mcpConnect(t, e.http.URL, "")
	is.True(err != nil) // the SDK's client cannot even start without a key
	_, err = mcpConnect(t, e.http.URL, "sk_live_nope")
	is.True(err != nil)
	is.Equal(e.balance("acme").Charged, int64(0))

	// With the key, a bare POST answers: one request is a whole exchange.
	r := e.do("POST", "/mcp", initialize, "Accept", "application/json, text/event-stream")
	is.Equal(r.status, http.StatusOK)
	is.Equal(r.str("result.serverInfo.name"), "enrichd")
	// GET (a stream of the server's own messages) is not offered: 405, as the transport allows.
	get := e.do("GET", "/mcp", nil, "Accept", "text/event-stream")
	is.Equal(get.status, http.StatusMethodNotAllowed)
	is.Equal(get.header.Get("Allow"), "POST")
}

func TestMCPEnrichCompanyWaitsForTheResult(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.net.addCompany(company("Acme", "acme.com"))
	e.startWorkers()
	cs := e.mcp(e.key)

	r := call(t, cs, "enrich_company", map[string]any{"domain": "HTTPS://WWW.Acme.COM/about"}).ok(t)
	is.Equal(r.str("task.status"), "succeeded") // queued, fetched and settled while the tool waited
	is.Equal(r.str("task.target"), "acme.com")
	is.Equal(r.get("task.credits_charged"), 1.0)
	is.Equal(r.get("task.input"), map[string]any{"domain": "HTTPS://WWW.Acme.COM/about"})
	is.Equal(r.str("data.name"), "Acme")
	is.Equal(r.str("data.domain"), "acme.com")
	is.True(!r.has("error") && !r.has("next") && !r.has("replayed"))
	var text map[string]any
	is.NoErr(json.Unmarshal([]byte(r.text), &text))
	is.Equal(text, r.body) // the text is the same JSON, for clients that read text only
	is.Equal(e.net.calls.Load(), int64(1))

	// The same task as the API shows it.
	got := e.do("GET", "/v1/tasks/"+r.str("task.id"), nil)
	is.Equal(got.get("task"), r.get("task"))
	is.Equal(got.get("data"), r.get("data"))

	// From the store by its page URL: settled at once, charged again, no fetch.
	byURL := call(t, cs, "enrich_company", map[string]any{"networkUrl": "https://linkedin.com/company/ACME/about/?x=1", "wait_seconds": 0}).ok(t)
	is.Equal(byURL.str("task.status"), "succeeded")
	is.Equal(byURL.str("data.name"), "Acme")
	is.Equal(e.net.calls.Load(), int64(1))
	is.Equal(e.balance("acme").Balance, int64(98))
}

func TestMCPEnrichPersonAndAFailureRefunded(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	acmeNetwork(e)
	e.startWorkers()
	cs := e.mcp(e.key)

	r := call(t, cs, "enrich_person", map[string]any{"email": "jane.smith@acme.com"}).ok(t)
	is.Equal(r.str("task.status"), "succeeded")
	is.Equal(r.get("task.credits_charged"), 3.0)
	is.Equal(r.str("data.network_url"), "https://www.linkedin.com/in/jane-smith")
	is.Equal(r.str("data.email_match.method"), "resolved")

	// jsmith fits three people: failed with the hints that would help, and refunded.
	amb := call(t, cs, "enrich_person", map[string]any{"email": "jsmith@acme.com"}).ok(t)
	is.Equal(amb.str("task.status"), "failed")
	is.Equal(amb.str("error.code"), "ambiguous")
	is.Equal(amb.get("error.hintsAccepted"), []any{"fullName", "title", "location"})
	is.True(!amb.has("data"))
	// The hints break the tie.
	hinted := call(t, cs, "enrich_person", map[string]any{"email": "jsmith@acme.com", "fullName": "John Smith"}).ok(t)
	is.Equal(hinted.str("data.network_url"), "https://www.linkedin.com/in/john-smith")

	// A personal mailbox is refused without asking anyone: failed at once, refunded.
	gmail := call(t, cs, "enrich_person", map[string]any{"email": "jane@gmail.com"}).ok(t)
	is.Equal(gmail.str("task.status"), "failed")

	byURL := call(t, cs, "enrich_person", map[string]any{"networkUrl": "https://www.linkedin.com/in/jack-smith"}).ok(t)
	is.Equal(byURL.get("task.credits_charged"), 1.0)
	is.Equal(byURL.str("data.full_name"), "Jack Smith")
	is.Equal(e.balance("acme").Balance, int64(100-3-3-1))
}

func TestMCPTaskNotSettledIsPolledWithGetTask(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.net.addCompany(company("Acme", "acme.com"))
	release := e.net.hold()
	defer release()
	e.startWorkers()
	cs := e.mcp(e.key)

	began := time.Now()
	r := call(t, cs, "enrich_company", map[string]any{"domain": "acme.com", "wait_seconds": 1}).ok(t)
	is.True(time.Since(began) >= time.Second) // it waited as long as asked
	status := r.str("task.status")
	is.True(status == "queued" || status == "running")
	is.True(!r.has("data"))
	id := r.str("task.id")
	is.True(strings.Contains(r.str("next"), "get_task") && strings.Contains(r.str("next"), id))
	is.Equal(r.get("task.credits_charged"), 1.0)

	pending := call(t, cs, "get_task", map[string]any{"task_id": id}).ok(t)
	is.True(pending.str("task.status") == "queued" || pending.str("task.status") == "running")
	is.True(pending.has("next"))

	release()
	e.waitSettled(id)
	done := call(t, cs, "get_task", map[string]any{"task_id": id}).ok(t)
	is.Equal(done.str("task.status"), "succeeded")
	is.Equal(done.str("data.name"), "Acme")
	is.True(!done.has("next"))
	is.Equal(e.balance("acme").Charged, int64(1))

	// Another organization's task, an unknown id and a malformed one are not found.
	otherKey, _ := e.newOrg("other", 10)
	for _, tid := range []string{id, "0195f3a2-6b1c-7cde-8f00-123456789abc", "nope"} {
		api := e.do("GET", "/v1/tasks/"+tid, nil, "Authorization", "Bearer "+otherKey)
		toolRefused(t, call(t, e.mcp(otherKey), "get_task", map[string]any{"task_id": tid}), api.status, api.str("code"), api.str("error"))
	}
	toolRefused(t, call(t, cs, "get_task", map[string]any{}), 400, "invalid_input", "task_id is required: the id of a task an enrichment returned")
}

// TestMCPWaitOutlastsTheWriteTimeout: a tool's wait is not cut off by the listener's
// write or read timeout, which are shorter than the longest wait.
func TestMCPWaitOutlastsTheWriteTimeout(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.net.addCompany(company("Acme", "acme.com"))
	release := e.net.hold()
	defer release()
	e.startWorkers()
	addr := serveLimited(t, e, server.HTTPLimits{WriteTimeout: 500 * time.Millisecond, ReadTimeout: 500 * time.Millisecond})
	cs, err := mcpConnect(t, "http://"+addr, e.key)
	is.NoErr(err)
	go func() {
		time.Sleep(1500 * time.Millisecond)
		release()
	}()
	r := call(t, cs, "enrich_company", map[string]any{"domain": "acme.com", "wait_seconds": 10}).ok(t)
	is.Equal(r.str("task.status"), "succeeded")
	is.Equal(r.str("data.name"), "Acme")
}

// TestMCPHoldsAConnectionNoLongerThanAWait: the protocol's subscriptions/listen opens
// a stream the SDK keeps until the client leaves. enrichd has nothing to send on it
// (its tools never change), and a connection held without end is one the listener
// cannot give to anyone else: it ends when a tool's longest wait would.
func TestMCPHoldsAConnectionNoLongerThanAWait(t *testing.T) {
	is := is.New(t)
	limits := server.HTTPLimits{WriteTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond}
	e := newEnv(t, func(c *server.Config) { c.HTTP = limits })
	server.SetMCPHold(t, 200*time.Millisecond)
	addr := serveLimited(t, e, limits)
	const version = "2026-07-28"
	listen := `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"` + version + `","io.modelcontextprotocol/clientCapabilities":{},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"x","version":"1"}}}}`
	req, err := http.NewRequest("POST", "http://"+addr+"/mcp", strings.NewReader(listen))
	is.NoErr(err)
	for k, v := range map[string]string{"Authorization": "Bearer " + e.key, "Content-Type": "application/json",
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
	is := is.New(t)
	e := newEnv(t)
	e.net.addCompany(company("Acme", "acme.com"))
	release := e.net.hold()
	defer release()
	e.startWorkers()
	cs := e.mcp(e.key)
	answered := make(chan *toolResult, 1)
	began := time.Now()
	go func() {
		answered <- call(t, cs, "enrich_company", map[string]any{"domain": "acme.com", "wait_seconds": 30})
	}()
	for e.net.calls.Load() == 0 { // the task is in a worker's hands
		time.Sleep(5 * time.Millisecond)
	}
	e.stopWorkers() // as serve does on SIGTERM, with no grace: the task goes back to the queue
	r := (<-answered).ok(t)
	is.True(time.Since(began) < 10*time.Second)
	is.True(r.str("task.status") == "running" || r.str("task.status") == "queued") // on its way back to the queue
	is.True(strings.Contains(r.str("next"), "get_task"))
	is.Equal(e.balance("acme").Charged, int64(1)) // charged once; it settles when a worker takes it again

	release()
	e.startWorkers()
	is.Equal(e.waitSettled(r.str("task.id")).str("task.status"), "succeeded")
	// Workers running again, a tool waits again.
	e.net.addCompany(company("Other", "other.com"))
	release = e.net.hold()
	time.AfterFunc(300*time.Millisecond, release)
	again := call(t, cs, "enrich_company", map[string]any{"domain": "other.com", "wait_seconds": 10}).ok(t)
	is.Equal(again.str("task.status"), "succeeded")
}

// TestMCPWaitEndsWhenTheClientLeaves: an agent that gives up on a call (its own
// timeout, a cancel) leaves nobody to answer; the tool stops waiting at once rather
// than polling the task for the rest of wait_seconds, and the request ends.
func TestMCPWaitEndsWhenTheClientLeaves(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.net.addCompany(company("Acme", "acme.com"))
	release := e.net.hold()
	defer release()
	e.startWorkers()
	cs := e.mcp(e.key)
	// The requests that are calls: a notification (the client's cancel is one) is 202.
	logged := func() int {
		logs := e.logs.String()
		return strings.Count(logs, `"route":"mcp"`) - strings.Count(logs, `"route":"mcp","path":"/mcp","status":202`)
	}
	ctx, cancel := context.WithCancel(t.Context())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "enrich_company", Arguments: map[string]any{"domain": "acme.com", "wait_seconds": 30}})
		gaveUp <- err
	}()
	for e.net.calls.Load() == 0 { // the task is in a worker's hands, the tool waiting
		time.Sleep(5 * time.Millisecond)
	}
	before := logged()
	cancel()
	is.True(<-gaveUp != nil)
	deadline := time.Now().Add(5 * time.Second)
	for logged() == before {
		if time.Now().After(deadline) {
			t.Fatal("the request of a client that left did not end: its tool is still waiting")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Logged as the API logs a hang-up: the client's doing, not an error of ours.
	if !strings.Contains(e.logs.String(), `"level":"INFO","msg":"request","method":"POST","route":"mcp","path":"/mcp","status":499`) {
		t.Fatalf("no 499 line:\n%s", e.logs.String())
	}
	is.True(strings.Contains(e.logs.String(), `"err":"client closed the request: the client left while the tool waited for its task"`))
	is.True(!strings.Contains(e.logs.String(), `"level":"ERROR"`))
	// The task carries on, charged once, for get_task to read.
	release()
	task := e.do("GET", "/v1/tasks", nil).get("data").([]any)[0].(map[string]any)
	is.Equal(e.waitSettled(task["id"].(string)).str("task.status"), "succeeded")
	is.Equal(e.balance("acme").Charged, int64(1))
}

// TestMCPRefusesWhatTheAPIRefuses: each input the API answers 400 is a tool error with
// the same sentence and code, and costs nothing.
func TestMCPRefusesWhatTheAPIRefuses(t *testing.T) {
	e := newEnv(t)
	cs := e.mcp(e.key)
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
			var api *response
			if c.tool == "list_tasks" {
				api = e.do("GET", c.path, nil)
			} else {
				api = e.do("POST", c.path, c.args)
			}
			if api.status != http.StatusBadRequest {
				t.Fatalf("the API answers %d %s: not a refused input", api.status, api.raw)
			}
			toolRefused(t, call(t, cs, c.tool, json.RawMessage(c.args)), http.StatusBadRequest, "invalid_input", api.str("error"))
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
	e.nothingCharged()
}

func TestMCPWithoutCredits(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	broke, _ := e.newOrg("broke", 0)
	cs := e.mcp(broke)
	api := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"}, "Authorization", "Bearer "+broke)
	is.Equal(api.status, http.StatusPaymentRequired)

	r := call(t, cs, "enrich_company", map[string]any{"domain": "acme.com"})
	toolRefused(t, r, http.StatusPaymentRequired, "insufficient_credits", api.str("error"))
	is.Equal(r.get("creditsRemaining"), 0.0)
	apiPerson := e.do("POST", "/v1/people/enrich", map[string]string{"email": "jane@acme.com"}, "Authorization", "Bearer "+broke)
	r = call(t, cs, "enrich_person", map[string]any{"email": "jane@acme.com"})
	toolRefused(t, r, http.StatusPaymentRequired, "insufficient_credits", apiPerson.str("error"))
	is.True(strings.Contains(r.text, "costs 3")) // an email lookup's price
	is.Equal(call(t, cs, "list_tasks", nil).ok(t).get("total"), 0.0)
	is.Equal(call(t, cs, "get_balance", nil).ok(t).get("balance"), 0.0)
}

func TestMCPIdempotencyKey(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.net.addCompany(company("Acme", "acme.com"))
	e.net.addCompany(company("Other", "other.com"))
	e.startWorkers()
	cs := e.mcp(e.key)

	first := call(t, cs, "enrich_company", map[string]any{"domain": "acme.com", "idempotency_key": "agent-1"}).ok(t)
	is.Equal(first.str("task.idempotency_key"), "agent-1")
	is.True(!first.has("replayed"))
	// The agent retries, after a timeout say: the first task, not charged again.
	again := call(t, cs, "enrich_company", map[string]any{"domain": "acme.com", "idempotency_key": "agent-1", "wait_seconds": 5}).ok(t)
	is.Equal(again.str("task.id"), first.str("task.id"))
	is.Equal(again.get("replayed"), true)
	is.Equal(again.str("data.name"), "Acme")
	is.Equal(e.balance("acme").Charged, int64(1))

	// The key is the API's: the same request over HTTP is the same task.
	api := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"}, "Idempotency-Key", "agent-1")
	is.Equal(api.status, http.StatusOK)
	is.Equal(api.header.Get("Idempotent-Replayed"), "true")
	is.Equal(api.str("task.id"), first.str("task.id"))
	httpFirst := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "other.com"}, "Idempotency-Key", "http-1")
	viaMCP := call(t, cs, "enrich_company", map[string]any{"domain": "other.com", "idempotency_key": "http-1"}).ok(t)
	is.Equal(viaMCP.str("task.id"), httpFirst.str("task.id"))
	is.Equal(viaMCP.get("replayed"), true)
	is.Equal(e.balance("acme").Charged, int64(2))

	// Another request under the key is refused as the API refuses it.
	apiOther := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "other.com"}, "Idempotency-Key", "agent-1")
	is.Equal(apiOther.status, http.StatusUnprocessableEntity)
	toolRefused(t, call(t, cs, "enrich_company", map[string]any{"domain": "other.com", "idempotency_key": "agent-1"}),
		http.StatusUnprocessableEntity, "idempotency_key_reused", apiOther.str("error"))
	apiPerson := e.do("POST", "/v1/people/enrich", map[string]string{"email": "jane@acme.com"}, "Idempotency-Key", "agent-1")
	toolRefused(t, call(t, cs, "enrich_person", map[string]any{"email": "jane@acme.com", "idempotency_key": "agent-1"}),
		apiPerson.status, "idempotency_key_reused", apiPerson.str("error"))
	is.Equal(e.balance("acme").Charged, int64(2))

	// A key is the organization's: another one's key of the same name is its own.
	otherKey, _ := e.newOrg("other", 10)
	theirs := call(t, e.mcp(otherKey), "enrich_company", map[string]any{"domain": "acme.com", "idempotency_key": "agent-1"}).ok(t)
	is.True(theirs.str("task.id") != first.str("task.id"))
	is.True(!theirs.has("replayed"))
	is.Equal(e.balance("other").Charged, int64(1))

	// A person's key is the API's too, whichever came first. (A personal mailbox settles
	// at once, refused and refunded: no network is needed for the task to exist.)
	person := call(t, cs, "enrich_person", map[string]any{"email": "jane@gmail.com", "idempotency_key": "agent-p"}).ok(t)
	charged := e.balance("acme").Charged
	apiAgain := e.do("POST", "/v1/people/enrich", map[string]string{"email": "jane@gmail.com"}, "Idempotency-Key", "agent-p")
	is.Equal(apiAgain.status, http.StatusOK)
	is.Equal(apiAgain.header.Get("Idempotent-Replayed"), "true")
	is.Equal(apiAgain.str("task.id"), person.str("task.id"))
	is.Equal(e.balance("acme").Charged, charged)
	httpPerson := e.do("POST", "/v1/people/enrich", map[string]string{"email": "john@gmail.com"}, "Idempotency-Key", "http-p")
	charged = e.balance("acme").Charged
	personViaMCP := call(t, cs, "enrich_person", map[string]any{"email": "john@gmail.com", "idempotency_key": "http-p"}).ok(t)
	is.Equal(personViaMCP.str("task.id"), httpPerson.str("task.id"))
	is.Equal(personViaMCP.get("replayed"), true)
	is.Equal(e.balance("acme").Charged, charged)
}

// TestMCPLoopID: loop_id posts the result to the organization's own Loop, as the API's
// field does, and names no other organization's.
func TestMCPLoopID(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	e.net.addCompany(company("Acme", "acme.com"))
	rcv := newReceiver(t)
	loopID, _ := e.createLoop("Companies", rcv.srv.URL+"/hook", "company")
	e.startWorkers()
	cs := e.mcp(e.key)

	r := call(t, cs, "enrich_company", map[string]any{"domain": "acme.com", "loop_id": loopID}).ok(t)
	is.Equal(r.str("task.status"), "succeeded")
	is.Equal(r.str("task.loop_id"), loopID)
	var sent map[string]any
	is.NoErr(json.Unmarshal(rcv.wait(t, 1)[0].body, &sent))
	is.Equal(sent["task"].(map[string]any)["id"], r.str("task.id"))

	// A person to a company Loop, and another organization naming this one's Loop, are
	// refused as the API refuses them, and charge nothing.
	api := e.do("POST", "/v1/people/enrich", map[string]string{"email": "jane@acme.com", "loop_id": loopID})
	is.True(api.status >= 400)
	toolRefused(t, call(t, cs, "enrich_person", map[string]any{"email": "jane@acme.com", "loop_id": loopID}), api.status, api.str("code"), api.str("error"))
	otherKey, _ := e.newOrg("other", 10)
	api = e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com", "loop_id": loopID}, "Authorization", "Bearer "+otherKey)
	is.True(api.status >= 400)
	toolRefused(t, call(t, e.mcp(otherKey), "enrich_company", map[string]any{"domain": "acme.com", "loop_id": loopID}), api.status, api.str("code"), api.str("error"))
	is.Equal(e.balance("other").Charged, int64(0))
	is.Equal(e.balance("acme").Charged, int64(1))
}

// TestMCPStorageUnavailable: a database that takes no writes is the API's 503 for a
// tool too, with its code and Retry-After, no requestId and no internals; nothing is
// charged, and the reads still answer.
func TestMCPStorageUnavailable(t *testing.T) {
	sqliteOnly(t, "storage faults are made on the database file")
	is := is.New(t)
	e := newEnv(t)
	cs := e.mcp(e.key)
	files := []string{e.path, e.path + "-wal"} // not -shm: it is mapped in memory
	storetest.Chattr(t, "+i", files...)
	defer storetest.Chattr(t, "-i", files...)

	api := e.do("POST", "/v1/companies/enrich", map[string]any{"domain": "acme.com"})
	checkStorageUnavailable(t, api)
	r := call(t, cs, "enrich_company", map[string]any{"domain": "acme.com", "idempotency_key": "ro-1"})
	toolRefused(t, r, http.StatusServiceUnavailable, "storage_unavailable", api.str("error"))
	is.Equal(r.get("retryAfter"), 5.0)
	is.True(!r.has("requestId"))
	is.True(!strings.Contains(strings.ToUpper(r.text), "SQLITE"))
	is.Equal(call(t, cs, "list_tasks", nil).ok(t).get("total"), 0.0)
	is.Equal(call(t, cs, "get_balance", nil).ok(t).get("balance"), 100.0)
}

func TestMCPListTasksAndBalance(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.net.addCompany(company("Acme", "acme.com"))
	e.startWorkers()
	cs := e.mcp(e.key)
	for _, d := range []string{"acme.com", "missing.com", "acme.com"} {
		call(t, cs, "enrich_company", map[string]any{"domain": d}).ok(t)
	}

	all := call(t, cs, "list_tasks", nil).ok(t)
	api := e.do("GET", "/v1/tasks", nil)
	is.Equal(all.get("total"), 3.0)
	is.Equal(all.get("data"), api.get("data")) // the API's list, task for task
	failed := call(t, cs, "list_tasks", map[string]any{"status": "failed"}).ok(t)
	is.Equal(failed.get("total"), 1.0)
	is.Equal(failed.get("data").([]any)[0].(map[string]any)["target"], "missing.com")
	page := call(t, cs, "list_tasks", map[string]any{"page": 1, "pageSize": 2}).ok(t)
	is.Equal(len(page.get("data").([]any)), 1)
	is.Equal(page.get("data"), e.do("GET", "/v1/tasks?page=1&pageSize=2", nil).get("data"))

	b := call(t, cs, "get_balance", nil).ok(t)
	want := e.balance("acme")
	is.Equal(want.Balance, int64(98)) // the miss was refunded
	is.Equal(b.get("balance"), float64(want.Balance))
	is.Equal(b.get("granted"), float64(want.Granted))
	is.Equal(b.get("charged"), float64(want.Charged))
	is.Equal(b.get("refunded"), float64(want.Refund))
	is.Equal(b.get("expired"), 0.0)

	// Each organization sees its own.
	otherKey, _ := e.newOrg("other", 7)
	theirs := e.mcp(otherKey)
	is.Equal(call(t, theirs, "list_tasks", nil).ok(t).get("total"), 0.0)
	is.Equal(call(t, theirs, "get_balance", nil).ok(t).get("balance"), 7.0)
}

// TestMCPChargesAsTheHTTPAPI makes the same calls over HTTP in one enrichd and through
// the tools in another, on the same network: the ledgers and the tasks are the same.
func TestMCPChargesAsTheHTTPAPI(t *testing.T) {
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
		e := newEnv(t)
		acmeNetwork(e)
		e.startWorkers()
		var cs *mcp.ClientSession
		if viaMCP {
			cs = e.mcp(e.key)
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
				r := e.do("POST", paths[c.tool], c.args, "Idempotency-Key", key)
				if r.status != 200 && r.status != 202 {
					t.Fatalf("%s %v: %d %s", c.tool, c.args, r.status, r.raw)
				}
				e.waitSettled(r.str("task.id"))
			}
		}
		for _, l := range e.ledgerOf("acme") {
			ledger = append(ledger, fmt.Sprintf("%s %d", l.Kind, l.Amount))
		}
		for _, task := range e.do("GET", "/v1/tasks?pageSize=100", nil).get("data").([]any) {
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
	is := is.New(t)
	e := newEnv(t, func(c *server.Config) { c.RateKey = server.Rate{Limit: rate.Limit(0.01), Burst: 3} })
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	accept := "application/json, text/event-stream"
	is.Equal(e.do("GET", "/v1/tasks", nil).status, http.StatusOK)
	is.Equal(e.do("POST", "/mcp", list, "Accept", accept).status, http.StatusOK)
	is.Equal(e.do("POST", "/mcp", list, "Accept", accept).status, http.StatusOK)
	limited := e.do("POST", "/mcp", list, "Accept", accept)
	is.Equal(limited.status, http.StatusTooManyRequests)
	is.Equal(limited.str("code"), "rate_limited")
	is.True(limited.header.Get("Retry-After") != "")
	is.Equal(e.do("GET", "/v1/tasks", nil).status, http.StatusTooManyRequests) // one bucket for both

	// The SDK's client sees the refusal as an error, and nothing is charged.
	_, err := mcpConnect(t, e.http.URL, e.key)
	is.True(err != nil)
	is.Equal(e.balance("acme").Charged, int64(0))
}

// TestMCPRefusesABatch: a JSON-RPC batch would run many tool calls on one request of
// the key's rate limit (the protocol before 2025-06-18 allowed them, and a request
// without its version header is read as that protocol). One message a request.
func TestMCPRefusesABatch(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
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
			r := e.do("POST", "/mcp", body, append([]string{"Accept", "application/json, text/event-stream"}, headers...)...)
			rpcRefused(t, r, http.StatusBadRequest, nil, -32600, "a JSON-RPC batch is not accepted: send one message a request")
		})
	}
	e.nothingCharged()

	// One message, white space before it or not, is answered.
	r := e.do("POST", "/mcp", "\n  "+enrich(4, "d.com"), "Accept", "application/json, text/event-stream")
	is.Equal(r.status, http.StatusOK)
	is.Equal(r.get("id"), 4.0)
	is.Equal(e.balance("acme").Charged, int64(1))
}

// TestMCPTransportRefusals: what the transport refuses before any tool runs is a
// JSON-RPC error response, JSON as every error of the API but 401, with the id of the
// message when it has one; answered as the OpenAPI document says (e.do checks each
// answer against it), and it costs nothing.
func TestMCPTransportRefusals(t *testing.T) {
	e := newEnv(t)
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
			rpcRefused(t, e.do("POST", "/mcp", c.body, c.headers...), c.status, c.id, c.code, c.message)
		})
	}
	// An id is answered as it was sent, a number past float64's precision too.
	r := e.do("POST", "/mcp", `{"jsonrpc":"2.0","id":12345678901234567891,"method":"no/such"}`, version...)
	is.New(t).True(strings.Contains(string(r.raw), `"id":12345678901234567891,`))
	e.nothingCharged()
}

// rpcRefused checks a JSON-RPC error response: its status, and its id, code and
// message (any message when message is "").
func rpcRefused(t *testing.T, r *response, status int, id any, code float64, message string) {
	t.Helper()
	is := is.NewRelaxed(t)
	is.Equal(r.status, status)
	is.Equal(r.header.Get("Content-Type"), "application/json")
	is.Equal(r.get("jsonrpc"), "2.0")
	is.True(r.has("id"))
	is.Equal(r.get("id"), id)
	is.Equal(r.get("error.code"), code)
	if message != "" {
		is.Equal(r.str("error.message"), message)
	}
	is.True(r.str("error.message") != "")
	if t.Failed() {
		t.Logf("got %d %s", r.status, r.raw)
	}
}

// TestMCPToolCallNeedsNoSession: a tool call is one POST, answered by whichever
// replica gets it; no session id is given or needed.
func TestMCPToolCallNeedsNoSession(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.net.addCompany(company("Acme", "acme.com"))
	e.startWorkers()
	r := e.do("POST", "/mcp", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"enrich_company","arguments":{"domain":"acme.com"}}}`,
		"Accept", "application/json, text/event-stream")
	is.Equal(r.status, http.StatusOK)
	is.Equal(r.header.Get("Mcp-Session-Id"), "")
	is.Equal(r.get("id"), 7.0)
	is.Equal(r.get("result.isError"), nil)
	sc, _ := r.get("result.structuredContent").(map[string]any)
	is.Equal(sc["data"].(map[string]any)["name"], "Acme")
	is.Equal(e.balance("acme").Charged, int64(1))

	// One log line for the request, as for any other; the SDK's INFO lines of the
	// session each request opens and closes are left out.
	logs := e.logs.String()
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
