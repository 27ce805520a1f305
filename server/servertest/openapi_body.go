package servertest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// A JSON response body is checked against its schema, compiled once for the test
// binary (the document is read once, by OpenAPI). kin-openapi's validator of an OpenAPI 3.1 document compiles
// the schema again for every response it checks, which was a fifth of the CPU of the
// server package's tests; the schema, the JSON Schema 2020-12 rules and the formats
// enforced (kin-openapi's: date, date-time, byte, int32, int64) are the same.

// bodySchemas holds the compiled schemas, by their JSON pointer in the document.
var bodySchemas struct {
	mu       sync.Mutex
	compiler *jsonschema.Compiler
	compiled map[string]*jsonschema.Schema
}

// docURL names the document as a resource of the compiler.
const docURL = "urn:enrichd:openapi.json"

// jsonBody reports whether a response of this media type is checked by
// checkJSONBody; any other is left to kin-openapi's decoders.
func jsonBody(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// errNoPointer is checkJSONBody's when the schema is not found in the document by a
// pointer: kin-openapi checks the body instead.
var errNoPointer = errors.New("the body's schema has no place in the document")

// checkJSONBody validates body, a response to route with status and header, against
// the schema the document gives it. It returns nil where the document declares no
// schema for the status or the media type (kin-openapi then lets any body through).
func (s *OpenAPISpec) checkJSONBody(route *routers.Route, status int, header http.Header, body []byte) error {
	responses := route.Operation.Responses
	ref := responses.Status(status)
	if ref == nil {
		ref = responses.Default()
	}
	if ref == nil || ref.Value == nil || len(ref.Value.Content) == 0 {
		return nil
	}
	mediaType := ref.Value.Content.Get(header.Get("Content-Type"))
	if mediaType == nil {
		return fmt.Errorf("the document gives no body of type %q", header.Get("Content-Type"))
	}
	if mediaType.Schema == nil {
		return nil
	}
	pointer := bodySchemaPointer(route, ref, mediaType)
	if pointer == "" {
		return errNoPointer
	}
	schema, err := s.compiledSchema(pointer)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var value any
	if err := dec.Decode(&value); err != nil {
		return fmt.Errorf("the body is not JSON: %w", err)
	}
	if dec.More() {
		return fmt.Errorf("the body holds more than one JSON value")
	}
	if err := schema.Validate(value); err != nil {
		return fmt.Errorf("the body does not fit %s: %w", pointer, err)
	}
	return nil
}

// bodySchemaPointer is the JSON pointer, in the document, of the schema of the
// response ref in mediaType to route's operation: where it is written (the keys of the
// document's maps whose values kin-openapi picked), so that keywords beside a $ref
// count too; else, for a route the tests make up for a path or a method the document
// does not have (whose answers are all components), the schema's own reference. It
// is "" when neither is known.
func bodySchemaPointer(route *routers.Route, ref *openapi3.ResponseRef, mediaType *openapi3.MediaType) string {
	if p := writtenAt(route, ref, mediaType); p != "" {
		return p
	}
	if strings.HasPrefix(mediaType.Schema.Ref, "#/") {
		return mediaType.Schema.Ref
	}
	return ""
}

// writtenAt is where the schema is written: under the response component ref names,
// or under route's operation.
func writtenAt(route *routers.Route, ref *openapi3.ResponseRef, mediaType *openapi3.MediaType) string {
	media := ""
	for k, v := range ref.Value.Content {
		if v == mediaType {
			media = k
		}
	}
	esc := strings.NewReplacer("~", "~0", "/", "~1").Replace
	if strings.HasPrefix(ref.Ref, "#/") && media != "" {
		return ref.Ref + "/content/" + esc(media) + "/schema"
	}
	status := ""
	for k, v := range route.Operation.Responses.Map() {
		if v == ref {
			status = k
		}
	}
	item := route.Spec.Paths.Value(route.Path)
	if status == "" || media == "" || item == nil || item.GetOperation(route.Method) != route.Operation {
		return ""
	}
	return "#/paths/" + esc(route.Path) + "/" + strings.ToLower(route.Method) + "/responses/" + esc(status) +
		"/content/" + esc(media) + "/schema"
}

// compiledSchema compiles the schema at pointer once.
func (s *OpenAPISpec) compiledSchema(pointer string) (*jsonschema.Schema, error) {
	c := &bodySchemas
	c.mu.Lock()
	defer c.mu.Unlock()
	if sch, ok := c.compiled[pointer]; ok {
		return sch, nil
	}
	if c.compiler == nil {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(s.Raw))
		if err != nil {
			return nil, err
		}
		compiler := jsonschema.NewCompiler()
		compiler.DefaultDraft(jsonschema.Draft2020)
		if err := compiler.AddResource(docURL, doc); err != nil {
			return nil, err
		}
		for _, name := range documentFormats(doc) {
			compiler.RegisterFormat(&jsonschema.Format{Name: name, Validate: kinFormat(name)})
		}
		compiler.AssertFormat()
		c.compiler, c.compiled = compiler, map[string]*jsonschema.Schema{}
	}
	sch, err := c.compiler.Compile(docURL + pointer)
	if err != nil {
		return nil, fmt.Errorf("compiling %s: %w", pointer, err)
	}
	c.compiled[pointer] = sch
	return sch, nil
}

// documentFormats lists every format the document names.
func documentFormats(node any) []string {
	seen := map[string]bool{}
	var walk func(any)
	walk = func(node any) {
		switch node := node.(type) {
		case map[string]any:
			if f, ok := node["format"].(string); ok && f != "" {
				seen[f] = true
			}
			for _, v := range node {
				walk(v)
			}
		case []any:
			for _, v := range node {
				walk(v)
			}
		}
	}
	walk(node)
	var names []string
	for f := range seen {
		names = append(names, f)
	}
	return names
}

// kinFormat checks a value of format name as kin-openapi does: the formats it defines
// (openapi3.SchemaStringFormats and the number and integer ones) are enforced, any
// other passes.
func kinFormat(name string) func(any) error {
	return func(v any) error {
		switch v := v.(type) {
		case string:
			if f, ok := openapi3.SchemaStringFormats[name]; ok {
				return f.Validate(v)
			}
		case json.Number:
			if i, err := v.Int64(); err == nil {
				if f, ok := openapi3.SchemaIntegerFormats[name]; ok {
					return f.Validate(i)
				}
			}
			if x, err := v.Float64(); err == nil {
				if f, ok := openapi3.SchemaNumberFormats[name]; ok {
					return f.Validate(x)
				}
			}
		}
		return nil
	}
}
