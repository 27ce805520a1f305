package dashboard

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"

	"enrichd/enrich"
	"enrichd/store"
)

// A task's page shows where its answer came from as the API says it: `provenance`
// (the source of each field of `data`) and `sources` (what each source was asked and
// what that came to), the JSON the task keeps for GET /v1/tasks/{id}.

// taskTrace is that part of a task.
type taskTrace struct {
	// Fields are the non-null fields of the result with their source, in the
	// result's order; nil when the task keeps no provenance.
	Fields []tracedField
	// Sources are the sources asked, in order; Asked is false when the task keeps no
	// `sources` at all (not run yet, or settled before they were kept), and true with
	// none when the answer came from the store without asking any.
	Sources []enrich.SourceCall
	Asked   bool
}

// tracedField is one field of the result, its value as short text, and its source.
type tracedField struct {
	Name, Value, Source string
}

// maxTraceValue bounds a value shown beside its source: the JSON below has it whole.
const maxTraceValue = 80

// traceOf reads the provenance and the sources t keeps, nil when it keeps neither (a
// task not run yet, or settled before they were kept). Provenance is that of the
// data, so only a succeeded task's is read.
func traceOf(t *store.Task) *taskTrace {
	var data map[string]json.RawMessage
	var provenance map[string]string
	var sources *[]enrich.SourceCall
	if t.Status == store.StatusSucceeded && len(t.Provenance) > 0 {
		if json.Unmarshal(t.Data, &data) != nil || json.Unmarshal(t.Provenance, &provenance) != nil {
			provenance = nil
		}
	}
	if len(t.Sources) > 0 && json.Unmarshal(t.Sources, &sources) != nil {
		sources = nil
	}
	if len(provenance) == 0 && sources == nil {
		return nil
	}
	tr := &taskTrace{Asked: sources != nil}
	if tr.Asked {
		tr.Sources = *sources
	}
	// The result's own order first, then any field this release does not know.
	names := slices.Clone(enrich.FieldsOf(t.ObjectType))
	var rest []string
	for name := range provenance {
		if !slices.Contains(names, name) {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	for _, name := range append(names, rest...) {
		if source, ok := provenance[name]; ok {
			tr.Fields = append(tr.Fields, tracedField{Name: name, Value: shortValue(data[name]), Source: source})
		}
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
