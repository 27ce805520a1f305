package server_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"enrichd/server/servertest"

	"github.com/matryer/is"
)

// TestAnIDThatCannotBeOneIsNotFound: an id that is no id at all (a NUL, bytes that are
// not UTF-8, which PostgreSQL refuses as text, a word, a UUID written otherwise than
// enrichd writes ids) is 404 in every route that takes one, the API's, the dashboard's
// and MCP's get_task alike, on both engines: the store is never asked, nothing is
// logged as an error, and nothing changes. The key, or the session, is checked first,
// as for any id.
func TestAnIDThatCannotBeOneIsNotFound(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	// One object of each kind, so that an id read loosely could find something.
	loopID, _ := e.CreateLoop("Acme loop", "http://127.0.0.1:9/hook", "company")
	e.SendTestDelivery(loopID)
	taskID := e.EnrichCompany(map[string]string{"domain": "acme.com"}) // queued: no workers run
	e.CreateWatch(map[string]any{"object_type": "company", "domain": "acme.com", "loop_id": loopID})
	e.UploadCSV("domain\nacme.com\n", "")
	before, balance := e.OtherState(e.Key, loopID, taskID), e.Balance("acme")

	notIDs := []string{"%00", "%ff", "%C3%28", "a%00b", "nope", strings.ToUpper(loopID), "{" + loopID + "}", "urn:uuid:" + loopID, loopID[:35]}
	kinds := map[string]string{"tasks": "task", "loops": "loop", "deliveries": "delivery", "watches": "watch", "batches": "batch", "suppressions": "suppression", "erasures": "erasure"}
	admin, nobody := e.SignIn("acme", "admin"), e.NewBrowser()
	var api, pages int
	for _, route := range servertest.RegisteredRoutes(t) {
		method, path, _ := strings.Cut(route, " ")
		if !strings.Contains(path, "{id}") {
			continue
		}
		t.Run(route, func(t *testing.T) {
			for _, id := range notIDs {
				target := strings.Replace(path, "{id}", id, 1)
				if strings.HasPrefix(path, "/dashboard/") {
					pages++
					var p *servertest.WebPage
					if method == http.MethodGet {
						p = admin.Get(target)
						if out := nobody.Get(target); out.Status != http.StatusSeeOther || !strings.HasPrefix(out.Location, "/dashboard/login") {
							t.Errorf("GET %s without a session: %d to %q, want 303 to sign in", target, out.Status, out.Location)
						}
					} else {
						p = admin.Post(target, url.Values{"name": {"Taken over"}, "domain": {"acme.com"}})
					}
					want := "no such key"
					if kind, ok := kinds[strings.Split(path, "/")[2]]; ok {
						want = kind + " not found"
					}
					if p.Status != http.StatusNotFound || !p.Has(want) {
						t.Errorf("%s %s: %d, want 404 saying %q: %.300s", method, target, p.Status, want, p.Body)
					}
					continue
				}
				api++
				var body any
				if method == http.MethodPost || method == http.MethodPatch {
					body = map[string]any{}
				}
				if r := e.Do(method, target, body, "Authorization", ""); r.Status != http.StatusUnauthorized {
					t.Errorf("%s %s without a key: %d %s, want 401", method, target, r.Status, r.Raw)
				}
				r := e.Do(method, target, body)
				kind := kinds[strings.Split(path, "/")[2]]
				if r.Status != http.StatusNotFound || r.Str("code") != "not_found" || r.Str("error") != kind+" not found" {
					t.Errorf("%s %s: %d %s, want 404 %q", method, target, r.Status, r.Raw, kind+" not found")
				}
			}
		})
	}
	if api < 15*len(notIDs) || pages < 15*len(notIDs) {
		t.Fatalf("only %d requests to the API's routes with an id and %d to the dashboard's: the walk is broken", api, pages)
	}

	cs := e.MCP(e.Key)
	for _, id := range []string{"\x00", "a\x00b", "nope", strings.ToUpper(taskID), taskID + " "} {
		toolRefused(t, call(t, cs, "get_task", map[string]any{"task_id": id}), http.StatusNotFound, "not_found", "task not found")
	}

	is := is.New(t)
	is.Equal(e.OtherState(e.Key, loopID, taskID), before) // nothing changed
	is.Equal(e.Balance("acme"), balance)
	logs := e.Logs.String()
	if strings.Contains(logs, `"level":"ERROR"`) || strings.Contains(logs, `"status":500`) {
		t.Errorf("an id that is no id was logged as an error:\n%s", logs)
	}
}
