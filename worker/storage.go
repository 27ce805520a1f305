package worker

import (
	"context"
	"time"
)

// storageWait reports whether the database cannot take writes, having then waited for
// the next tick, so a worker loop skips its round instead of writing. The database is
// asked through a shared probe write at most once a second whatever the number of
// callers. It reports false once ctx has ended, leaving the caller's own check to stop.
func (s *Pool) storageWait(ctx context.Context, tick <-chan time.Time) bool {
	if ctx.Err() != nil || s.db.Writable(ctx) {
		return false
	}
	select {
	case <-ctx.Done():
		return false
	case <-tick:
		return true
	}
}
