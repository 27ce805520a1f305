package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// TestAQueryThatSaysTwoThingsIsRefused: a query parameter sent twice (which of the
// two was meant?) and a query string that is not well-formed (the part after a bad
// escape would be dropped) are 400 on every endpoint that takes a key, before
// anything is read, made or charged.
func TestAQueryThatSaysTwoThingsIsRefused(t *testing.T) {
	e := newEnv(t, allowPrivateWebhooks)
	loopID, _ := e.createLoop("Acme loop", "http://127.0.0.1:9/hook", "company")
	taskID := e.enrichCompany(map[string]string{"domain": "acme.com"})
	before, balance := e.otherState(e.key, loopID, taskID), e.balance("acme")

	// What the probe sent, and what a list would have answered with the first value.
	for query, says := range map[string]string{
		"/v1/tasks?page=1&page=2":                              `the query parameter "page" is sent 2 times; send it once`,
		"/v1/tasks?status=queued&status=failed":                `the query parameter "status" is sent 2 times; send it once`,
		"/v1/tasks?pageSize=1&status=queued&pageSize=1":        `the query parameter "pageSize" is sent 2 times; send it once`,
		"/v1/watches?loop_id=" + loopID + "&loop_id=" + loopID: `the query parameter "loop_id" is sent 2 times; send it once`,
		"/v1/tasks?%zz=1":                                      `the query string is not well-formed (invalid URL escape "%zz")`,
		"/v1/tasks?status=%zz":                                 `the query string is not well-formed (invalid URL escape "%zz")`,
		"/v1/tasks?page=1;page=2":                              "the query string is not well-formed (invalid semicolon separator in query)",
	} {
		r := e.do("GET", query, nil)
		if r.status != http.StatusBadRequest || r.str("code") != "invalid_input" || !strings.HasPrefix(r.str("error"), says) {
			t.Errorf("GET %s: %d %s, want 400 saying %s", query, r.status, r.raw, says)
		}
	}

	// Every endpoint that takes a key refuses both, whatever it reads of its query.
	var routes int
	for _, route := range registeredRoutes(t) {
		method, path, _ := strings.Cut(route, " ")
		if (path != "/mcp" && !strings.HasPrefix(path, "/v1/")) || path == "/v1/openapi.json" {
			continue
		}
		routes++
		path = strings.ReplaceAll(path, "{id}", taskID)
		for _, query := range []string{"?x=1&x=2", "?%zz", "?a=1;b=2"} {
			r := e.do(method, path+query, map[string]any{}, "Accept", "application/json, text/event-stream")
			if r.status != http.StatusBadRequest || r.str("code") != "invalid_input" {
				t.Errorf("%s %s%s: %d %s, want 400", method, path, query, r.status, r.raw)
			}
		}
	}
	if routes < 25 {
		t.Fatalf("only %d routes of the API found: the walk is broken", routes)
	}
	is := is.New(t)
	is.Equal(e.otherState(e.key, loopID, taskID), before) // nothing read as something else changed anything
	is.Equal(e.balance("acme"), balance)
	// One of each is still fine, and a parameter no endpoint reads is still ignored.
	is.Equal(e.do("GET", "/v1/tasks?page=0&pageSize=10&status=queued&utm_source=x", nil).get("total"), 1.0)
}

// TestTwoAuthorizationHeadersAreUnauthorized: a request with two keys is not
// answered as the organization of either, the first as it was, nor with one key
// sent twice: 401 on every endpoint that takes a key.
func TestTwoAuthorizationHeadersAreUnauthorized(t *testing.T) {
	e := newEnv(t)
	otherKey, _ := e.newOrg("other", 100)
	balance := e.balance("acme")
	var routes int
	for _, route := range registeredRoutes(t) {
		method, path, _ := strings.Cut(route, " ")
		if (path != "/mcp" && !strings.HasPrefix(path, "/v1/")) || path == "/v1/openapi.json" {
			continue
		}
		routes++
		path = strings.ReplaceAll(path, "{id}", "0195f3a2-6b1c-7cde-8f00-123456789abc")
		for _, keys := range [][]string{{e.key, otherKey}, {e.key, e.key}, {e.key, ""}} {
			r := e.doKeys(method, path, keys...)
			if r.status != http.StatusUnauthorized || string(r.raw) != "Unauthorized" || r.header.Get("WWW-Authenticate") != "Bearer" {
				t.Errorf("%s %s with %d Authorization headers: %d %s, want 401", method, path, len(keys), r.status, r.raw)
			}
		}
	}
	if routes < 25 {
		t.Fatalf("only %d routes of the API found: the walk is broken", routes)
	}
	is := is.New(t)
	is.Equal(e.balance("acme"), balance)
	is.Equal(e.balance("other").Charged, int64(0))
	is.Equal(e.doKeys("GET", "/v1/status", e.key).status, http.StatusOK) // one is answered
}

// doKeys sends a request with an Authorization header for each key ("Bearer " and the
// key), and a body of {} but to a GET, checked against the OpenAPI document as e.do's
// are.
func (e *env) doKeys(method, path string, keys ...string) *response {
	e.t.Helper()
	var body []byte
	if method != http.MethodGet {
		body = []byte("{}")
	}
	req, err := http.NewRequest(method, e.http.URL+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	for _, k := range keys {
		req.Header.Add("Authorization", "Bearer "+k)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	out := &response{status: res.StatusCode, header: res.Header}
	out.raw, _ = io.ReadAll(res.Body)
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		json.Unmarshal(out.raw, &out.body)
	}
	e.checkOpenAPI(req, body, out)
	return out
}
