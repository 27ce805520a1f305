package enrich

import (
	"context"
	"fmt"
	"sync"
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
