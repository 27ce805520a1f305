// Package watch holds the pure rules of watches: what changed between two results of
// the same company or person (Diff, JobChanged), and when a watch is due (FirstRun,
// NextRun, NextMonth). It knows no SQL and no HTTP; store and server call it.
package watch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"enrichd/enrich"
)

// Change is one path whose value differs between two results. Before is null for
// what was added, After null for what was removed.
type Change struct {
	Path   string          `json:"path"`
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
}

// volatile are the top-level fields that differ on every fetch, or belong to how a
// record was looked up rather than to the record: comparing them would report a change
// every time.
var volatile = map[string]bool{
	"enrichment_status": true,
	"last_enriched_at":  true,
	"created_at":        true,
	"updated_at":        true,
	"email_match":       true,
	"redirect":          true,
}

// maxDepth bounds the recursion into nested objects and arrays; a record is a few
// levels deep, and anything deeper is compared as a whole.
const maxDepth = 16

var null = json.RawMessage("null")

// Diff compares two results of objectType (a Company's or a Person's JSON) restricted
// to the top-level fields (nil: every field), ignoring the volatile ones. Objects are
// compared field by field ("headquarters.city"); arrays of objects item by item,
// matched by identity rather than position (see identity: "positions[<id>].title");
// arrays of scalars as sets ("domains[+x]" added, "domains[-x]" removed). A field
// absent on one side is the same as null. The changes are sorted by path.
func Diff(objectType string, before, after json.RawMessage, fields []string) ([]Change, error) {
	if objectType != enrich.ObjectCompany && objectType != enrich.ObjectPerson {
		return nil, fmt.Errorf("object type %q is neither company nor person", objectType)
	}
	a, err := decodeObject(before)
	if err != nil {
		return nil, fmt.Errorf("the earlier result: %w", err)
	}
	b, err := decodeObject(after)
	if err != nil {
		return nil, fmt.Errorf("the new result: %w", err)
	}
	var keep map[string]bool
	if fields != nil {
		keep = make(map[string]bool, len(fields))
		for _, f := range fields {
			keep[f] = true
		}
	}
	for _, m := range []map[string]any{a, b} {
		for k := range m {
			if volatile[k] || (keep != nil && !keep[k]) {
				delete(m, k)
			}
		}
	}
	d := differ{}
	d.object("", a, b, 0)
	sort.Slice(d.changes, func(i, j int) bool { return d.changes[i].Path < d.changes[j].Path })
	return d.changes, nil
}

// decodeObject reads a JSON object, numbers kept as written; null or nothing is an
// empty object.
func decodeObject(raw json.RawMessage) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, null) {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}

type differ struct {
	changes []Change
}

func (d *differ) add(path string, before, after any) {
	d.changes = append(d.changes, Change{Path: path, Before: canonical(before), After: canonical(after)})
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func (d *differ) object(path string, a, b map[string]any, depth int) {
	keys := make(map[string]bool, len(a)+len(b))
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	for k := range keys {
		d.value(join(path, k), a[k], b[k], depth+1)
	}
}

func (d *differ) value(path string, a, b any, depth int) {
	if depth < maxDepth {
		switch av := a.(type) {
		case map[string]any:
			if bv, ok := b.(map[string]any); ok {
				d.object(path, av, bv, depth)
				return
			}
		case []any:
			if bv, ok := b.([]any); ok {
				d.array(path, av, bv, depth)
				return
			}
		}
	}
	if !bytes.Equal(canonical(a), canonical(b)) {
		d.add(path, a, b)
	}
}

// array compares two arrays: as sets when they hold scalars only, item by item
// matched by identity when they hold objects.
func (d *differ) array(path string, a, b []any, depth int) {
	if scalars(a) && scalars(b) {
		inA, inB := set(a), set(b)
		for k, v := range inA {
			if _, ok := inB[k]; !ok {
				d.add(path+"[-"+k+"]", v, nil)
			}
		}
		for k, v := range inB {
			if _, ok := inA[k]; !ok {
				d.add(path+"[+"+k+"]", nil, v)
			}
		}
		return
	}
	byA, byB := identities(a), identities(b)
	for id, av := range byA {
		p := path + "[" + id + "]"
		if bv, ok := byB[id]; ok {
			d.value(p, av, bv, depth+1)
		} else {
			d.add(p, av, nil)
		}
	}
	for id, bv := range byB {
		if _, ok := byA[id]; !ok {
			d.add(path+"["+id+"]", nil, bv)
		}
	}
}

func scalars(items []any) bool {
	for _, v := range items {
		switch v.(type) {
		case map[string]any, []any:
			return false
		}
	}
	return true
}

// set is the distinct items of a scalar array by how they appear in a path: a
// string as it is, anything else as its JSON.
func set(items []any) map[string]any {
	out := make(map[string]any, len(items))
	for _, v := range items {
		out[scalarKey(v)] = v
	}
	return out
}

func scalarKey(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return string(canonical(v))
}

// identities keys each item of an array by its identity; a second item of the same
// identity gets "#2", a third "#3", in the order they come.
func identities(items []any) map[string]any {
	out := make(map[string]any, len(items))
	seen := map[string]int{}
	for _, v := range items {
		id := identity(v)
		seen[id]++
		if n := seen[id]; n > 1 {
			id = fmt.Sprintf("%s#%d", id, n)
		}
		out[id] = v
	}
	return out
}

// identity is what names an array item across two fetches, whatever its position: a
// position (or any object like one) by its company's network page, else its company's
// name in lower case, else its own page or name, with "@" and its start date when it
// has one, since a person may hold two roles at one company in turn. An item with none
// of these is named by its whole JSON, so that any change to it reads as one removed
// and one added.
func identity(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return string(canonical(v))
	}
	id := ""
	for _, field := range []struct {
		name  string
		lower bool
	}{{"company_network_url", false}, {"company_name", true}, {"network_url", false}, {"name", true}} {
		if s, ok := m[field.name].(string); ok && strings.TrimSpace(s) != "" {
			id = strings.TrimSpace(s)
			if field.lower {
				id = strings.ToLower(id)
			}
			break
		}
	}
	if id == "" {
		return string(canonical(v))
	}
	if start, ok := m["start_date"].(string); ok && start != "" {
		id += "@" + start
	}
	return id
}

