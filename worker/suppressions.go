package worker

import (
	"context"
	"enrichd/enrich"
	"enrichd/store"
	"fmt"
)

// inputSuppression is how an input's subjects stand for the organization (see
// store.DB.InputSuppression).
func (s *Pool) inputSuppression(ctx context.Context, orgID string, in enrich.Input) (subject []byte, fail *enrich.TaskError, err error) {
	return s.db.InputSuppression(ctx, orgID, in)
}

// answerSuppressed reports whether a result is about a suppressed subject the input
// did not name (the person an address belongs to, the company at a page).
func (s *Pool) answerSuppressed(ctx context.Context, orgID string, in enrich.Input, res enrich.Result) (bool, error) {
	h := s.db.Subjects()
	who, ok := enrich.ResultSubject(res)
	if h == nil || !ok {
		return false, nil
	}
	if asked, ok := enrich.InputSubject(in); ok && h.Hash(asked) == h.Hash(who) {
		return false, nil // checked when the task was made, and again before it ran
	}
	hash := h.Hash(who)
	return s.db.SuppressedHash(ctx, orgID, hash[:])
}

// gatheredSuppressed reports whether what an email lookup gathered holds a suppressed
// person: then none of it is kept, and a retry searches again.
func (s *Pool) gatheredSuppressed(ctx context.Context, orgID string, g *enrich.Gathering) (bool, error) {
	if g == nil {
		return false, nil
	}
	for _, c := range g.Candidates {
		if c.Person == nil {
			continue
		}
		if suppressed, err := s.answerSuppressed(ctx, orgID, enrich.Input{}, enrich.Result{Person: c.Person}); err != nil || suppressed {
			return suppressed, err
		}
	}
	return false, nil
}

// withoutSuppressed is the outcome of a claimed task once its answer is checked: a
// result about a suppressed subject fails not_found, keeping nothing of them (neither
// the record nor what the lookup gathered), with the sources that were asked.
func (s *Pool) withoutSuppressed(ctx context.Context, c *store.Claim, out store.Outcome) store.Outcome {
	check := func(suppressed bool, err error) bool {
		if err != nil && !store.IsStorageFault(err) {
			s.log.Error("checking the suppressions", "task", c.TaskID, "err", err)
		}
		// A check that cannot be made keeps nothing either: the task fails, refunded,
		// and may be asked again.
		return suppressed || err != nil
	}
	if out.Result != nil && check(s.answerSuppressed(ctx, c.OrgID, c.Input, *out.Result)) {
		return store.Outcome{Err: store.SuppressedAnswer(c.Input), Trace: enrich.Trace{Sources: out.Trace.Sources}}
	}
	if out.Gathered != nil && check(s.gatheredSuppressed(ctx, c.OrgID, out.Gathered)) {
		out.Gathered = nil
	}
	return out
}

// claimSuppressed is the error a claimed task fails with, before any source is asked,
// when its input was suppressed after it was queued.
func (s *Pool) claimSuppressed(ctx context.Context, c *store.Claim) *enrich.TaskError {
	_, fail, err := s.inputSuppression(ctx, c.OrgID, c.Input)
	if err != nil && ctx.Err() != nil {
		return nil // the task's time is up: it fails as any task past its lifetime does
	}
	if err != nil {
		if !store.IsStorageFault(err) {
			s.log.Error("checking the suppressions", "task", c.TaskID, "err", err)
		}
		return &enrich.TaskError{Code: enrich.CodeProviderUnavailable, Message: fmt.Sprintf("the suppression list could not be read: %v; nothing was asked", err)}
	}
	return fail
}
