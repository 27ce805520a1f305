package servertest

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
	"runtime"
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

// ServerDir is the directory of package server's source, found from this file's own
// path, so that the tests of any package read the same files (the OpenAPI document,
// routes.go, the route registrations).
var ServerDir = func() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "..")
}()

// OpenAPIFile is the document the server embeds and serves.
var OpenAPIFile = filepath.Join(ServerDir, "openapi.json")

type OpenAPISpec struct {
	Raw    []byte
	Doc    *openapi3.T
	router routers.Router
	err    error
}

var specOnce sync.Once

var spec OpenAPISpec

// OpenAPI is loadOpenAPI for callers that may run outside the test's goroutine, where
// t.Fatal must not be called.
func OpenAPI() (*OpenAPISpec, error) {
	specOnce.Do(func() {
		// A batch is uploaded, and its results downloaded, as CSV or JSON Lines: text to
		// the document. (kin-openapi's own CSV decoder refuses rows of another width
		// than the header's, which an upload with on_error=skip may have.)
		for _, text := range []string{"text/csv", "application/x-ndjson", "application/jsonl", "application/x-jsonlines", "application/json-lines"} {
			openapi3filter.RegisterBodyDecoder(text, openapi3filter.PlainBodyDecoder)
		}
		spec.Raw, spec.err = os.ReadFile(OpenAPIFile)
		if spec.err != nil {
			return
		}
		spec.Doc, spec.err = ParseOpenAPI(spec.Raw)
		if spec.err != nil {
			return
		}
		// The document's server is "/", the enrichd serving it; the tests' server listens
		// on a port of its own, so the routes are matched on the path alone.
		routed := *spec.Doc
		routed.Servers = nil
		spec.router, spec.err = legacy.NewRouter(&routed)
	})
	return &spec, spec.err
}

// ParseOpenAPI loads a document and checks it against the OpenAPI rules of its version.
func ParseOpenAPI(raw []byte) (*openapi3.T, error) {
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
func (e *Env) checkOpenAPI(req *http.Request, reqBody []byte, res *Response) {
	e.T.Helper()
	s, err := OpenAPI()
	if err != nil {
		e.T.Errorf("%s: %v", OpenAPIFile, err)
		return
	}
	ctx := context.Background()
	req = req.Clone(ctx)
	req.Body = io.NopCloser(bytes.NewReader(reqBody))
	where := fmt.Sprintf("%s %s -> %d", req.Method, req.URL.RequestURI(), res.Status)

	route, params, err := s.findRoute(req)
	if err != nil {
		// No operation: the server must answer as the document says it answers a path
		// it does not have (404) or a method a path does not have (405).
		route, err = s.unmatched(req, res.Status)
		if err != nil {
			e.T.Errorf("OpenAPI: %s: %v", where, err)
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
	if res.Status/100 == 2 {
		if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
			e.T.Errorf("OpenAPI: %s: the server accepted a request the document refuses: %v", where, err)
		}
	}
	// kin-openapi checks the status and the headers, and any body but JSON, which
	// checkJSONBody checks against a schema compiled once.
	validate := func(body bool) error {
		out := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: in, Status: res.Status, Header: res.Header,
			Body:    io.NopCloser(bytes.NewReader(res.Raw)),
			Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true, ExcludeResponseBody: !body},
		}
		return openapi3filter.ValidateResponse(ctx, out)
	}
	ownBody := jsonBody(res.Header.Get("Content-Type")) && req.Method != http.MethodHead
	err = validate(!ownBody)
	if err == nil && ownBody {
		err = s.checkJSONBody(route, res.Status, res.Header, res.Raw)
		if errors.Is(err, errNoPointer) {
			err = validate(true)
		}
	}
	if err != nil {
		e.T.Errorf("OpenAPI: %s: the response does not fit the document: %v\nbody: %.2000s", where, err, res.Raw)
		return
	}
	// ValidateResponse lets any body through where the document declares none.
	if r := route.Operation.Responses.Status(res.Status); r != nil && len(r.Value.Content) == 0 && len(res.Raw) > 0 {
		e.T.Errorf("OpenAPI: %s: the document declares no body, the server sent %q", where, res.Raw)
	}
}

