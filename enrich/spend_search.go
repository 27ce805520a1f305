package enrich

import (
	"context"
	"errors"
	"time"
)

// searchStaffSpent is searchStaff held to the budgets of t's organization and
// counted in its spend, on the key it goes out with (own: the organization's), and in
// the task's sources, as Lookup holds every source it asks: a staff search is the
// dearest call a vendor bills (Enrich Layer's 10 credits). skip, when not "", is why the
// source was not asked (ReasonBudget).
func (p *Pipeline) searchStaffSpent(ctx context.Context, t *Task, src Source, ss StaffSearcher, q StaffQuery, limit int, own bool) (members []StaffMember, cutOff bool, skip string, err error) {
	call := SourceCall{Name: src.Name(), OwnKey: own}
	var booking *Booking
	if p.Spend != nil {
		if booking, skip = p.Spend.Admit(ctx, t.Org, src.Name(), own); skip != "" {
			call.Outcome, call.Reason = OutcomeSkipped, skip
			t.trace.record(Result{}, Trace{Sources: []SourceCall{call}})
			return nil, false, skip, nil
		}
	}
	tally := NewTally(p.Spend, booking)
	start := time.Now()
	members, cutOff, err = func() ([]StaffMember, bool, error) {
		if p.Spend != nil {
			defer p.spentOnPanic(ctx, t.Org, call, tally)
		}
		return searchStaff(ctx, tally, ss, q, limit)
	}()
	call.VendorCalls, call.Credits, call.MS = tally.Calls(), tally.Credits(), time.Since(start).Milliseconds()
	switch {
	case (err == nil || errors.Is(err, ErrSearchIncomplete)) && len(members) > 0:
		call.Outcome = OutcomeHit
	case err == nil || errors.Is(err, ErrSearchIncomplete) || errors.Is(err, ErrNotFound):
		call.Outcome = OutcomeMiss
	default:
		call.Outcome = OutcomeError
	}
	if p.Spend != nil {
		p.Spend.Spent(ctx, t.Org, call, booking)
	}
	t.trace.record(Result{}, Trace{Sources: []SourceCall{call}})
	return members, cutOff, "", err
}
