package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/google/uuid"
)

// openAPIFile is the document the server embeds and serves.
const openAPIFile = "openapi.json"

type openAPISpec struct {
	raw    []byte
	doc    *openapi3.T
	router routers.Router
	err    error
}

var (
	specOnce sync.Once
	spec     openAPISpec
)

// loadOpenAPI parses and validates the document once for the whole test binary.
func loadOpenAPI(t testing.TB) *openAPISpec {
	t.Helper()
	s, err := openAPI()
	if err != nil {
		t.Fatalf("%s: %v", openAPIFile, err)
	}
	return s
}

// openAPI is loadOpenAPI for callers that may run outside the test's goroutine, where
// t.Fatal must not be called.
func openAPI() (*openAPISpec, error) {
	specOnce.Do(func() {
		// A batch is uploaded, and its results downloaded, as CSV or JSON Lines: text to
		// the document. (kin-openapi's own CSV decoder refuses rows of another width
		// than the header's, which an upload with on_error=skip may have.)
		for _, text := range []string{"text/csv", "application/x-ndjson", "application/jsonl", "application/x-jsonlines", "application/json-lines"} {
			openapi3filter.RegisterBodyDecoder(text, openapi3filter.PlainBodyDecoder)
		}
		spec.raw, spec.err = os.ReadFile(openAPIFile)
		if spec.err != nil {
			return
		}
		spec.doc, spec.err = parseOpenAPI(spec.raw)
		if spec.err != nil {
			return
		}
		// The document's server is "/", the enrichd serving it; the tests' server listens
		// on a port of its own, so the routes are matched on the path alone.
		routed := *spec.doc
		routed.Servers = nil
		spec.router, spec.err = legacy.NewRouter(&routed)
	})
	return &spec, spec.err
}

// parseOpenAPI loads a document and checks it against the OpenAPI rules of its version.
func parseOpenAPI(raw []byte) (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(raw)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("not a valid OpenAPI document: %w", err)
	}
	return doc, nil
}

// methods are the HTTP methods a route of the API or of the document may have.
var methods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions}

// checkOpenAPI validates one exchange of the test suite against the document: every
// response must be one the document gives for the operation and status, headers and
// body included; a request the server accepted (2xx) must also fit the document, so
// that the document is never stricter than the server. Requests the server refused are
// often malformed on purpose, so only their responses are checked.
func (e *env) checkOpenAPI(req *http.Request, reqBody []byte, res *response) {
	e.t.Helper()
	s, err := openAPI()
	if err != nil {
		e.t.Errorf("%s: %v", openAPIFile, err)
		return
	}
	ctx := context.Background()
	req = req.Clone(ctx)
	req.Body = io.NopCloser(bytes.NewReader(reqBody))
	where := fmt.Sprintf("%s %s -> %d", req.Method, req.URL.RequestURI(), res.status)

	route, params, err := s.findRoute(req)
	if err != nil {
		// No operation: the server must answer as the document says it answers a path
		// it does not have (404) or a method a path does not have (405).
		route, err = s.unmatched(req, res.status)
		if err != nil {
			e.t.Errorf("OpenAPI: %s: %v", where, err)
			return
		}
	}
	in := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{
			RejectWhenRequestBodyNotSpecified: true,
			SkipSettingDefaults:               true,
			// The server checks the key; the document only says it is a bearer token.
			AuthenticationFunc: func(_ context.Context, in *openapi3filter.AuthenticationInput) error {
				scheme, key, _ := strings.Cut(in.RequestValidationInput.Request.Header.Get("Authorization"), " ")
				if !strings.EqualFold(scheme, "Bearer") || key == "" {
					return errors.New("no bearer token")
				}
				return nil
			},
		},
	}
	if res.status/100 == 2 {
		if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
			e.t.Errorf("OpenAPI: %s: the server accepted a request the document refuses: %v", where, err)
		}
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: res.status, Header: res.header,
		Body:    io.NopCloser(bytes.NewReader(res.raw)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		e.t.Errorf("OpenAPI: %s: the response does not fit the document: %v\nbody: %.2000s", where, err, res.raw)
		return
	}
	// ValidateResponse lets any body through where the document declares none.
	if r := route.Operation.Responses.Status(res.status); r != nil && len(r.Value.Content) == 0 && len(res.raw) > 0 {
		e.t.Errorf("OpenAPI: %s: the document declares no body, the server sent %q", where, res.raw)
	}
}

// findRoute is the operation of the document that answers req, if any. The router
// matches a path's shape, as the server's router does, and an {id} that is no uuid is
// still the operation's to answer (404, or 401 without a key), but for a path that is
// exactly another operation's: /v1/watches/import is not GET /v1/watches/{id}. An
// empty parameter matches nothing (/v1/loops is not PATCH /v1/loops/{id}).
func (s *openAPISpec) findRoute(req *http.Request) (*routers.Route, map[string]string, error) {
	route, params, err := s.router.FindRoute(req)
	if err != nil {
		return nil, nil, err
	}
	switch fits(route, params) {
	case nil:
		return route, params, nil
	case errEmptyParam:
		return nil, nil, errEmptyParam
	}
	for _, m := range methods {
		other := req.Clone(req.Context())
		other.Method = m
		if _, _, err := s.exactRoute(other); err == nil {
			return nil, nil, fmt.Errorf("%s is %s's path, not %s's", req.URL.Path, m, route.Operation.OperationID)
		}
	}
	return route, params, nil
}

