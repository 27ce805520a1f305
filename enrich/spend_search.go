package enrich

import (
	"context"
	"errors"
	"time"
)

// searchStaffSpent is searchStaff held to the budgets of the organization ctx names,
// counted in its spend on the key it goes out with (own: the organization's), and kept
// in the task's trace, as Lookup does for every source it asks: a staff search is the
// dearest call a vendor bills (Enrich Layer's 10 credits). skip, when not "", is why
// the source was not asked (ReasonBudget).
func (p *Pipeline) searchStaffSpent(ctx context.Context, src Source, ss StaffSearcher, q StaffQuery, limit int, own bool) (members []StaffMember, cutOff bool, skip string, err error) {
	org := OrgOf(ctx)
	rec := recorderOf(ctx)
	if p.Spend != nil {
		if skip := p.Spend.Admit(ctx, org, src.Name(), own); skip != "" {
			if rec != nil {
				rec.Record(Result{}, Trace{Sources: []SourceCall{{Name: src.Name(), Outcome: OutcomeSkipped, Reason: skip, OwnKey: own}}})
			}
			return nil, false, skip, nil
		}
	}
	askCtx, tally := WithTally(ctx)
	start := time.Now()
	members, cutOff, err = searchStaff(askCtx, ss, q, limit)
	call := SourceCall{Name: src.Name(), VendorCalls: tally.Calls(), Credits: tally.Credits(), MS: time.Since(start).Milliseconds(), OwnKey: own}
	switch {
	case (err == nil || errors.Is(err, ErrSearchIncomplete)) && len(members) > 0:
		call.Outcome = OutcomeHit
	case err == nil || errors.Is(err, ErrSearchIncomplete) || errors.Is(err, ErrNotFound):
		call.Outcome = OutcomeMiss
	default:
		call.Outcome = OutcomeError
	}
	if p.Spend != nil {
		p.Spend.Spent(ctx, org, call)
	}
	if rec != nil {
		rec.Record(Result{}, Trace{Sources: []SourceCall{call}})
	}
	return members, cutOff, "", err
}