// findRoute is the operation of the document that answers req, if any. The router
// matches a path's shape, as the server's router does, and an {id} that is no uuid is
// still the operation's to answer (404, or 401 without a key), but for a path that is
// exactly another operation's: /v1/watches/import is not GET /v1/watches/{id}. An
// empty parameter matches nothing (/v1/loops is not PATCH /v1/loops/{id}).
func (s *OpenAPISpec) findRoute(req *http.Request) (*routers.Route, map[string]string, error) {
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
func (s *OpenAPISpec) exactRoute(req *http.Request) (*routers.Route, map[string]string, error) {
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
func (s *OpenAPISpec) methodNotAllowed() *openapi3.ResponseRef {
	code := openapi3.NewStringSchema()
	code.Enum = []any{"method_not_allowed"}
	body := openapi3.NewAllOfSchema(s.Doc.Components.Schemas["Error"].Value,
		&openapi3.Schema{Required: []string{"code"}, Properties: openapi3.Schemas{"code": code.NewRef()}})
	res := openapi3.NewResponse().WithDescription("The path does not answer this method.").WithJSONSchema(body)
	res.Headers = openapi3.Headers{
		"X-Request-Id": s.Doc.Components.Headers["XRequestId"],
		"Allow":        &openapi3.HeaderRef{Value: &openapi3.Header{Parameter: openapi3.Parameter{Required: true, Schema: openapi3.NewStringSchema().NewRef()}}},
	}
	return &openapi3.ResponseRef{Value: res}
}

// unmatched is the operation of a request no operation of the document matches: 404
// where the document has no such path, 405 where it has the path with other methods,
// and 429 for either, as the per-address rate limit comes first.
func (s *OpenAPISpec) unmatched(req *http.Request, status int) (*routers.Route, error) {
	pathKnown := false
	for _, m := range methods {
		other := req.Clone(req.Context())
		other.Method = m
		if _, _, err := s.exactRoute(other); err == nil {
			pathKnown = true
		}
	}
	want, answer := http.StatusNotFound, s.Doc.Components.Responses["NotFound"]
	if pathKnown {
		want, answer = http.StatusMethodNotAllowed, s.methodNotAllowed()
	}
	if status != want && status != http.StatusTooManyRequests {
		return nil, fmt.Errorf("the document has no such operation and says the answer is %d, not %d", want, status)
	}
	op := openapi3.NewOperation()
	op.Responses = openapi3.NewResponses(
		openapi3.WithStatus(want, answer),
		openapi3.WithStatus(http.StatusTooManyRequests, s.Doc.Components.Responses["TooManyRequests"]),
	)
	return &routers.Route{Spec: s.Doc, Path: req.URL.Path, Method: req.Method, Operation: op}, nil
}

// routerMethods are the registering methods of httprouter.Router: the methods named
// after HTTP methods take the path first, the others the method and then the path.
var routerMethods = map[string]bool{
	"Handler": true, "Handle": true, "HandlerFunc": true,
	"GET": false, "HEAD": false, "POST": false, "PUT": false, "PATCH": false, "DELETE": false, "OPTIONS": false,
}

// RegisteredRoutes reads every route registration in the server's source, the
// dashboard's package (which routes.go mounts) included, as "METHOD /path/{param}". A
// registration whose method or path is not a constant cannot be checked, so it fails
// the test rather than go unseen.
func RegisteredRoutes(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(ServerDir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob(filepath.Join(ServerDir, "dashboard", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	return RoutesIn(t, append(files, pages...))
}

// RoutesIn reads the route registrations of the files that are not tests.
func RoutesIn(t *testing.T, files []string) []string {
	t.Helper()
	fset := token.NewFileSet()
	var out []string
	for _, name := range files {
		// router.go hands the routes written elsewhere to httprouter.
		if strings.HasSuffix(name, "_test.go") || filepath.Base(name) == "router.go" {
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
			out = append(out, method+" "+OpenAPIPath(path))
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

// OpenAPIPath writes httprouter's /v1/tasks/:id as /v1/tasks/{id}.
func OpenAPIPath(p string) string {
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
	s, err := OpenAPI()
	if err != nil {
		t.Errorf("%s: %v", OpenAPIFile, err)
		return
	}
	item := s.Doc.Webhooks["taskEvent"]
	if item == nil || item.Post == nil {
		t.Errorf("OpenAPI: the document has no taskEvent webhook")
		return
	}
	ctx := context.Background()
	req := r.Clone(ctx)
	req.Body = io.NopCloser(bytes.NewReader(body))
	in := &openapi3filter.RequestValidationInput{
		Request: req,
		Route:   &routers.Route{Spec: s.Doc, PathItem: item, Method: http.MethodPost, Path: r.URL.Path, Operation: item.Post},
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
