package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"enrichd/netguard"
	"enrichd/server"
	"enrichd/server/servertest"

	"github.com/matryer/is"
)

// TestAClientThatHangsUpIsNotAServerError sends requests whose client has gone (their
// context is canceled, as the server does when the connection closes) through the real
// handler: they are logged below ERROR and counted as 499, never as a 500, and nothing
// is charged.
func TestAClientThatHangsUpIsNotAServerError(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	gone := func(method, path, body string) *httptest.ResponseRecorder {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		req := httptest.NewRequestWithContext(ctx, method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+e.Key)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		rec := httptest.NewRecorder()
		e.Srv.ServeHTTP(rec, req)
		return rec
	}
	// Writes notice the hang-up (reads are short and run to the end regardless).
	is.Equal(gone("POST", "/v1/companies/enrich", `{"domain":"acme.com"}`).Code, 499)
	is.Equal(gone("POST", "/v1/tasks/0190a3c4-0000-7000-8000-000000000000/cancel", "").Code, 499)

	var lines int
	for _, line := range strings.Split(strings.TrimSpace(e.Logs.String()), "\n") {
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

	m := servertest.Scrape(t, e.HTTP.URL)
	is.Equal(m[`enrichd_http_requests_total{route="enrich_company",status="499"}`], 1.0)
	is.Equal(m[`enrichd_http_requests_total{route="cancel_task",status="499"}`], 1.0)
	for series := range m {
		is.True(!strings.Contains(series, `status="5`)) // no server error counted
	}
	is.Equal(e.Balance("acme").Charged, int64(0))
	is.Equal(e.Do("GET", "/v1/tasks", nil).Get("total"), 0.0)

	// A server error while the client is still there is a 500, logged at ERROR.
	e.DB.Close()
	is.Equal(e.Do("GET", "/v1/tasks", nil).Status, http.StatusInternalServerError)
	is.True(strings.Contains(e.Logs.String(), `"level":"ERROR"`))
	e.DB = nil
}

// stallingResolver answers no lookup: it says it was asked, then waits for the
// lookup's context to end.
type stallingResolver struct{ asked chan struct{} }

func (r stallingResolver) LookupNetIP(ctx context.Context, _, _ string) ([]netip.Addr, error) {
	close(r.asked)
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestAClientThatHangsUpMidRequestIsNotAServerError hangs up a real connection while
// the handler waits on the webhook URL's DNS lookup: the server logs the request at
// INFO as 499 and counts it apart from server errors.
func TestAClientThatHangsUpMidRequestIsNotAServerError(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	asked := make(chan struct{})
	e := servertest.NewEnv(t, func(cfg *server.Config) {
		cfg.WebhookPolicy = netguard.Policy{Resolver: stallingResolver{asked: asked}}
	})
	ctx, hangUp := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "POST", e.HTTP.URL+"/v1/loops",
		strings.NewReader(`{"name":"Hooks","webhook_url":"https://hooks.example.com/in"}`))
	is.NoErr(err)
	req.Header.Set("Authorization", "Bearer "+e.Key)
	req.Header.Set("Content-Type", "application/json")
	go func() {
		<-asked // the handler is in the middle of its work
		hangUp()
	}()
	_, err = servertest.Client.Do(req)
	is.True(errors.Is(err, context.Canceled))

	// The log line is written once the handler returns.
	var entry map[string]any
	for deadline := time.Now().Add(servertest.SettleWithin); entry == nil; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line for the request:\n%s", e.Logs.String())
		}
		for _, line := range strings.Split(strings.TrimSpace(e.Logs.String()), "\n") {
			var l map[string]any
			if json.Unmarshal([]byte(line), &l) == nil && l["msg"] == "request" && l["route"] == "create_loop" {
				entry = l
			}
		}
	}
	is.Equal(entry["level"], "INFO")
	is.Equal(entry["status"], 499.0)
	is.Equal(entry["err"], "client closed the request: context canceled")
	is.True(!strings.Contains(e.Logs.String(), `"level":"ERROR"`))
	m := servertest.Scrape(t, e.HTTP.URL)
	is.Equal(m[`enrichd_http_requests_total{route="create_loop",status="499"}`], 1.0)
	for series := range m {
		is.True(!strings.Contains(series, `status="5`))
	}
	is.Equal(len(e.Do("GET", "/v1/loops", nil).Get("data").([]any)), 0)
}
