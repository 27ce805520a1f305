package enrich

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"
)

// Task is what the lookups of one task depend on, and where what they do is kept. The
// worker that runs a task makes one and passes it down through Lookup, Enrich and
// ResolveEmail to every step that asks a source; the context passed beside it carries
// the task's cancellation and deadline, and nothing a lookup needs or gives.
//
//   - Whose task it is (Org). The organization's own vendor keys are reached through
//     it: Pipeline.Keys hands the waterfall the instance of a source that carries the
//     organization's key, so no source reads a key from anywhere but its own
//     configuration. Its budgets hold each ask and its spend counts what the ask cost
//     (Pipeline.Spend, by Org), and a miss its own key found is remembered for it
//     alone (Pipeline.Misses).
//   - What its waterfall fills (Fill): the fill list of the task's object type, which
//     a company or profile lookup fills (Lookup), and an email lookup fills the
//     person it confirms with (fillFound); the companies and profiles an email lookup
//     asks on its way (Enrich) fill nothing.
//   - What its lookups asked (Trace): every lookup made through Enrich, every direct
//     match by email and every staff search is recorded on the task, so that the task
//     says what each source was asked and cost, and where its answer's fields came
//     from. A lookup made through Lookup returns its own Trace instead.
//
// What belongs to one ask of one source travels with that ask, not with the task: its
// Tally, passed to the source, counts the requests the source sends upstream and what
// they cost, puts each on the organization's books before it is sent (Tally.Book), and
// holds what a source the waterfall asks needs to ask another source itself in the
// task's name (AskWithin). What one lookup goes on from (an email lookup's confirmed
// person, the records a staff search returned whole) is an argument of that lookup
// (from), never the task's: it does not outlive the lookup.
//
// The zero Task names no organization and fills nothing. A Task's trace may be
// recorded by several lookups at once.
type Task struct {
	// Org is the organization whose task it is: the sources are asked with its own
	// vendor keys where it set them (Pipeline.Keys), within its budgets, and what
	// they cost is counted in its spend (Pipeline.Spend); a miss its own key found is
	// remembered for it alone (Pipeline.Misses).
	Org string
	// Fill are the fields the task's waterfall tries to fill (FillLists.For the
	// task's object type; an email lookup's are the person's); empty: the first
	// source that knows the subject gives the answer.
	Fill []string
	// Spend, when set, is the task's own in the Pipeline's place: the workers' keeps
	// the asks the task's sources answered for the write that settles the task.
	Spend Spend

	// trace gathers what the task's lookups asked (Trace).
	trace recorder
}

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

// recordAs is record with the key the record's provenance is kept by.
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

// Trace is what the lookups t recorded asked (through Enrich, a direct match, a staff
// search), one SourceCall a source in the order they were first asked (each source's
// calls, credits and time summed; its outcome the best it came to: a hit, else an
// error, else a miss, else why it was skipped, a budget, a refused key or the task's
// end before a filled or unsupported lookup), and the provenance of res, when one of
// them answered with it.
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

// SourceKeys picks which instance of a source answers an organization's task: the one
// with the organization's own vendor key when it set one, else the installation's.
type SourceKeys interface {
	// For returns the source to ask in src's place for org, and whether it carries the
	// organization's own key. skip, when not "", is why src is not to be asked at all
	// for org (ReasonKeyFailing).
	For(ctx context.Context, org string, src Source) (use Source, own bool, skip string)
}

