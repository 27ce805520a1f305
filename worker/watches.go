package worker

import (
	"context"
	"errors"
	"strconv"
	"time"

	"enrichd/enrich"
	"enrichd/store"
	"enrichd/watch"
)

// A scheduling round claims at most watchBatch due watches, and at most watchPerOrg of
// one organization: an organization with thousands of watches due at once cannot
// take every round, and the fair queue shares the workers between organizations after.
const (
	watchBatch  = 200
	watchPerOrg = 10
)

// scheduleWatches enqueues the task of every watch that is due, every
// cfg.WatchInterval, until ctx ends. On PostgreSQL, DueWatches lets one replica at a
// time schedule; the others find nothing.
func (s *Pool) scheduleWatches(ctx context.Context) {
	tick := time.NewTicker(s.cfg.WatchInterval)
	defer tick.Stop()
	for {
		if s.storageWait(ctx, tick.C) {
			continue
		}
		s.runDueWatches(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// pauseSuppressedWatch pauses a due watch whose subject (or an address's domain, or
// whom its baseline is about) is suppressed, and reports whether it did: its check is
// skipped, unpaid, until it is resumed.
func (s *Pool) pauseSuppressedWatch(ctx context.Context, w *store.Watch, in enrich.Input) bool {
	_, fail, err := s.inputSuppression(ctx, w.OrgID, in)
	suppressed := fail != nil
	if err == nil && !suppressed && len(w.AnswerHash) > 0 {
		suppressed, err = s.db.SuppressedHash(ctx, w.OrgID, w.AnswerHash)
	}
	if err != nil {
		if ctx.Err() == nil && !store.IsStorageFault(err) {
			s.log.Error("checking a watch's subject against the suppressions", "watch", w.ID, "err", err)
		}
		return true // retried when its claim runs out
	}
	if !suppressed {
		return false
	}
	if err := s.db.PauseWatch(ctx, w.OrgID, w.ID, store.PausedSuppressed); err != nil && ctx.Err() == nil && !store.IsStorageFault(err) {
		s.log.Error("pausing a watch of a suppressed subject", "watch", w.ID, "err", err)
	}
	return true
}

// runDueWatches is one scheduling round: the watches due now are claimed (each becomes
// due again WatchRetry later, should its task never be scheduled), and each either
// gets its task or, when its organization's monthly cap would be passed, waits for
// next month, unpaid.
func (s *Pool) runDueWatches(ctx context.Context) {
	// One replica schedules a round from its claims to its last task: the spend it
	// reads at the start must not be spent by another replica meanwhile.
	release, ok, err := s.db.HoldWatchScheduler(ctx)
	if err != nil || !ok {
		if err != nil && ctx.Err() == nil && !store.IsStorageFault(err) {
			s.log.Error("taking the watch scheduler's lock", "err", err)
		}
		return
	}
	defer release()
	now := s.db.Now()
	due, err := s.db.DueWatches(ctx, now, watchBatch, watchPerOrg)
	if err != nil {
		if ctx.Err() == nil && !store.IsStorageFault(err) { // the store logs those
			s.log.Error("claiming due watches", "err", err)
		}
		return
	}
	// What each organization spent this month, as this round adds to it: the spend
	// DueWatches read does not count the tasks made since.
	spent := map[string]int64{}
	refused := map[string]bool{} // organizations whose refusal this round is logged
	for _, d := range due {
		w := d.Watch
		if _, ok := spent[w.OrgID]; !ok {
			spent[w.OrgID] = d.MonthSpend
		}
		in := watchTaskInput(w)
		if s.pauseSuppressedWatch(ctx, w, in) {
			continue
		}
		cost := in.Lookup.Cost()
		if d.MonthlyCap != nil && spent[w.OrgID]+cost > *d.MonthlyCap {
			if err := s.db.DeferWatch(ctx, w.OrgID, w.ID, watch.NextMonth(w.ID, now)); err != nil && ctx.Err() == nil && !store.IsStorageFault(err) {
				s.log.Error("deferring a capped watch to next month", "watch", w.ID, "err", err)
			}
			continue
		}
		if refused[w.OrgID] {
			// What refused one of the organization's checks (no credits, a full queue)
			// refuses the next: they wait for their claim's retry too.
			continue
		}
		prevDue := now
		if w.NextRunAt != nil {
			prevDue = *w.NextRunAt
		}
		// The check of one due time has a key of its own: should the process stop
		// between the enqueue and WatchScheduled, the claim's retry finds that task
		// again instead of charging for a second one.
		key := "watch-" + w.ID + "-" + strconv.FormatInt(prevDue.UnixMilli(), 10)
		// The check is the watch's, in the audit log: its watch.created entry names who
		// made it.
		id := w.ID
		byWatch := store.By{Actor: store.Actor{Kind: store.ActorWatch, ID: &id}}
		res, err := s.submitTask(ctx, byWatch, taskRequest{OrgID: w.OrgID, Input: in, Fields: w.Input, WatchID: &w.ID,
			IdempotencyKey: key, Route: "watch", Endpoint: "watch"})
		if err != nil {
			// The claim makes it due again in WatchRetry: no credits, a full queue or a
			// storage fault is retried then.
			refused[w.OrgID] = true
			if ctx.Err() == nil && !store.IsStorageFault(err) {
				level, e := s.log.Warn, (*enrich.Error)(nil)
				if !errors.As(err, &e) || e.Kind == enrich.KindInternal {
					level = s.log.Error
				}
				level("a watch's task was refused; its organization's due watches are retried later",
					"watch", w.ID, "org", w.OrgID, "retry_in", store.WatchRetry.String(), "err", err)
			}
			continue
		}
		if !res.Replayed {
			spent[w.OrgID] += res.Task.CreditsCharged
		}
		if err := s.db.WatchScheduled(ctx, w.OrgID, w.ID, res.Task.ID, now, watch.NextRun(prevDue, w.EveryDays, now)); err != nil &&
			ctx.Err() == nil && !store.IsStorageFault(err) {
			s.log.Error("recording a watch's task", "watch", w.ID, "task", res.Task.ID, "err", err)
		}
	}
}

// watchTaskInput is the input of a watch's task (store.Watch.TaskInput).
func watchTaskInput(w *store.Watch) enrich.Input { return w.TaskInput() }