// exactRoute is the operation of the document that takes req with every path
// parameter fitting its schema.
func (s *openAPISpec) exactRoute(req *http.Request) (*routers.Route, map[string]string, error) {
	route, params, err := s.router.FindRoute(req)
	if err == nil {
		err = fits(route, params)
	}
	if err != nil {
		return nil, nil, err
	}
	return route, params, nil
}

var errEmptyParam = errors.New("a path parameter is empty")

// fits says whether the path parameters of a route fit their schemas: not empty, and
// a uuid where the format says so.
func fits(route *routers.Route, params map[string]string) error {
	for _, p := range append(route.PathItem.Parameters, route.Operation.Parameters...) {
		if p.Value == nil || p.Value.In != openapi3.ParameterInPath {
			continue
		}
		v := params[p.Value.Name]
		if v == "" {
			return errEmptyParam
		}
		if p.Value.Schema != nil && p.Value.Schema.Value.Format == "uuid" && !isUUID(v) {
			return fmt.Errorf("the path parameter %s is %q, not a uuid", p.Value.Name, v)
		}
	}
	return nil
}

// isUUID reports whether s is a uuid as enrichd writes one: lowercase, with hyphens.
func isUUID(s string) bool {
	u, err := uuid.Parse(s)
	return err == nil && u.String() == s
}

// methodNotAllowed is the 405 the document's description gives for a method a path
// does not answer: no operation has it, so it is no component either (a component no
// operation uses is one the linters warn of).
func (s *openAPISpec) methodNotAllowed() *openapi3.ResponseRef {
	code := openapi3.NewStringSchema()
	code.Enum = []any{"method_not_allowed"}
	body := openapi3.NewAllOfSchema(s.doc.Components.Schemas["Error"].Value,
		&openapi3.Schema{Required: []string{"code"}, Properties: openapi3.Schemas{"code": code.NewRef()}})
	res := openapi3.NewResponse().WithDescription("The path does not answer this method.").WithJSONSchema(body)
	res.Headers = openapi3.Headers{
		"X-Request-Id": s.doc.Components.Headers["XRequestId"],
		"Allow":        &openapi3.HeaderRef{Value: &openapi3.Header{Parameter: openapi3.Parameter{Required: true, Schema: openapi3.NewStringSchema().NewRef()}}},
	}
	return &openapi3.ResponseRef{Value: res}
}

// unmatched is the operation of a request no operation of the document matches: 404
// where the document has no such path, 405 where it has the path with other methods,
// and 429 for either, as the per-address rate limit comes first.
func (s *openAPISpec) unmatched(req *http.Request, status int) (*routers.Route, error) {
	pathKnown := false
	for _, m := range methods {
		other := req.Clone(req.Context())
		other.Method = m
		if _, _, err := s.exactRoute(other); err == nil {
			pathKnown = true
		}
	}
	want, answer := http.StatusNotFound, s.doc.Components.Responses["NotFound"]
	if pathKnown {
		want, answer = http.StatusMethodNotAllowed, s.methodNotAllowed()
	}
	if status != want && status != http.StatusTooManyRequests {
		return nil, fmt.Errorf("the document has no such operation and says the answer is %d, not %d", want, status)
	}
	op := openapi3.NewOperation()
	op.Responses = openapi3.NewResponses(
		openapi3.WithStatus(want, answer),
		openapi3.WithStatus(http.StatusTooManyRequests, s.doc.Components.Responses["TooManyRequests"]),
	)
	return &routers.Route{Spec: s.doc, Path: req.URL.Path, Method: req.Method, Operation: op}, nil
}