// Spend keeps what sources cost each organization and holds them to their budgets. An
// ask of a priced source is on the books before any request of it leaves: Admit books
// it, within the budgets, at one request of one credit, and each request an adapter
// is about to send is added at its full price (Book, through the ask's Tally) where
// that comes to more; Spent settles the ask with what it cost. The asks under way count
// against the budgets, every process's, and an ask whose process dies before its
// answer counts at its full price.
type Spend interface {
	// Admit books an ask of src for org, or says why it may not be made: skip
	// ReasonBudget when a cap is reached, ReasonBudgetUnread when the budgets or the
	// books could not be read or written (the source is then as one that cannot answer
	// now, never as one whose budget is spent). b is the ask's booking, nil for a
	// source that costs nothing, which is neither held to a budget nor booked.
	Admit(ctx context.Context, org, src string, own bool) (b *Booking, skip string)
	// Book puts on the books what b's ask is to be booked at before its next request
	// leaves, calls requests and credits vendor credits in all, when that is more than
	// b holds; no budget is read, the ask having been admitted. An error (the books
	// could not be written) means the request must not be sent.
	Book(ctx context.Context, b *Booking, calls, credits int64) error
	// Spent settles one ask of src for org, whatever its outcome, with what it cost:
	// b is its booking, as Admit returned it.
	Spent(ctx context.Context, org string, call SourceCall, b *Booking)
}

// Booking is an ask of a priced source as the books hold it while it is under way.
// Spend's implementation fills it; the pipeline only passes it on.
type Booking struct {
	Org, Source string
	OwnKey      bool
	// ID names the ask on the books.
	ID string
	// Calls and Credits are what the ask is booked at: the requests it sent or is about
	// to send, each at its full price.
	Calls, Credits int64
}

// KeyInfo is what an organization is shown of the vendor key a source uses for its
// tasks: never the key itself.
type KeyInfo struct {
	// Own says the organization set its own key for the source; else the
	// installation's is used.
	Own bool
	// Last4 are the last 4 characters of the organization's own key.
	Last4 string
	// Failing says the vendor refused the organization's own key; Fallback that the
	// installation's key answers its tasks meanwhile, as the organization allowed.
	Failing  bool
	Fallback bool
}

// KeyInfos tells whose key each source uses for an organization, for GET /v1/sources
// and the dashboard. Whatever keeps the organizations' own keys implements it beside
// SourceKeys; without one, every organization uses the installation's keys.
type KeyInfos interface {
	KeyInfo(ctx context.Context, org, source string) (KeyInfo, error)
}

// Tally counts the upstream requests one ask of a source sends and what they cost.
// The pipeline passes one to the source with each ask (Source's methods take it); the
// adapters add to it beside their process-wide meters, and put each request on the
// ask's books before it is sent (Book). A source the waterfall asks finds on it what
// it needs to ask other sources itself (AskWithin). A zero Tally counts an ask made
// outside the pipeline, booked nowhere; a nil one counts nothing.
type Tally struct {
	calls   atomic.Int64
	credits atomic.Int64

	mu    sync.Mutex
	spend Spend
	// booking is the ask on the books; nil for an ask of a source that costs nothing.
	booking *Booking
	// sentCalls and sentCredits are the requests Book let go so far, at their full price.
	sentCalls, sentCredits int64

	// within is what the source needs to ask others itself (AskWithin), for an ask
	// the waterfall makes; nil for any other.
	within *within
}

// NewTally returns the Tally of an ask spend booked (b; nil: not booked): the
// adapters put each request on its books before sending it (Tally.Book).
func NewTally(spend Spend, b *Booking) *Tally {
	t := &Tally{}
	if b != nil {
		t.spend, t.booking = spend, b
	}
	return t
}

// Book puts a request of the ask on its books before the request is sent, at price:
// the most it can cost by the vendor's published price. It writes only when the ask
// is booked at less than its requests so far and this one come to. An error wraps
// ErrUnavailable: the books could not be written, and the request must not be sent. A
// nil Tally, or one of an ask not booked (a source that costs nothing, an ask made
// outside a waterfall), books nothing.
func (t *Tally) Book(ctx context.Context, price int64) error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.booking == nil {
		return nil
	}
	calls, credits := t.sentCalls+1, t.sentCredits+max(price, 0)
	if calls > t.booking.Calls || credits > t.booking.Credits {
		if err := t.spend.Book(ctx, t.booking, max(calls, t.booking.Calls), max(credits, t.booking.Credits)); err != nil {
			return fmt.Errorf("%s: the request could not be put on the books, so it was not sent: %w", t.booking.Source, ErrUnavailable)
		}
	}
	t.sentCalls, t.sentCredits = calls, credits
	return nil
}

