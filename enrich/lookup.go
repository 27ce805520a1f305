package enrich

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"time"
)

// What a source's part in a task came to (SourceCall.Outcome).
const (
	OutcomeHit     = "hit"     // it knew the subject and gave at least one field
	OutcomeMiss    = "miss"    // it did not know the subject, or answered with another one
	OutcomeError   = "error"   // it could not answer now
	OutcomeSkipped = "skipped" // it was not asked (Reason says why)
)

// Why a source was skipped, or why a miss was one (SourceCall.Reason).
const (
	ReasonFilled       = "filled"        // every wanted field was already filled
	ReasonNotSupported = "not_supported" // it cannot answer this kind of lookup
	ReasonBudget       = "budget"        // its monthly budget of vendor credits is spent
	ReasonBudgetUnread = "budget_unread" // its budget could not be read now: not asked, as a source that cannot answer now
	ReasonKeyFailing   = "key_failing"   // the organization's own key was refused and no fallback is allowed
	ReasonOtherSubject = "other_subject" // it answered with another company or person: discarded
	ReasonTimedOut     = "timed_out"     // the task's lifetime ended before it was asked
	ReasonKnownMiss    = "known_miss"    // it did not know the subject when asked within the freshness window
)

// SourceCall is one source's part in a task, in the order the sources were asked:
// `sources` on the task.
type SourceCall struct {
	Name    string `json:"name"`
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
	// VendorCalls are the requests it sent upstream for this task (what a vendor
	// bills and rate-limits), retries included; Credits the vendor credits they cost
	// by the vendor's published price.
	VendorCalls int64 `json:"vendor_calls"`
	Credits     int64 `json:"vendor_credits"`
	MS          int64 `json:"ms"`
	// OwnKey says the call went out with the organization's own vendor key.
	OwnKey bool `json:"-"`
}

// Provenance names, for every non-null top-level field of a result, the source that
// gave it: `provenance` on the task.
type Provenance map[string]string

// Trace is what a lookup asked and where its answer came from.
type Trace struct {
	Provenance Provenance
	Sources    []SourceCall
	// Private says some field came from the organization's own vendor key: the record
	// is kept in the store for that organization alone.
	Private bool
}

// LookupSupporter is a Source that can answer some kinds of lookup only (a website
// finds companies by domain, never people). The waterfall skips it, unasked, for the
// others (ReasonNotSupported). A Source that does not implement it is asked for all.
type LookupSupporter interface {
	Supports(l Lookup) bool
}

// Supports reports whether src can answer lookups of kind l.
func Supports(src Source, l Lookup) bool {
	if s, ok := src.(LookupSupporter); ok {
		return s.Supports(l)
	}
	return true
}

// Lookup answers a company or profile lookup with the waterfall: the sources are
// asked in order, and the first that knows the subject gives the record. While a
// field of t.Fill is still null, the next source that can answer this kind of lookup
// is asked; its record is merged only when it is the same subject (the same network
// page, or for companies the same canonical domain, for people the same profile URL),
// and it fills only the fields still null, never one an earlier source gave. Once
// every wanted field is filled, or at once with an empty Fill (first hit wins), the
// sources left are not asked (ReasonFilled).
//
// A priced source remembered not to know the subject (Misses) is not asked again
// within the freshness window (ReasonKnownMiss); a task whose sources all missed or
// were skipped so fails not_found, as a miss does.
//
// The Trace says which source gave each field and what each source was asked and
// cost. Email lookups take more than one question and go through ResolveEmail.
func (p *Pipeline) Lookup(ctx context.Context, t *Task, in Input) (Result, Trace, *TaskError) {
	return p.lookup(ctx, t, in, t.Fill, from{})
}

// from is what a lookup goes on from, beyond its task: what the lookups of the task
// before it gave.
type from struct {
	// seed, when set, is a record the sources named in asked already gave or were
	// asked for (an email lookup's person, confirmed), which the others fill as if it
	// were the first hit.
	seed  *merging
	asked map[string]bool
	// given are records sources have returned already, whole, by source and by the
	// profile URL each is: what PDL's staff search returns is the record its person
	// enrich would, billed once. The waterfall takes one as that source's answer to a
	// lookup of its profile, asking the sources before it as ever, and pays nothing
	// more.
	given map[string]map[string]*Person
}

