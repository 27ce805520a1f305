package enrich

import (
	"context"
	"sync/atomic"
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

// Ask is one lookup of a task, with what the pipeline needs to know of whose it is.
type Ask struct {
	Input Input
	// Org is the organization whose task asks: its keys, budgets and spend.
	Org string
	// Fill are the fields the waterfall tries to fill (FillLists.For the lookup's
	// object type); empty: the first source that knows the subject gives the answer.
	Fill []string
}

// SourceKeys picks which instance of a source answers an organization's task: the one
// with the organization's own vendor key when it set one, else the installation's.
type SourceKeys interface {
	// For returns the source to ask in src's place for org, and whether it carries the
	// organization's own key. skip, when not "", is why src is not to be asked at all
	// for org (ReasonKeyFailing).
	For(ctx context.Context, org string, src Source) (use Source, own bool, skip string)
}

// Spend keeps what sources cost each organization and holds them to their budgets.
type Spend interface {
	// Admit says whether src may be asked for org now; skip, when not "", is why not:
	// ReasonBudget when a cap is reached, ReasonBudgetUnread when the budget could not
	// be read (the source is then as one that cannot answer now, never as one whose
	// budget is spent). An admitted call is reserved until Spent records it, so that
	// calls in flight count against the budget.
	Admit(ctx context.Context, org, src string, own bool) (skip string)
	// Spent records one admitted ask of src for org, whatever its outcome.
	Spent(ctx context.Context, org string, call SourceCall)
}

// Tally counts the upstream requests one ask of a source sends and what they cost.
// The pipeline puts one in the context of each ask (WithTally); the adapters add to
// it beside their process-wide meters.
type Tally struct {
	calls   atomic.Int64
	credits atomic.Int64
}

type tallyKey struct{}

// WithTally returns ctx carrying a new Tally for one ask.
func WithTally(ctx context.Context) (context.Context, *Tally) {
	t := &Tally{}
	return context.WithValue(ctx, tallyKey{}, t), t
}

// TallyOf returns the Tally ctx carries, or nil.
func TallyOf(ctx context.Context) *Tally {
	t, _ := ctx.Value(tallyKey{}).(*Tally)
	return t
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