// Booking is the ask's booking, nil when it has none.
func (t *Tally) Booking() *Booking {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.booking
}

// Call counts one request sent upstream. A nil Tally counts nothing.
func (t *Tally) Call() {
	if t != nil {
		t.calls.Add(1)
	}
}

// Charge adds the vendor credits an answer cost. A nil Tally counts nothing.
func (t *Tally) Charge(credits int64) {
	if t != nil {
		t.credits.Add(credits)
	}
}

// Calls are the requests counted so far.
func (t *Tally) Calls() int64 {
	if t == nil {
		return 0
	}
	return t.calls.Load()
}

// Credits are the vendor credits counted so far.
func (t *Tally) Credits() int64 {
	if t == nil {
		return 0
	}
	return t.credits.Load()
}

// ErrNotAsked is what AskWithin answers for a source the organization's budget (or
// key) rules out: it was not asked.
var ErrNotAsked = errors.New("not asked: its monthly budget of vendor credits is spent, or its key is refused")

// within is what a source asked by the waterfall needs to ask another source itself
// (the web source asks the network's sources for the company page its site links to):
// whose task it is, and where the asks it makes are gathered for the task's sources.
// The waterfall hangs one on the Tally of each ask it makes (Tally.within).
type within struct {
	p     *Pipeline
	task  *Task
	mu    sync.Mutex
	calls []SourceCall
}

// asked are the asks AskWithin made, in order.
func (w *within) asked() []SourceCall {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls
}

func (w *within) add(call SourceCall) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, call)
}

// AskWithin asks src by fn, the lookup in, from inside another source's ask whose
// Tally is t, as the waterfall asks any source: not asked when it is remembered not to
// know in's subject (an error wrapping ErrNotFound; see Misses), held to the
// organization's budget of src (ErrNotAsked when it is spent), its calls and credits
// counted to src in the organization's spend (fn is given the Tally of src's own ask)
// and listed in the task's sources, apart from those of the source that asks, and its
// miss remembered or its answer superseding one. Without a waterfall around it (t from
// elsewhere, or nil) it is fn(ctx, t).
func AskWithin[T any](ctx context.Context, t *Tally, src Source, in Input, fn func(context.Context, *Tally) (T, error)) (T, error) {
	var w *within
	if t != nil {
		w = t.within
	}
	if w == nil {
		return fn(ctx, t)
	}
	var zero T
	call := SourceCall{Name: src.Name()}
	misses := w.p.knownMisses(w.task.Org, in)
	if misses.known(ctx, src) {
		call.Outcome, call.Reason = OutcomeSkipped, ReasonKnownMiss
		w.add(call)
		return zero, fmt.Errorf("%s did not know %s when last asked: %w", src.Name(), in.Target, ErrNotFound)
	}
	spend := w.p.spendFor(w.task)
	var booking *Booking
	if spend != nil {
		var skip string
		if booking, skip = spend.Admit(ctx, w.task.Org, src.Name(), false); skip != "" {
			call.Outcome, call.Reason = OutcomeSkipped, skip
			w.add(call)
			return zero, fmt.Errorf("%s: %w", src.Name(), ErrNotAsked)
		}
	}
	tally := NewTally(spend, booking) // its own: these calls are src's, not the asking source's
	tally.within = w                  // and what src asks in turn is the task's too
	start := time.Now()
	v, err := func() (T, error) {
		if spend != nil {
			defer spentOnPanic(ctx, spend, w.task.Org, call, tally)
		}
		return fn(ctx, tally)
	}()
	call.MS = time.Since(start).Milliseconds()
	call.VendorCalls, call.Credits = tally.Calls(), tally.Credits()
	switch {
	case err == nil:
		call.Outcome = OutcomeHit
	case errors.Is(err, ErrNotFound):
		call.Outcome = OutcomeMiss
	default:
		call.Outcome = OutcomeError
	}
	if spend != nil {
		spend.Spent(ctx, w.task.Org, call, booking)
	}
	misses.record(ctx, src, call)
	w.add(call)
	return v, err
}
