package server_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// httpMethods are the keys of a path item that are operations.
var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// TestTheDocumentSaysWhatLintersAndTypeGeneratorsNeed holds the document to what
// linters (Spectral's and Redocly's recommended rules) and type generators read: every
// operation, of the paths and of the webhooks, has a description; info has a contact
// and a license; and no schema of a request or a parameter has a `default`, since
// openapi-typescript at its default settings makes such a field required, so a valid
// request that leaves it out fails to type-check. Defaults are stated in the field's
// description instead.
func TestTheDocumentSaysWhatLintersAndTypeGeneratorsNeed(t *testing.T) {
	s := loadOpenAPI(t)
	var doc map[string]any
	if err := json.Unmarshal(s.raw, &doc); err != nil {
		t.Fatal(err)
	}
	info, _ := doc["info"].(map[string]any)
	for _, field := range []string{"contact", "license"} {
		if obj, _ := info[field].(map[string]any); len(obj) == 0 {
			t.Errorf("info has no %s", field)
		}
	}
	if license, _ := info["license"].(map[string]any); license != nil && license["name"] == nil {
		t.Error("info.license has no name")
	}

	resolve := func(ref string) any {
		var at any = doc
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
			m, _ := at.(map[string]any)
			at = m[part]
		}
		if at == nil {
			t.Errorf("%s resolves to nothing", ref)
		}
		return at
	}
	seen := map[string]bool{}
	// noDefault walks a schema and every schema in it, $refs followed once each.
	var noDefault func(where string, schema any)
	noDefault = func(where string, schema any) {
		m, _ := schema.(map[string]any)
		if m == nil {
			return
		}
		if ref, ok := m["$ref"].(string); ok {
			if !seen[ref] {
				seen[ref] = true
				noDefault(ref, resolve(ref))
			}
		}
		if _, ok := m["default"]; ok {
			t.Errorf("%s: a request schema has a default (%v): say it in the description instead", where, m["default"])
		}
		for _, key := range []string{"properties", "patternProperties", "$defs"} {
			props, _ := m[key].(map[string]any)
			for name, sub := range props {
				noDefault(where+"/"+key+"/"+name, sub)
			}
		}
		for _, key := range []string{"items", "additionalProperties", "not", "contains", "if", "then", "else"} {
			noDefault(where+"/"+key, m[key])
		}
		for _, key := range []string{"oneOf", "anyOf", "allOf", "prefixItems"} {
			list, _ := m[key].([]any)
			for i, sub := range list {
				noDefault(fmt.Sprintf("%s/%s/%d", where, key, i), sub)
			}
		}
	}
	// deref returns the object a $ref names, or obj itself.
	deref := func(obj any) map[string]any {
		m, _ := obj.(map[string]any)
		if ref, ok := m["$ref"].(string); ok {
			m, _ = resolve(ref).(map[string]any)
		}
		return m
	}

	operations := 0
	for _, group := range []string{"paths", "webhooks"} {
		items, _ := doc[group].(map[string]any)
		for path, item := range items {
			item := deref(item)
			for _, method := range httpMethods {
				op, ok := item[method].(map[string]any)
				if !ok {
					continue
				}
				operations++
				where := group + " " + strings.ToUpper(method) + " " + path
				if d, _ := op["description"].(string); strings.TrimSpace(d) == "" {
					t.Errorf("%s has no description", where)
				}
				params, _ := op["parameters"].([]any)
				if common, _ := item["parameters"].([]any); common != nil {
					params = append(params, common...)
				}
				for _, p := range params {
					p := deref(p)
					noDefault(fmt.Sprintf("%s parameter %v", where, p["name"]), p["schema"])
				}
				if body := deref(op["requestBody"]); body != nil {
					content, _ := body["content"].(map[string]any)
					for mediaType, media := range content {
						media, _ := media.(map[string]any)
						noDefault(where+" body "+mediaType, media["schema"])
					}
				}
			}
		}
	}
	if operations < 20 {
		t.Fatalf("only %d operations found: the walk is broken", operations)
	}
}
