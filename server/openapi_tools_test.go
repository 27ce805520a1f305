package server_test

import (
	"encoding/json"
	"fmt"
	"os"
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
	t.Parallel()
	s := loadOpenAPI(t)
	var doc map[string]any
	if err := json.Unmarshal(s.Raw, &doc); err != nil {
		t.Fatal(err)
	}
	info, _ := doc["info"].(map[string]any)
	for _, field := range []string{"contact", "license"} {
		if obj, _ := info[field].(map[string]any); len(obj) == 0 {
			t.Errorf("info has no %s", field)
		}
	}
	// The license is the repository's LICENSE, Apache-2.0, by its SPDX identifier.
	if license, _ := info["license"].(map[string]any); license["name"] != "Apache-2.0" || license["identifier"] != "Apache-2.0" {
		t.Errorf("info.license is %v, not {name: Apache-2.0, identifier: Apache-2.0}", license)
	}
	text, err := os.ReadFile("../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Apache License\n                           Version 2.0, January 2004", "END OF TERMS AND CONDITIONS", "APPENDIX: How to apply the Apache License"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("LICENSE is not the Apache License 2.0's text: no %q", want)
		}
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

// TestTheDocumentKeepsTheLintersRules holds the document to the rules of Redocly's and
// Spectral's recommended sets that it once broke, without either tool (the tests run
// where npm is not): every property a schema requires is defined where Redocly looks
// for it (no-required-schema-properties-undefined), every component is referenced
// (no-unused-components, oas3-unused-component), and no object schema is open without
// saying so: a bare {"type": "object"} is Record<string, never> to openapi-typescript,
// a type no value fits, where additionalProperties: true (or the properties) says what
// it holds.
func TestTheDocumentKeepsTheLintersRules(t *testing.T) {
	t.Parallel()
	s := loadOpenAPI(t)
	var doc map[string]any
	if err := json.Unmarshal(s.Raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, problem := range lintProblems(doc) {
		t.Error(problem)
	}
}

// lintProblems walks a document for what TestTheDocumentKeepsTheLintersRules refuses.
func lintProblems(doc map[string]any) []string {
	var problems []string
	resolve := func(ref string) map[string]any {
		var at any = doc
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
			m, _ := at.(map[string]any)
			at = m[part]
		}
		m, _ := at.(map[string]any)
		return m
	}
	// defines reports whether schema defines property name as Redocly reads it: in its
	// properties, in one schema of its allOf, or in every schema of its anyOf or oneOf,
	// $refs followed.
	var defines func(schema map[string]any, name string, seen map[string]bool) bool
	defines = func(schema map[string]any, name string, seen map[string]bool) bool {
		if ref, ok := schema["$ref"].(string); ok {
			if seen[ref] {
				return false
			}
			seen[ref] = true
			return defines(resolve(ref), name, seen)
		}
		if props, ok := schema["properties"].(map[string]any); ok {
			if _, ok := props[name]; ok {
				return true
			}
		}
		if all, _ := schema["allOf"].([]any); len(all) > 0 {
			for _, sub := range all {
				if m, _ := sub.(map[string]any); m != nil && defines(m, name, seen) {
					return true
				}
			}
		}
		for _, key := range []string{"anyOf", "oneOf"} {
			list, _ := schema[key].([]any)
			if len(list) == 0 {
				continue
			}
			every := true
			for _, sub := range list {
				m, _ := sub.(map[string]any)
				if m == nil || !defines(m, name, map[string]bool{}) {
					every = false
				}
			}
			if every {
				return true
			}
		}
		return false
	}
	used := map[string]bool{}
	// walk visits every value; composedIn is the chain of schemas whose allOf, anyOf
	// or oneOf a schema is a member of, innermost last, whose properties it may rely on.
	var walk func(where string, v any, isSchema bool, composedIn []map[string]any)
	walk = func(where string, v any, isSchema bool, composedIn []map[string]any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				used[ref] = true
			}
			if isSchema {
				required, _ := v["required"].([]any)
				for _, r := range required {
					name, _ := r.(string)
					ok := defines(v, name, map[string]bool{})
					for _, parent := range composedIn {
						ok = ok || defines(parent, name, map[string]bool{})
					}
					if !ok {
						problems = append(problems, fmt.Sprintf("%s: required property %q is not defined", where, name))
					}
				}
				if isObjectType(v["type"]) && !hasAny(v, "properties", "additionalProperties", "patternProperties", "$ref", "allOf", "anyOf", "oneOf") {
					problems = append(problems, fmt.Sprintf("%s: an object schema with neither properties nor additionalProperties", where))
				}
			}
			for k, child := range v {
				childIsSchema, childComposed := schemaChild(isSchema, where, k), []map[string]any(nil)
				if isSchema && (k == "allOf" || k == "anyOf" || k == "oneOf") {
					childComposed = append(append([]map[string]any{}, composedIn...), v)
				}
				if list, ok := child.([]any); ok && childIsSchema {
					for i, sub := range list {
						walk(fmt.Sprintf("%s/%s/%d", where, k, i), sub, true, childComposed)
					}
					continue
				}
				walk(where+"/"+k, child, childIsSchema, nil)
			}
		case []any:
			for i, child := range v {
				walk(fmt.Sprintf("%s/%d", where, i), child, isSchema, nil)
			}
		}
	}
	walk("#", doc, false, nil)

	components, _ := doc["components"].(map[string]any)
	for kind, group := range components {
		if kind == "securitySchemes" {
			continue // named by security requirements, not by $ref
		}
		names, _ := group.(map[string]any)
		for name := range names {
			ref := "#/components/" + kind + "/" + name
			if !used[ref] {
				problems = append(problems, ref+" is never used")
			}
		}
	}
	return problems
}

// schemaChild reports whether the value at key of a value (a schema when isSchema) is a
// schema, or a list or map of schemas.
func schemaChild(isSchema bool, where, key string) bool {
	if isSchema {
		switch key {
		case "properties", "patternProperties", "$defs", "dependentSchemas":
			return false // a map of schemas: its values are schemas (see below)
		case "items", "additionalProperties", "not", "if", "then", "else", "contains",
			"propertyNames", "unevaluatedProperties", "unevaluatedItems", "allOf", "anyOf", "oneOf", "prefixItems":
			return true
		}
		return false
	}
	switch {
	case key == "schema":
		return true
	case strings.HasSuffix(where, "/components/schemas"):
		return true
	}
	for _, m := range []string{"/properties", "/patternProperties", "/$defs", "/dependentSchemas"} {
		if strings.HasSuffix(where, m) {
			return true
		}
	}
	return false
}

func isObjectType(t any) bool {
	switch t := t.(type) {
	case string:
		return t == "object"
	case []any:
		for _, x := range t {
			if x == "object" {
				return true
			}
		}
	}
	return false
}

func hasAny(m map[string]any, keys ...string) bool {
	for _, k := range keys {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}
