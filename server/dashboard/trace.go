package dashboard

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/store"
)

// A task's page shows where its answer came from as the API says it: `provenance`
// (the source of each field of `data`) and `sources` (what each source was asked and
// what that came to), read from the very body GET /v1/tasks/:id answers.

// taskTrace is that part of a task's answer.
type taskTrace struct {
	// Fields are the non-null fields of the result with their source, in the
	// result's order; nil when the answer names no provenance.
	Fields []tracedField
	// Sources are the sources asked, in order; Asked is false when the answer has no
	// `sources` at all (a task settled before they were kept), and true with none when
	// the answer came from the store without asking any.
	Sources []enrich.SourceCall
	Asked   bool
}

// tracedField is one field of the result, its value as short text, and its source.
type tracedField struct {
	Name, Value, Source string
}

// maxTraceValue bounds a value shown beside its source: the JSON below has it whole.
const maxTraceValue = 80

// traceOf reads the provenance and the sources of t's answer, nil when it has neither.
func traceOf(t *store.Task) *taskTrace { return traceFrom(t.ObjectType, server.TaskAnswer(t)) }

// traceFrom reads them from answer, the body of GET /v1/tasks/:id of a task of
// objectType.
func traceFrom(objectType string, answer []byte) *taskTrace {
	var body struct {
		Data       map[string]json.RawMessage `json:"data"`
		Provenance map[string]string          `json:"provenance"`
		Sources    *[]enrich.SourceCall       `json:"sources"`
	}
	if json.Unmarshal(answer, &body) != nil || (body.Provenance == nil && body.Sources == nil) {
		return nil
	}
	tr := &taskTrace{Asked: body.Sources != nil}
	if tr.Asked {
		tr.Sources = *body.Sources
	}
	// The result's own order first, then any field this release does not know.
	names := slices.Clone(enrich.FieldsOf(objectType))
	var rest []string
	for name := range body.Provenance {
		if !slices.Contains(names, name) {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	for _, name := range append(names, rest...) {
		source, ok := body.Provenance[name]
		if !ok {
			continue
		}
		tr.Fields = append(tr.Fields, tracedField{Name: name, Value: shortValue(body.Data[name]), Source: source})
	}
	return tr
}

// shortValue words a field's JSON value in a line: a string as itself, a list by its
// length, anything else as its JSON, clipped.
func shortValue(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return ""
	}
	var s string
	switch v := v.(type) {
	case string:
		s = v
	case []any:
		s = plural(len(v), "item", "items")
	default:
		s = string(raw)
	}
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > maxTraceValue {
		s = string([]rune(s)[:maxTraceValue-1]) + "…"
	}
	return s
}
