package server_test

import (
	"bytes"
	"net/http"
	"slices"
	"strings"
	"testing"

	"enrichd/server/servertest"
)

// loadOpenAPI parses and validates the document once for the whole test binary.
func loadOpenAPI(t testing.TB) *servertest.OpenAPISpec {
	t.Helper()
	s, err := servertest.OpenAPI()
	if err != nil {
		t.Fatalf("%s: %v", servertest.OpenAPIFile, err)
	}
	return s
}

func TestOpenAPIDocumentIsServed(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t)
	s := loadOpenAPI(t)
	// No key: a client reads the document before it has one.
	r := e.Do("GET", "/v1/openapi.json", nil, "Authorization", "")
	if r.Status != http.StatusOK {
		t.Fatalf("GET /v1/openapi.json: %d %s", r.Status, r.Raw)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	if !bytes.Equal(r.Raw, s.Raw) {
		t.Errorf("the served document is not %s", servertest.OpenAPIFile)
	}
	doc, err := servertest.ParseOpenAPI(r.Raw)
	if err != nil {
		t.Fatalf("the served document: %v", err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Error("the document is not read as OpenAPI 3.1, so its schemas are not validated as JSON Schema 2020-12")
	}
}

// TestOpenAPIDescribesEveryRoute holds the routes registered in the server's source and
// the operations of the document to each other, both ways, and asks the running server
// whether each of them is really there.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	t.Parallel()
	s := loadOpenAPI(t)
	registered := servertest.RegisteredRoutes(t)
	if len(registered) == 0 {
		t.Fatal("no route registrations found in the server's source")
	}
	// The dashboard's pages are HTML for people signed in with a session, not the API
	// the document describes; the dashboard_*_test.go files test them. Go's profiles
	// are served on the admin listener alone (pprof_test.go). The root, which leads to
	// the dashboard, and the icon are for browsers (dashboard_install_test.go).
	registered = slices.DeleteFunc(registered, func(r string) bool {
		_, path, _ := strings.Cut(r, " ")
		return path == "/dashboard" || strings.HasPrefix(path, "/dashboard/") || strings.HasPrefix(path, "/debug/pprof/") ||
			path == "/" || path == "/favicon.ico"
	})
	var documented []string
	for path, item := range s.Doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	slices.Sort(documented)
	for _, r := range registered {
		if !slices.Contains(documented, r) {
			t.Errorf("%s is served but not in %s", r, servertest.OpenAPIFile)
		}
	}
	for _, d := range documented {
		if !slices.Contains(registered, d) {
			t.Errorf("%s is in %s but not served", d, servertest.OpenAPIFile)
		}
	}

	// The registrations read from the source are the ones the router has: without a key,
	// a route answers 401 (or 200 where it needs none), never the router's own 404 or 405.
	e := servertest.NewEnv(t)
	for _, r := range registered {
		method, path, _ := strings.Cut(r, " ")
		path = strings.ReplaceAll(path, "{id}", "0195f3a2-6b1c-7cde-8f00-123456789abc")
		res := e.Do(method, path, nil, "Authorization", "")
		if res.Status != http.StatusUnauthorized && res.Status != http.StatusOK {
			t.Errorf("%s: %s %s answers %d without a key: %s", r, method, path, res.Status, res.Raw)
		}
	}
}