// lookup is Lookup filling fill, going on from what f holds.
func (p *Pipeline) lookup(ctx context.Context, t *Task, in Input, fill []string, f from) (Result, Trace, *TaskError) {
	tr := Trace{Provenance: Provenance{}, Sources: []SourceCall{}}
	if in.Lookup == LookupEmail {
		return Result{}, tr, &TaskError{Code: CodeInternalError, Message: "email lookups are resolved by ResolveEmail"}
	}
	wanted := wantedFields(in.Lookup, fill)
	misses := p.knownMisses(t.Org, in)
	spend := p.spendFor(t)
	var (
		merged      = f.seed
		unavailable bool
		budget      []string
	)
	for _, src := range p.Sources {
		if f.asked[src.Name()] {
			continue
		}
		call := SourceCall{Name: src.Name()}
		switch {
		case !Supports(src, in.Lookup):
			call.Outcome, call.Reason = OutcomeSkipped, ReasonNotSupported
		case merged != nil && merged.filled(wanted):
			call.Outcome, call.Reason = OutcomeSkipped, ReasonFilled
		case ctx.Err() != nil:
			call.Outcome, call.Reason = OutcomeSkipped, ReasonTimedOut
		case misses.known(ctx, src):
			call.Outcome, call.Reason = OutcomeSkipped, ReasonKnownMiss
		}
		if call.Outcome != "" {
			tr.Sources = append(tr.Sources, call)
			continue
		}
		use, own := src, false
		if p.Keys != nil {
			var skip string
			if use, own, skip = p.Keys.For(ctx, t.Org, src); skip != "" {
				call.Outcome, call.Reason = OutcomeSkipped, skip
				tr.Sources = append(tr.Sources, call)
				unavailable = true
				continue
			}
		}
		call.OwnKey = own
		var booking *Booking
		if spend != nil {
			var skip string
			if booking, skip = spend.Admit(ctx, t.Org, src.Name(), own); skip != "" {
				call.Outcome, call.Reason = OutcomeSkipped, skip
				tr.Sources = append(tr.Sources, call)
				if skip == ReasonBudget {
					budget = append(budget, src.Name())
				} else {
					unavailable = true
				}
				continue
			}
		}
		tally := NewTally(spend, booking)
		// A source that asks others itself (web) asks them through AskWithin: their
		// budgets, spend and place in the task's sources are their own.
		nested := &within{p: p, task: t}
		tally.within = nested
		start := time.Now()
		res, err := func() (Result, error) {
			if spend != nil {
				defer spentOnPanic(ctx, spend, t.Org, call, tally)
			}
			if got := f.givenBy(src.Name(), in); got != nil {
				return *got, nil // paid for with the search that returned it
			}
			return ask(ctx, tally, use, in)
		}()
		call.MS = time.Since(start).Milliseconds()
		call.VendorCalls, call.Credits = tally.Calls(), tally.Credits()
		if err == nil && res.Company == nil && res.Person == nil {
			err = ErrNotFound
		}
		switch {
		case err == nil && merged == nil:
			merged = newMerging(res, call.Name, own)
			call.Outcome = OutcomeHit
		case err == nil && !merged.sameSubject(res):
			call.Outcome, call.Reason = OutcomeMiss, ReasonOtherSubject
			if p.Logger != nil {
				attrs := []any{"source", call.Name, "lookup", string(in.Lookup)}
				if res.Person == nil {
					// A company's identifiers help the operator; a person's stay out of
					// the log (the task's trace says what was discarded).
					attrs = append(attrs, "target", in.Target, "kept", merged.subject(), "discarded", subjectOf(res))
				}
				p.Logger.Warn("a source answered with another subject: its record is discarded", attrs...)
			}
		case err == nil:
			if merged.fill(res, call.Name, own) > 0 {
				call.Outcome = OutcomeHit
			} else {
				call.Outcome, call.Reason = OutcomeMiss, ReasonNothingNew
			}
		case ctx.Err() != nil:
			call.Outcome, call.Reason = OutcomeError, ReasonTimedOut
		case errors.Is(err, ErrNotFound):
			call.Outcome = OutcomeMiss
		default:
			call.Outcome = OutcomeError
			unavailable = true
			if p.Logger != nil {
				p.Logger.Warn("source failed", "source", call.Name, "lookup", string(in.Lookup), "err", err)
			}
		}
		if spend != nil {
			spend.Spent(ctx, t.Org, call, booking)
		}
		misses.record(ctx, src, call)
		tr.Sources = append(tr.Sources, call)
		tr.Sources = append(tr.Sources, nested.asked()...)
	}
	if merged != nil {
		tr.Provenance, tr.Private = merged.provenance, merged.private
		return merged.res, tr, nil
	}
	switch {
	case ctx.Err() != nil:
		return Result{}, tr, timedOut()
	case unavailable:
		return Result{}, tr, &TaskError{Code: CodeProviderUnavailable, Message: "a data source could not be reached; retrying later is safe"}
	case len(budget) > 0:
		return Result{}, tr, &TaskError{Code: CodeProviderUnavailable, Message: "the monthly budget of vendor credits of " +
			strings.Join(budget, ", ") + " is spent, and no other source knew the subject; retrying once the budget is raised or renewed is safe"}
	}
	return Result{}, tr, &TaskError{Code: CodeNotFound, Message: notFoundMessage(in)}
}

