package enrich

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

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

// AskWithin asks src by fn, the lookup in, from inside another source's ask (t is its
// Tally; fn is given the one of src's own ask), as the
// waterfall asks any source: not asked when it is remembered not to know in's subject
// (an error wrapping ErrNotFound; see Misses), held to the organization's budget of src
// (ErrNotAsked when it is spent), its calls and credits counted to src in the
// organization's spend and listed in the task's sources, apart from those of the
// source that asks, and its miss remembered or its answer superseding one. Without a
// waterfall around it (t from elsewhere, or nil) it is fn(ctx, t).
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
	var booking *Booking
	if w.p.Spend != nil {
		var skip string
		if booking, skip = w.p.Spend.Admit(ctx, w.task.Org, src.Name(), false); skip != "" {
			call.Outcome, call.Reason = OutcomeSkipped, skip
			w.add(call)
			return zero, fmt.Errorf("%s: %w", src.Name(), ErrNotAsked)
		}
	}
	tally := NewTally(w.p.Spend, booking) // its own: these calls are src's, not the asking source's
	start := time.Now()
	v, err := func() (T, error) {
		if w.p.Spend != nil {
			defer w.p.spentOnPanic(ctx, w.task.Org, call, tally)
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
	if w.p.Spend != nil {
		w.p.Spend.Spent(ctx, w.task.Org, call, booking)
	}
	misses.record(ctx, src, call)
	w.add(call)
	return v, err
}
