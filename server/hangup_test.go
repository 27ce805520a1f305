package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// TestAClientThatHangsUpIsNotAServerError sends requests whose client has gone (their
// context is canceled, as the server does when the connection closes) through the real
// handler: they are logged below ERROR and counted as 499, never as a 500, and nothing
// is charged.
func TestAClientThatHangsUpIsNotAServerError(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	gone := func(method, path, body string) *httptest.ResponseRecorder {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		req := httptest.NewRequestWithContext(ctx, method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+e.key)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		rec := httptest.NewRecorder()
		e.srv.ServeHTTP(rec, req)
		return rec
	}
	// Writes notice the hang-up (reads are short and run to the end regardless).
	is.Equal(gone("POST", "/v1/companies/enrich", `{"domain":"acme.com"}`).Code, 499)
	is.Equal(gone("POST", "/v1/tasks/0190a3c4-0000-7000-8000-000000000000/cancel", "").Code, 499)

	var lines int
	for _, line := range strings.Split(strings.TrimSpace(e.logs.String()), "\n") {
		var entry map[string]any
		is.NoErr(json.Unmarshal([]byte(line), &entry))
		is.True(entry["level"] != "ERROR") // the client's doing, not the server's
		if entry["msg"] == "request" {
			lines++
			is.Equal(entry["level"], "INFO")
			is.Equal(entry["status"], 499.0)
			is.True(strings.HasPrefix(entry["err"].(string), "client closed the request: "))
		}
	}
	is.Equal(lines, 2)

	m := scrape(t, e.http.URL)
	is.Equal(m[`enrichd_http_requests_total{route="enrich_company",status="499"}`], 1.0)
	is.Equal(m[`enrichd_http_requests_total{route="cancel_task",status="499"}`], 1.0)
	for series := range m {
		is.True(!strings.Contains(series, `status="5`)) // no server error counted
	}
	is.Equal(e.balance("acme").Charged, int64(0))
	is.Equal(e.do("GET", "/v1/tasks", nil).get("total"), 0.0)

	// A server error while the client is still there is a 500, logged at ERROR.
	e.db.Close()
	is.Equal(e.do("GET", "/v1/tasks", nil).status, http.StatusInternalServerError)
	is.True(strings.Contains(e.logs.String(), `"level":"ERROR"`))
	e.db = nil
}