// spentOnPanic, deferred around an admitted ask, settles the ask in the organization's
// spend should the source panic, then panics on for the task's own recovery: an ask
// never settled would stay on the books at its full price until a sweep took it for
// lost, and what it cost would not be known.
func spentOnPanic(ctx context.Context, spend Spend, org string, call SourceCall, tally *Tally) {
	if v := recover(); v != nil {
		call.Outcome, call.VendorCalls, call.Credits = OutcomeError, tally.Calls(), tally.Credits()
		spend.Spent(ctx, org, call, tally.Booking())
		panic(v)
	}
}

// spendFor is the Spend of t's asks: its own, or else the Pipeline's (nil: none).
func (p *Pipeline) spendFor(t *Task) Spend {
	if t != nil && t.Spend != nil {
		return t.Spend
	}
	return p.Spend
}

// ReasonNothingNew: the source knew the subject but had none of the fields still
// null, so nothing of its record was used.
const ReasonNothingNew = "nothing_new"

// merging is the record a waterfall builds, with which source gave each field.
type merging struct {
	res        Result
	provenance Provenance
	private    bool
}

func newMerging(res Result, source string, own bool) *merging {
	m := &merging{provenance: Provenance{}, private: own}
	// A copy: sources may hand the same record to every caller, and this one is
	// filled in.
	if res.Company != nil {
		c := *res.Company
		m.res.Company = &c
	} else {
		p := *res.Person
		m.res.Person = &p
	}
	for _, f := range fieldsOf(m.record().Type()) {
		if f.provenance && !isNull(m.record().Field(f.index)) {
			m.provenance[f.name] = source
		}
	}
	return m
}

func (m *merging) record() reflect.Value {
	if m.res.Company != nil {
		return reflect.ValueOf(m.res.Company).Elem()
	}
	return reflect.ValueOf(m.res.Person).Elem()
}

// fill sets the fields still null from res, and returns how many it set.
func (m *merging) fill(res Result, source string, own bool) int {
	var from reflect.Value
	switch {
	case m.res.Company != nil && res.Company != nil:
		from = reflect.ValueOf(res.Company).Elem()
	case m.res.Person != nil && res.Person != nil:
		from = reflect.ValueOf(res.Person).Elem()
	default:
		return 0
	}
	to, n := m.record(), 0
	for _, f := range fieldsOf(to.Type()) {
		if !f.fillable || !isNull(to.Field(f.index)) || isNull(from.Field(f.index)) {
			continue
		}
		to.Field(f.index).Set(from.Field(f.index))
		m.provenance[f.name] = source
		n++
	}
	if n > 0 && own {
		m.private = true
	}
	return n
}

