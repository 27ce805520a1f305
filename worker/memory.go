package worker

import (
	"context"
	"time"

	"enrichd/store"
)

// releaseIdleMemory gives memory back to the system once the service has been idle
// (no API request, no task claimed) for between one and two cfg.IdleRelease: the
// store empties its writer's page cache, which otherwise stays as full as the last
// load left it. It runs once an idle spell, again only after activity.
//
// Go's own free heap is left to the runtime, which returns it within minutes: forcing
// it back (debug.FreeOSMemory) gained 1.3 MB of 60 after a load, the page cache 27 MB.
func (s *Pool) releaseIdleMemory(ctx context.Context) {
	tick := time.NewTicker(s.cfg.IdleRelease)
	defer tick.Stop()
	seen, released := s.activity.Load(), false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if now := s.activity.Load(); now != seen {
			seen, released = now, false
			continue
		}
		// A failing file is left alone: the release is tried again on the next tick.
		if released || s.db.StorageFailing() {
			continue
		}
		if err := s.db.ReleaseMemory(ctx); err != nil {
			if ctx.Err() == nil && !store.IsStorageFault(err) { // the store logs those
				s.log.Error("releasing the database's idle memory", "err", err)
			}
			continue
		}
		released = true
		s.metrics.counter("enrichd_idle_memory_releases_total").Inc()
	}
}
