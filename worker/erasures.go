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

// completeErasures completes the erasures whose events are done (store's
// CompleteErasures: the database's files scrubbed, then each marked complete), when
// woken and every maintenance interval, until ctx ends.
func (s *Pool) completeErasures(ctx context.Context) {
	tick := time.NewTicker(s.cfg.MaintenanceInterval)
	defer tick.Stop()
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
			if held, since := s.db.ErasuresHeld(); held != "" && now.Sub(since) >= erasureHeldWarning && now.Sub(warned) >= erasureHeldWarning {
				warned = now
				s.log.Warn("erasures wait to complete: the database's files still hold what they erased", "heldBy", held, "readySince", since)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-s.erasuresWake:
		case <-tick.C:
		}
	}
}