// filled reports whether every wanted field has a value. No field wanted: the first
// record is the answer.
func (m *merging) filled(wanted []int) bool {
	rec := m.record()
	for _, i := range wanted {
		if isNull(rec.Field(i)) {
			return false
		}
	}
	return true
}

// sameSubject reports whether res is the same company or person as the record: the
// same network page, or for companies the same canonical domain. A record that names
// neither cannot be shown to be the same, and is not.
func (m *merging) sameSubject(res Result) bool {
	switch {
	case m.res.Company != nil && res.Company != nil:
		a, b := m.res.Company, res.Company
		return sameKey(a.NetworkURL, b.NetworkURL) || sameKey(a.Domain, b.Domain)
	case m.res.Person != nil && res.Person != nil:
		return sameKey(m.res.Person.NetworkURL, res.Person.NetworkURL)
	}
	return false
}

func (m *merging) subject() string { return subjectOf(m.res) }

func subjectOf(res Result) string {
	var keys []string
	add := func(s *string) {
		if s != nil {
			keys = append(keys, *s)
		}
	}
	if res.Company != nil {
		add(res.Company.NetworkURL)
		add(res.Company.Domain)
	}
	if res.Person != nil {
		add(res.Person.NetworkURL)
	}
	return strings.Join(keys, " ")
}

// sameKey compares two network URLs or domains as the adapters write them, which
// may differ in case and a trailing slash.
func sameKey(a, b *string) bool {
	if a == nil || b == nil {
		return false
	}
	x, y := strings.TrimSuffix(strings.TrimSpace(*a), "/"), strings.TrimSuffix(strings.TrimSpace(*b), "/")
	return x != "" && strings.EqualFold(x, y)
}

// recordField is one top-level field of Company or Person, by its JSON name.
type recordField struct {
	index int
	name  string
	// fillable: a later source may fill it. Not the bookkeeping the store stamps, nor
	// what belongs to the first record's identity (its redirect) or to an email lookup.
	fillable bool
	// provenance: a source gives it, so provenance names one.
	provenance bool
}

// Fields no source gives: the store stamps them on every record it keeps.
var stamped = map[string]bool{"enrichment_status": true, "created_at": true, "updated_at": true, "last_enriched_at": true}

// Fields a source gives that a later source never fills in.
var notFilled = map[string]bool{"redirect": true, "email_match": true}

var recordFields sync.Map // reflect.Type -> []recordField

func fieldsOf(t reflect.Type) []recordField {
	if v, ok := recordFields.Load(t); ok {
		return v.([]recordField)
	}
	var out []recordField
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		out = append(out, recordField{index: i, name: name,
			fillable: !stamped[name] && !notFilled[name], provenance: !stamped[name]})
	}
	recordFields.Store(t, out)
	return out
}

// wantedFields are the indexes of the fields of fill the lookup's record has; names
// it does not have are not waited for.
func wantedFields(l Lookup, fill []string) []int {
	if len(fill) == 0 {
		return nil
	}
	t := reflect.TypeFor[Company]()
	if l.ObjectType() == ObjectPerson {
		t = reflect.TypeFor[Person]()
	}
	var out []int
	for _, f := range fieldsOf(t) {
		if f.fillable && containsFold(fill, f.name) {
			out = append(out, f.index)
		}
	}
	return out
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(strings.TrimSpace(x), s) {
			return true
		}
	}
	return false
}

// isNull reports whether a field is null in the API's terms: a nil pointer, an empty
// text, slice or map.
func isNull(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	case reflect.Slice, reflect.Map, reflect.String:
		return v.Len() == 0
	}
	return false
}

// givenBy returns the record source returned already for a lookup of a profile, nil
// when none.
func (f from) givenBy(source string, in Input) *Result {
	if in.Lookup != LookupPersonURL {
		return nil
	}
	p := f.given[source][in.Target]
	if p == nil {
		return nil
	}
	copied := *p
	return &Result{Person: &copied}
}
