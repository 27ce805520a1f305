package server_test

import (
	"net/http"
	"strings"
	"testing"

	"enrichd/server/servertest"

	"github.com/matryer/is"
)

// TestAQueryThatSaysTwoThingsIsRefused: a query parameter sent twice (which of the
// two was meant?) and a query string that is not well-formed (the part after a bad
// escape would be dropped) are 400 on every endpoint that takes a key, before
// anything is read, made or charged.
func TestAQueryThatSaysTwoThingsIsRefused(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	loopID, _ := e.CreateLoop("Acme loop", "http://127.0.0.1:9/hook", "company")
	taskID := e.EnrichCompany(map[string]string{"domain": "acme.com"})
	before, balance := e.OtherState(e.Key, loopID, taskID), e.Balance("acme")

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
		r := e.Do("GET", query, nil)
		if r.Status != http.StatusBadRequest || r.Str("code") != "invalid_input" || !strings.HasPrefix(r.Str("error"), says) {
			t.Errorf("GET %s: %d %s, want 400 saying %s", query, r.Status, r.Raw, says)
		}
	}

	// Every endpoint that takes a key refuses both, whatever it reads of its query.
	var routes int
	for _, route := range servertest.RegisteredRoutes(t) {
		method, path, _ := strings.Cut(route, " ")
		if (path != "/mcp" && !strings.HasPrefix(path, "/v1/")) || path == "/v1/openapi.json" {
			continue
		}
		routes++
		path = strings.ReplaceAll(path, "{id}", taskID)
		for _, query := range []string{"?x=1&x=2", "?%zz", "?a=1;b=2"} {
			r := e.Do(method, path+query, map[string]any{}, "Accept", "application/json, text/event-stream")
			if r.Status != http.StatusBadRequest || r.Str("code") != "invalid_input" {
				t.Errorf("%s %s%s: %d %s, want 400", method, path, query, r.Status, r.Raw)
			}
		}
	}
	if routes < 25 {
		t.Fatalf("only %d routes of the API found: the walk is broken", routes)
	}
	is := is.New(t)
	is.Equal(e.OtherState(e.Key, loopID, taskID), before) // nothing read as something else changed anything
	is.Equal(e.Balance("acme"), balance)
	// One of each is still fine, and a parameter no endpoint reads is still ignored.
	is.Equal(e.Do("GET", "/v1/tasks?page=0&pageSize=10&status=queued&utm_source=x", nil).Get("total"), 1.0)
}

// TestTwoAuthorizationHeadersAreUnauthorized: a request with two keys is not
// answered as the organization of either, the first as it was, nor with one key
// sent twice: 401 on every endpoint that takes a key.
func TestTwoAuthorizationHeadersAreUnauthorized(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t)
	otherKey, _ := e.NewOrg("other", 100)
	balance := e.Balance("acme")
	var routes int
	for _, route := range servertest.RegisteredRoutes(t) {
		method, path, _ := strings.Cut(route, " ")
		if (path != "/mcp" && !strings.HasPrefix(path, "/v1/")) || path == "/v1/openapi.json" {
			continue
		}
		routes++
		path = strings.ReplaceAll(path, "{id}", "0195f3a2-6b1c-7cde-8f00-123456789abc")
		for _, keys := range [][]string{{e.Key, otherKey}, {e.Key, e.Key}, {e.Key, ""}} {
			r := e.DoKeys(method, path, keys...)
			if r.Status != http.StatusUnauthorized || string(r.Raw) != "Unauthorized" || r.Header.Get("WWW-Authenticate") != "Bearer" {
				t.Errorf("%s %s with %d Authorization headers: %d %s, want 401", method, path, len(keys), r.Status, r.Raw)
			}
		}
	}
	if routes < 25 {
		t.Fatalf("only %d routes of the API found: the walk is broken", routes)
	}
	is := is.New(t)
	is.Equal(e.Balance("acme"), balance)
	is.Equal(e.Balance("other").Charged, int64(0))
	is.Equal(e.DoKeys("GET", "/v1/status", e.Key).Status, http.StatusOK) // one is answered
}
