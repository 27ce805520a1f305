package enrich

import (
	"maps"
	"sync"
)

// recorder gathers the traces of the lookups one task makes through Enrich (an email
// lookup asks for a company and for several profiles), so that the task can say what
// each source was asked and where its person's fields came from (Task.Trace). Its
// zero value is ready to use.
type recorder struct {
	mu         sync.Mutex
	calls      []SourceCall
	provenance map[string]Provenance // by the person's or company's network URL
	private    map[string]bool
	asked      map[string]map[string]bool // the sources asked for it, by name
}

// record keeps what one lookup asked and, for the record it answered with (res),
// where its fields came from.
func (r *recorder) record(res Result, tr Trace) { r.recordAs(recordKey(res), tr) }

// recordAs is Record with the key the record's provenance is kept by.
func (r *recorder) recordAs(key string, tr Trace) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, tr.Sources...)
	if key != "" {
		if r.provenance == nil {
			r.provenance, r.private, r.asked = map[string]Provenance{}, map[string]bool{}, map[string]map[string]bool{}
		}
		r.provenance[key] = tr.Provenance
		r.private[key] = tr.Private
		if r.asked[key] == nil {
			r.asked[key] = map[string]bool{}
		}
		for _, c := range tr.Sources {
			if c.Outcome != OutcomeSkipped {
				r.asked[key][c.Name] = true
			}
		}
	}
}

// retrieved returns what the lookups recorded gave for res (record): its record's
// provenance, whether it is private, and the sources that were asked for it. ok is
// false when none of them answered with it.
func (r *recorder) retrieved(res Result) (prov Provenance, private bool, asked map[string]bool, ok bool) {
	key := recordKey(res)
	r.mu.Lock()
	defer r.mu.Unlock()
	if key == "" || r.provenance[key] == nil {
		return nil, false, nil, false
	}
	return maps.Clone(r.provenance[key]), r.private[key], maps.Clone(r.asked[key]), true
}

func recordKey(res Result) string {
	switch {
	case res.Person != nil && res.Person.NetworkURL != nil:
		return "person " + *res.Person.NetworkURL
	case res.Company != nil && res.Company.NetworkURL != nil:
		return "company " + *res.Company.NetworkURL
	}
	return ""
}

// emailKey keeps the provenance of a person a direct match found for an address, by
// the address: the vendor's record may name no profile page to key it by.
func emailKey(address string) string { return "email " + address }

// Trace is what the lookups t made through Enrich asked, one SourceCall a source in
// the order they were first asked (each source's calls, credits and time summed; its outcome
// the best it came to: a hit, else an error, else a miss, else why it was skipped,
// a budget, a refused key or the task's end before a filled or unsupported lookup),
// and the provenance of res, when one of them answered with it.
func (t *Task) Trace(res Result) Trace { return t.trace.trace(res) }

func (r *recorder) trace(res Result) Trace {
	r.mu.Lock()
	defer r.mu.Unlock()
	tr := Trace{Provenance: Provenance{}, Sources: []SourceCall{}}
	at := map[string]int{}
	for _, c := range r.calls {
		i, seen := at[c.Name]
		if !seen {
			at[c.Name] = len(tr.Sources)
			tr.Sources = append(tr.Sources, c)
			continue
		}
		s := &tr.Sources[i]
		s.VendorCalls += c.VendorCalls
		s.Credits += c.Credits
		s.MS += c.MS
		s.OwnKey = s.OwnKey || c.OwnKey
		if callRank(c) > callRank(*s) {
			s.Outcome, s.Reason = c.Outcome, c.Reason
		}
	}
	key := recordKey(res)
	if r.provenance[key] == nil && res.Person != nil && res.Person.EmailMatch != nil {
		key = emailKey(res.Person.EmailMatch.Email)
	}
	if key != "" && r.provenance[key] != nil {
		for k, v := range r.provenance[key] {
			tr.Provenance[k] = v
		}
		tr.Private = r.private[key]
	}
	return tr
}

func callRank(c SourceCall) int {
	switch c.Outcome {
	case OutcomeHit:
		return 4
	case OutcomeError:
		return 3
	case OutcomeMiss:
		return 2
	}
	// Skipped: what kept a source from being asked (its budget, its key, the task's
	// end) says more than a lookup it had no need or way to answer, and a task that
	// failed for a budget shows it.
	if c.Reason == ReasonFilled || c.Reason == ReasonNotSupported {
		return 0
	}
	return 1
}
