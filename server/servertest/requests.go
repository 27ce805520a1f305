package servertest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/matryer/is"

	"enrichd/enrich"
	"enrichd/store"
)

// NothingCharged checks that org acme was charged nothing and has no task.
func (e *Env) NothingCharged() {
	e.T.Helper()
	is := is.New(e.T)
	is.Equal(e.Balance("acme").Charged, int64(0))
	is.Equal(e.Do("GET", "/v1/tasks", nil).Get("total"), 0.0)
}

// DoHeaders sends a body with a header that may repeat, which Env.Do cannot.
func (e *Env) DoHeaders(path, body string, header http.Header) *Response {
	e.T.Helper()
	req, err := http.NewRequest("POST", e.HTTP.URL+path, strings.NewReader(body))
	if err != nil {
		e.T.Fatal(err)
	}
	req.Header = header
	req.Header.Set("Authorization", "Bearer "+e.Key)
	req.Header.Set("Content-Type", "application/json")
	res, err := Client.Do(req)
	if err != nil {
		e.T.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := &Response{Status: res.StatusCode, Header: res.Header, Raw: raw}
	e.checkOpenAPI(req, []byte(body), out)
	return out
}

// DoKeys sends a request with an Authorization header for each key ("Bearer " and the
// key), and a body of {} but to a GET, checked against the OpenAPI document as e.Do's
// are.
func (e *Env) DoKeys(method, path string, keys ...string) *Response {
	e.T.Helper()
	var body []byte
	if method != http.MethodGet {
		body = []byte("{}")
	}
	req, err := http.NewRequest(method, e.HTTP.URL+path, bytes.NewReader(body))
	if err != nil {
		e.T.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	for _, k := range keys {
		req.Header.Add("Authorization", "Bearer "+k)
	}
	res, err := Client.Do(req)
	if err != nil {
		e.T.Fatal(err)
	}
	defer res.Body.Close()
	out := &Response{Status: res.StatusCode, Header: res.Header}
	out.Raw, _ = io.ReadAll(res.Body)
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		json.Unmarshal(out.Raw, &out.Body)
	}
	e.checkOpenAPI(req, body, out)
	return out
}

// EnrichDomain enriches a domain with key and waits for the task to settle.
func (e *Env) EnrichDomain(key, domain string) *Response {
	e.T.Helper()
	r := e.Do("POST", "/v1/companies/enrich", map[string]any{"domain": domain}, "Authorization", "Bearer "+key)
	if r.Status != 202 && r.Status != 200 {
		e.T.Fatalf("enrich %s: %d %s", domain, r.Status, r.Raw)
	}
	return e.WaitSettled(r.Str("task.id"), "Authorization", "Bearer "+key)
}

// TaskSources is what the task says each source was asked.
func (e *Env) TaskSources(orgID, id string) []enrich.SourceCall {
	e.T.Helper()
	task, err := e.DB.GetTask(context.Background(), orgID, id)
	if err != nil {
		e.T.Fatal(err)
	}
	var calls []enrich.SourceCall
	if err := json.Unmarshal(task.Sources, &calls); err != nil {
		e.T.Fatalf("the task's sources %s: %v", task.Sources, err)
	}
	return calls
}

// LedgerKinds lists the ledger rows of one task, oldest first.
func (e *Env) LedgerKinds(taskID string) []string {
	e.T.Helper()
	ledger, err := e.DB.CreditLedger(context.Background(), "acme")
	if err != nil {
		e.T.Fatal(err)
	}
	var kinds []string
	for _, l := range ledger {
		if l.TaskID != nil && *l.TaskID == taskID {
			kinds = append(kinds, l.Kind)
		}
	}
	return kinds
}

// ClaimOf is a claim of a task of the organization, as a worker holds it.
func ClaimOf(orgID string, lookup enrich.Lookup) *store.Claim {
	return &store.Claim{TaskID: "t", OrgID: orgID, Input: enrich.Input{Lookup: lookup, Target: "acme.com"}}
}
