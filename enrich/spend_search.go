package enrich

import (
	"context"
	"errors"
	"time"
)

// searchStaffSpent is searchStaff held to the budgets of the organization ctx names and
// counted in its spend, as Lookup holds every source it asks: a staff search is the
// dearest call a vendor bills (Enrich Layer's 10 credits). skip, when not "", is why the
// source was not asked (ReasonBudget).
func (p *Pipeline) searchStaffSpent(ctx context.Context, src Source, ss StaffSearcher, q StaffQuery, limit int) (members []StaffMember, cutOff bool, skip string, err error) {
	if p.Spend == nil {
		members, cutOff, err = searchStaff(ctx, ss, q, limit)
		return members, cutOff, "", err
	}
	org := OrgOf(ctx)
	if skip := p.Spend.Admit(ctx, org, src.Name(), false); skip != "" {
		return nil, false, skip, nil
	}
	askCtx, tally := WithTally(ctx)
	start := time.Now()
	members, cutOff, err = searchStaff(askCtx, ss, q, limit)
	call := SourceCall{Name: src.Name(), VendorCalls: tally.Calls(), Credits: tally.Credits(), MS: time.Since(start).Milliseconds()}
	switch {
	case (err == nil || errors.Is(err, ErrSearchIncomplete)) && len(members) > 0:
		call.Outcome = OutcomeHit
	case err == nil || errors.Is(err, ErrSearchIncomplete) || errors.Is(err, ErrNotFound):
		call.Outcome = OutcomeMiss
	default:
		call.Outcome = OutcomeError
	}
	p.Spend.Spent(ctx, org, call)
	return members, cutOff, "", err
}
