package server_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// openAPIFile is the document the server embeds and serves.
const openAPIFile = "openapi.json"

type openAPISpec struct {
	raw []byte
	doc *openapi3.T
	err error
}

var (
	specOnce sync.Once
	spec     openAPISpec
)

// loadOpenAPI parses and validates the document once for the whole test binary.
func loadOpenAPI(t testing.TB) *openAPISpec {
	t.Helper()
	specOnce.Do(func() {
		spec.raw, spec.err = os.ReadFile(openAPIFile)
		if spec.err != nil {
			return
		}
		spec.doc, spec.err = parseOpenAPI(spec.raw)
	})
	if spec.err != nil {
		t.Fatalf("%s: %v", openAPIFile, spec.err)
	}
	return &spec
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