// canonical is v's JSON with object keys sorted and nothing escaped for HTML: the same
// value always gives the same bytes. nil is null.
func canonical(v any) json.RawMessage {
	if v == nil {
		return null
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return null // decoded JSON always encodes
	}
	return json.RawMessage(bytes.TrimRight(buf.Bytes(), "\n"))
}

// Employer is where a person currently works, as a job_changed event names it.
type Employer struct {
	CompanyName       *string `json:"company_name"`
	CompanyNetworkURL *string `json:"company_network_url"`
	Title             *string `json:"title"`
}

// CurrentEmployer is the employer of a person's current position (is_current; the
// latest start_date among several, the first listed among equals), or nil when the
// person has none or the JSON is not a person's.
func CurrentEmployer(person json.RawMessage) *Employer {
	if cur := currentEmployers(person); len(cur) > 0 {
		return &cur[0]
	}
	return nil
}

// currentEmployers are the employers of a person's current positions, the latest
// started first (the first listed among equals).
func currentEmployers(person json.RawMessage) []Employer {
	var p struct {
		Positions []enrich.Position `json:"positions"`
	}
	if len(bytes.TrimSpace(person)) == 0 || json.Unmarshal(person, &p) != nil {
		return nil
	}
	var cur []*enrich.Position
	for i := range p.Positions {
		if p.Positions[i].IsCurrent {
			cur = append(cur, &p.Positions[i])
		}
	}
	slices.SortStableFunc(cur, func(a, b *enrich.Position) int { return strings.Compare(startDate(b), startDate(a)) })
	out := make([]Employer, len(cur))
	for i, pos := range cur {
		out[i] = Employer{CompanyName: pos.CompanyName, CompanyNetworkURL: pos.CompanyNetworkURL, Title: pos.Title}
	}
	return out
}

func startDate(p *enrich.Position) string {
	if p.StartDate == nil {
		return ""
	}
	return *p.StartDate
}

// JobChanged compares the current employers of two results of a person, as sets
// (their order in the list, and titles, do not matter): a job changed when an
// employer current before is no longer current, or when a person with none has one
// now. from is the employer left (the latest started, if several), to the employer
// current after that was not before (the latest started), else the one they stay
// with, else nil; without a change, each side's CurrentEmployer. Taking on a further
// role while keeping the job, a board seat or an advisory role, is no job change: the
// watch sends record.changed for it.
func JobChanged(before, after json.RawMessage) (from, to *Employer, changed bool) {
	olds, news := currentEmployers(before), currentEmployers(after)
	held := func(set []Employer, e Employer) bool {
		return slices.ContainsFunc(set, func(o Employer) bool { return sameEmployer(&o, &e) })
	}
	for i := range olds {
		if !held(news, olds[i]) {
			from = &olds[i]
			break
		}
	}
	if from == nil && (len(olds) > 0 || len(news) == 0) {
		return CurrentEmployer(before), CurrentEmployer(after), false // no change: who they were and are with
	}
	for i := range news {
		if !held(olds, news[i]) {
			return from, &news[i], true
		}
	}
	if len(news) > 0 {
		to = &news[0]
	}
	return from, to, true
}

func sameEmployer(a, b *Employer) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if a.CompanyNetworkURL != nil && b.CompanyNetworkURL != nil {
		return *a.CompanyNetworkURL == *b.CompanyNetworkURL
	}
	return lowerName(a.CompanyName) == lowerName(b.CompanyName)
}

func lowerName(s *string) string {
	if s == nil {
		return ""
	}
	return strings.ToLower(strings.TrimSpace(*s))
}

// KnownFields are the top-level fields of a company's or a person's result a watch may
// restrict itself to: every field of enrich.Company or enrich.Person but the volatile
// ones, which Diff never compares. nil for another object type.
func KnownFields(objectType string) []string {
	var t reflect.Type
	switch objectType {
	case enrich.ObjectCompany:
		t = reflect.TypeFor[enrich.Company]()
	case enrich.ObjectPerson:
		t = reflect.TypeFor[enrich.Person]()
	default:
		return nil
	}
	var out []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" && !volatile[name] {
			out = append(out, name)
		}
	}
	return out
}
