package server_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"enrichd/server/servertest"
)

// TestEveryPathAllowsWhatItTakes walks every route registered in the server's source,
// the API's, the operator's and the dashboard's: each method its path does not take is
// 405 with an Allow that lists exactly the methods it does take, and each method it
// takes is routed. An id is a uuid: /v1/watches/import is no watch's path, and
// /v1/watches/{id} takes no POST.
func TestEveryPathAllowsWhatItTakes(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t)
	admin := e.SignIn("acme", "admin")
	// Every route's parameters filled alike, so that two routes share a path exactly
	// when their paths have the same shape.
	fill := strings.NewReplacer("{id}", "0195f3a2-6b1c-7cde-8f00-123456789abc", "{source}", "pdl", "{file}", "style.css", "{name}", "heap")
	takes := map[string][]string{} // path → the methods routes.go gives it
	for _, route := range servertest.RegisteredRoutes(t) {
		method, path, _ := strings.Cut(route, " ")
		if strings.HasPrefix(path, "/debug/pprof/") {
			continue // the admin listener's alone (pprof_test.go)
		}
		path = fill.Replace(path)
		takes[path] = append(takes[path], method)
	}
	if len(takes) < 50 {
		t.Fatalf("only %d paths found in the source: the walk is broken", len(takes))
	}
	// The paths a literal segment tells from a path with an id.
	for _, p := range []string{"/v1/watches/import", "/dashboard/batches/preview"} {
		if takes[p] == nil {
			t.Fatalf("%s is not among the routes: the walk is broken", p)
		}
	}
	for path, methods := range takes {
		slices.Sort(methods)
		allow := strings.Join(methods, ", ")
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions} {
			status, header := ask(e, admin, m, path)
			switch {
			case !slices.Contains(methods, m) && (status != http.StatusMethodNotAllowed || header.Get("Allow") != allow):
				t.Errorf("%s %s: %d, Allow %q; want 405, Allow %q", m, path, status, header.Get("Allow"), allow)
			case slices.Contains(methods, m) && (status == http.StatusMethodNotAllowed || header.Get("Allow") != ""):
				t.Errorf("%s %s: %d, Allow %q; the path takes %s", m, path, status, header.Get("Allow"), m)
			}
		}
	}
}

// ask sends a request with no body, as the API's client (with the env's key, the
// answer checked against the OpenAPI document) or as a signed-in browser.
func ask(e *servertest.Env, b *servertest.Browser, method, path string) (int, http.Header) {
	if path == "/mcp" || strings.HasPrefix(path, "/v1/") {
		r := e.Do(method, path, nil)
		if method != http.MethodHead && r.Status == http.StatusMethodNotAllowed && r.Str("code") != "method_not_allowed" {
			e.T.Errorf("%s %s: 405 without its code: %s", method, path, r.Raw)
		}
		return r.Status, r.Header
	}
	p := b.Do(method, path, nil)
	return p.Status, p.Header
}
