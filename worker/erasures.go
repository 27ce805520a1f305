package worker

import (
	"context"
	"enrichd/store"
	"time"
)

// wakeErasures tells the completer that an erasure may be ready to complete.
func (s *Pool) wakeErasures() {
	select {
	case s.erasuresWake <- struct{}{}:
	default:
	}
}

// erasureEventsRecorded wakes the completer when a batch of attempts settled a
// person.erased event: its erasure may be ready to complete.
func (s *Pool) erasureEventsRecorded(batch []store.Attempted) {
	for _, a := range batch {
		if a.Dispatch.Event == store.EventPersonErased && a.Attempt != nil {
			if status, _ := a.Attempt.Outcome(a.Dispatch); status != store.DeliveryPending || a.Attempt.NotSent {
				s.wakeErasures()
				return
			}
		}
	}
}

// erasureHeldWarning is how long erasures ready to complete may wait for their scrub
// before the log says what holds them, and how often it says it again.
const erasureHeldWarning = 15 * time.Minute

// erasureRetryFirst is how soon the completer tries again when what held the scrub
// back (a reader of SQLite's log, a transaction on PostgreSQL) may be gone: it doubles
// after each try that is held, up to the maintenance interval.
const erasureRetryFirst = time.Second

// completeErasures completes the erasures whose events are done (store's
// CompleteErasures: the database's files scrubbed, then each marked complete), when
// woken and every maintenance interval, until ctx ends. While the scrub is held back,
// it tries again sooner than that: a reader in the way of SQLite's checkpoint is
// usually gone within a second, and an erasure should not wait a whole interval.
func (s *Pool) completeErasures(ctx context.Context) {
	tick := time.NewTicker(s.cfg.MaintenanceInterval)
	defer tick.Stop()
	retry := time.NewTimer(0)
	retry.Stop()
	backoff := erasureRetryFirst
	var warned time.Time
	for {
		if s.db.Writable(ctx) {
			n, err := s.db.CompleteErasures(ctx)
			switch {
			case err != nil && ctx.Err() == nil && !store.IsStorageFault(err):
				s.log.Error("completing erasures", "err", err)
			case n > 0:
				s.log.Info("completed erasures: their events are done and the database's files rid of what they erased", "erasures", n)
			}
			now := s.db.Now()
			held, since := s.db.ErasuresHeld()
			if held != "" && now.Sub(since) >= erasureHeldWarning && now.Sub(warned) >= erasureHeldWarning {
				warned = now
				s.log.Warn("erasures wait to complete: the database's files still hold what they erased", "heldBy", held, "readySince", since)
			}
			if held != "" && backoff < s.cfg.MaintenanceInterval {
				retry.Reset(backoff)
				backoff *= 2
			} else if held == "" {
				backoff = erasureRetryFirst
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-s.erasuresWake:
		case <-tick.C:
		case <-retry.C:
		}
	}
}
