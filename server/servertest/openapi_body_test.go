package servertest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3filter"
)

// checkJSONBody gives kin-openapi's verdict on a body, which it checks in its stead:
// a real task and a not-found error, whole and altered, are refused by both or by
// neither, and the alterations the document forbids are refused.
func TestJSONBodiesAreCheckedAsKinOpenAPIChecksThem(t *testing.T) {
	SQLiteOnly(t, "checks the test's own validator, not the store")
	e := NewEnv(t)
	s, err := OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	id := e.Do("POST", "/v1/companies/enrich", map[string]any{"domain": "acme.com"}).Str("task.id")
	task := e.Do("GET", "/v1/tasks/"+id, nil)
	missing := e.Do("GET", "/v1/tasks/00000000-0000-4000-8000-000000000000", nil)
	if task.Status != 200 || missing.Status != 404 {
		t.Fatalf("GET a task: %d, a missing one: %d", task.Status, missing.Status)
	}
	// A schema written under its operation (409), and one under a response component
	// the operation names (429).
	e.Do("POST", "/v1/tasks/"+id+"/cancel", nil)
	settled := e.Do("POST", "/v1/tasks/"+id+"/cancel", nil)
	if settled.Status != 409 {
		t.Fatalf("cancel a canceled task: %d %s", settled.Status, settled.Raw)
	}
	tooMany := func(body string) *Response {
		return &Response{Status: 429, Header: http.Header{"Content-Type": {"application/json"}, "Retry-After": {"1"}, "X-Request-Id": {"0123456789abcdef"}}, Raw: []byte(body)}
	}

	verdicts := func(path string, res *Response) (kin, ours error) {
		t.Helper()
		method := "GET"
		if strings.HasSuffix(path, "/cancel") || strings.HasSuffix(path, "/enrich") {
			method = "POST"
		}
		req, _ := http.NewRequest(method, e.HTTP.URL+path, nil)
		route, params, err := s.findRoute(req)
		if err != nil {
			t.Fatal(err)
		}
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route}
		kin = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
			RequestValidationInput: in, Status: res.Status, Header: res.Header,
			Body: io.NopCloser(bytes.NewReader(res.Raw)), Options: &openapi3filter.Options{IncludeResponseStatus: true},
		})
		return kin, s.checkJSONBody(route, res.Status, res.Header, res.Raw)
	}
	altered := func(res *Response, change func(task map[string]any)) *Response {
		var body map[string]any
		if err := json.Unmarshal(res.Raw, &body); err != nil {
			t.Fatal(err)
		}
		change(body)
		raw, _ := json.Marshal(body)
		return &Response{Status: res.Status, Header: res.Header, Raw: raw}
	}
	inner := func(body map[string]any) map[string]any { return body["task"].(map[string]any) }
	for _, c := range []struct {
		name    string
		path    string
		res     *Response
		refused bool
	}{
		{"the task", "/v1/tasks/" + id, task, false},
		{"no id", "/v1/tasks/" + id, altered(task, func(b map[string]any) { delete(inner(b), "id") }), true},
		{"a status the document does not list", "/v1/tasks/" + id, altered(task, func(b map[string]any) { inner(b)["status"] = "nope" }), true},
		{"a creation time that is no date-time", "/v1/tasks/" + id, altered(task, func(b map[string]any) { inner(b)["created_at"] = "yesterday" }), true},
		{"credits as text", "/v1/tasks/" + id, altered(task, func(b map[string]any) { inner(b)["credits_charged"] = "1" }), true},
		{"an id that is no uuid (a format kin-openapi does not enforce)", "/v1/tasks/" + id, altered(task, func(b map[string]any) { inner(b)["id"] = "task-1" }), false},
		{"a property the document does not name", "/v1/tasks/" + id, altered(task, func(b map[string]any) { inner(b)["surprise"] = true }), true},
		{"a settled task's refusal", "/v1/tasks/" + id + "/cancel", settled, false},
		{"a settled task's refusal with another code", "/v1/tasks/" + id + "/cancel", altered(settled, func(b map[string]any) { b["code"] = "not_found" }), true},
		{"a full queue", "/v1/companies/enrich", tooMany(`{"error":"the backlog is full","code":"queue_full","queuedTasks":10}`), false},
		{"a full queue without its count", "/v1/companies/enrich", tooMany(`{"error":"the backlog is full","code":"queue_full"}`), true},
		{"a rate limit with a count it never has", "/v1/companies/enrich", tooMany(`{"error":"slow down","code":"rate_limited","queuedTasks":10}`), true},
		{"the error", "/v1/tasks/00000000-0000-4000-8000-000000000000", missing, false},
		{"an error without its code", "/v1/tasks/00000000-0000-4000-8000-000000000000", altered(missing, func(b map[string]any) { delete(b, "code") }), true},
	} {
		kin, ours := verdicts(c.path, c.res)
		if (kin == nil) != (ours == nil) {
			t.Errorf("%s: kin-openapi says %v, checkJSONBody %v", c.name, kin, ours)
		}
		if (ours != nil) != c.refused {
			t.Errorf("%s: checkJSONBody says %v, want refused=%v", c.name, ours, c.refused)
		}
	}
}