func TestOpenAPIDocumentIsServed(t *testing.T) {
	e := newEnv(t)
	s := loadOpenAPI(t)
	// No key: a client reads the document before it has one.
	r := e.do("GET", "/v1/openapi.json", nil, "Authorization", "")
	if r.status != http.StatusOK {
		t.Fatalf("GET /v1/openapi.json: %d %s", r.status, r.raw)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	if !bytes.Equal(r.raw, s.raw) {
		t.Errorf("the served document is not %s", openAPIFile)
	}
	doc, err := parseOpenAPI(r.raw)
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
	s := loadOpenAPI(t)
	registered := registeredRoutes(t)
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
	for path, item := range s.doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	slices.Sort(documented)
	for _, r := range registered {
		if !slices.Contains(documented, r) {
			t.Errorf("%s is served but not in %s", r, openAPIFile)
		}
	}
	for _, d := range documented {
		if !slices.Contains(registered, d) {
			t.Errorf("%s is in %s but not served", d, openAPIFile)
		}
	}

	// The registrations read from the source are the ones the router has: without a key,
	// a route answers 401 (or 200 where it needs none), never the router's own 404 or 405.
	e := newEnv(t)
	for _, r := range registered {
		method, path, _ := strings.Cut(r, " ")
		path = strings.ReplaceAll(path, "{id}", "0195f3a2-6b1c-7cde-8f00-123456789abc")
		res := e.do(method, path, nil, "Authorization", "")
		if res.status != http.StatusUnauthorized && res.status != http.StatusOK {
			t.Errorf("%s: %s %s answers %d without a key: %s", r, method, path, res.status, res.raw)
		}
	}
}

// routerMethods are the registering methods of httprouter.Router: the methods named
// after HTTP methods take the path first, the others the method and then the path.
var routerMethods = map[string]bool{
	"Handler": true, "Handle": true, "HandlerFunc": true,
	"GET": false, "HEAD": false, "POST": false, "PUT": false, "PATCH": false, "DELETE": false, "OPTIONS": false,
}

// registeredRoutes reads every route registration in the server's source, the
// dashboard's package (which routes.go mounts) included, as "METHOD /path/{param}". A
// registration whose method or path is not a constant cannot be checked, so it fails
// the test rather than go unseen.
func registeredRoutes(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob("dashboard/*.go")
	if err != nil {
		t.Fatal(err)
	}
	return routesIn(t, append(files, pages...))
}

// routesIn reads the route registrations of the files that are not tests.
func routesIn(t *testing.T, files []string) []string {
	t.Helper()
	fset := token.NewFileSet()
	var out []string
	for _, name := range files {
		// router.go hands the routes written elsewhere to httprouter.
		if strings.HasSuffix(name, "_test.go") || name == "router.go" {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			takesMethod, isRouter := routerMethods[sel.Sel.Name]
			if !isRouter {
				return true
			}
			method, pathArg := sel.Sel.Name, 0
			if takesMethod {
				if len(call.Args) != 3 {
					return true // not httprouter's signature
				}
				method, pathArg = httpMethod(call.Args[0]), 1
			}
			path := stringLit(call.Args[pathArg])
			if method == "" || path == "" {
				t.Errorf("%s: a route registration whose method and path cannot be read", fset.Position(call.Pos()))
				return true
			}
			out = append(out, method+" "+openAPIPath(path))
			return true
		})
	}
	slices.Sort(out)
	return out
}

// httpMethod reads http.MethodGet or "GET".
func httpMethod(x ast.Expr) string {
	if sel, ok := x.(*ast.SelectorExpr); ok {
		if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "http" && strings.HasPrefix(sel.Sel.Name, "Method") {
			return strings.ToUpper(strings.TrimPrefix(sel.Sel.Name, "Method"))
		}
		return ""
	}
	return stringLit(x)
}

func stringLit(x ast.Expr) string {
	lit, ok := x.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return ""
	}
	s, err := strconv.Unquote(lit.Value)
	if err != nil {
		return ""
	}
	return s
}

// openAPIPath writes httprouter's /v1/tasks/:id as /v1/tasks/{id}.
func openAPIPath(p string) string {
	parts := strings.Split(p, "/")
	for i, part := range parts {
		if strings.HasPrefix(part, ":") || strings.HasPrefix(part, "*") {
			parts[i] = "{" + part[1:] + "}"
		}
	}
	return strings.Join(parts, "/")
}

// checkOpenAPIWebhook validates an event a test's webhook receiver got against the
// document's webhook: the headers, the body, and that the two name the same event.
func checkOpenAPIWebhook(t *testing.T, r *http.Request, body []byte) {
	t.Helper()
	s, err := openAPI()
	if err != nil {
		t.Errorf("%s: %v", openAPIFile, err)
		return
	}
	item := s.doc.Webhooks["taskEvent"]
	if item == nil || item.Post == nil {
		t.Errorf("OpenAPI: the document has no taskEvent webhook")
		return
	}
	ctx := context.Background()
	req := r.Clone(ctx)
	req.Body = io.NopCloser(bytes.NewReader(body))
	in := &openapi3filter.RequestValidationInput{
		Request: req,
		Route:   &routers.Route{Spec: s.doc, PathItem: item, Method: http.MethodPost, Path: r.URL.Path, Operation: item.Post},
		Options: &openapi3filter.Options{SkipSettingDefaults: true},
	}
	if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
		t.Errorf("OpenAPI: webhook %s: the event does not fit the document: %v\nbody: %.2000s", r.Header.Get("X-Service-Event"), err, body)
		return
	}
	var event struct{ Event string }
	if err := json.Unmarshal(body, &event); err != nil || event.Event != r.Header.Get("X-Service-Event") {
		t.Errorf("OpenAPI: webhook: X-Service-Event %q, body event %q (%v)", r.Header.Get("X-Service-Event"), event.Event, err)
	}
}
