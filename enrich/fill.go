package enrich

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// bookkeeping are the top-level fields of Company and Person that say how a record was
// made rather than what the subject is: no source fills them, so no fill list names
// them.
var bookkeeping = []string{"enrichment_status", "created_at", "updated_at", "redirect", "last_enriched_at", "email_match"}

// CompanyFields and PersonFields are the fields a waterfall can fill: the top-level
// JSON names of Company and Person, in the order the result has them, less
// bookkeeping. They are read from the types so that a field added to a result is a
// field a fill list can name.
var (
	CompanyFields = dataFields(reflect.TypeFor[Company]())
	PersonFields  = dataFields(reflect.TypeFor[Person]())
)

func dataFields(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" && !slices.Contains(bookkeeping, name) {
			out = append(out, name)
		}
	}
	return out
}

// FieldsOf returns the fields a waterfall can fill for objectType (ObjectCompany or
// ObjectPerson), nil for any other.
func FieldsOf(objectType string) []string {
	switch objectType {
	case ObjectCompany:
		return CompanyFields
	case ObjectPerson:
		return PersonFields
	}
	return nil
}

// FillLists are the fields the waterfall tries to fill, per object type. An empty
// list asks for none: the first source that knows the subject gives the whole answer,
// and no other is asked.
type FillLists struct {
	Company []string `json:"company"`
	Person  []string `json:"person"`
}

// For returns the list for objectType (ObjectCompany or ObjectPerson), nil for any
// other.
func (f FillLists) For(objectType string) []string {
	switch objectType {
	case ObjectCompany:
		return f.Company
	case ObjectPerson:
		return f.Person
	}
	return nil
}

// maxFillList bounds the text ParseFields reads: far longer than every field named
// once, with spaces.
const maxFillList = 4 << 10

// ParseFields reads a comma-separated list of objectType's field names: each is
// trimmed, empties and repeats are dropped, and the first occurrence keeps its place.
// An empty list is nil. An unknown name is refused with the names that are known.
func ParseFields(objectType, list string) ([]string, error) {
	known := FieldsOf(objectType)
	if known == nil {
		return nil, &Error{Kind: KindInvalid, Code: CodeInvalidInput,
			Message: fmt.Sprintf("unknown object type %q (want %s or %s)", objectType, ObjectCompany, ObjectPerson)}
	}
	if len(list) > maxFillList {
		return nil, &Error{Kind: KindInvalid, Code: CodeInvalidInput,
			Message: fmt.Sprintf("the %s field list is too long (at most %d bytes)", objectType, maxFillList)}
	}
	var out []string
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" || slices.Contains(out, name) {
			continue
		}
		if !slices.Contains(known, name) {
			return nil, &Error{Kind: KindInvalid, Code: CodeInvalidInput,
				Message: fmt.Sprintf("unknown %s field %q (known: %s)", objectType, name, strings.Join(known, ", "))}
		}
		out = append(out, name)
	}
	return out, nil
}

// fillFound fills a person an email lookup found and confirmed with the task's person
// fields (t.Fill), as a profile lookup would: the sources not yet asked for the
// profile are asked in their order while a wanted field is still null, each filling
// only what is still null, its record used only for the same profile.
// Only a confirmed person is filled, so no vendor is paid for the fields of someone
// the address does not belong to.
//
// What the lookup already asked for the profile, and where each field came from, is
// the task's trace's (a retrieval through Enrich, or a direct match). A profile the
// lookup did not ask anyone for (held fresh, read as it is held) is not filled, asking
// nobody; nor is a person whose record names no profile page, which nothing can be
// asked for.
func (p *Pipeline) fillFound(ctx context.Context, t *Task, person *Person) *Person {
	if len(t.Fill) == 0 || person == nil || person.NetworkURL == nil {
		return person
	}
	found := Result{Person: person}
	prov, private, asked, ok := t.trace.retrieved(found)
	if !ok {
		return person
	}
	seed := newMerging(found, "", private)
	seed.provenance = prov
	if seed.filled(wantedFields(LookupPersonURL, t.Fill)) {
		return person
	}
	res, tr, _ := p.lookup(ctx, t, Input{Lookup: LookupPersonURL, Target: *person.NetworkURL}, t.Fill, from{seed: seed, asked: asked})
	t.trace.record(res, tr) // the filled record's provenance, in the first record's place
	return res.Person
}
