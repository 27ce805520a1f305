package server

import (
	"time"
)

// What the server does while the database cannot take writes (see store.StorageFailing):
// API writes answer 503 storage_unavailable with Retry-After (statusOf), /readyz answers
// 503, and the background work below waits instead of failing against the file; the
// store logs the failures once a minute with a count, and /metrics counts them.

// storageMetrics sets the storage figures of /metrics: writes refused for storage
// since start, whether the database is failing now, and the writer's transactions
// and commits (their ratio is the group commit's average batch).
func (s *Server) storageMetrics() {
	m := s.metrics
	m.counter("enrichd_storage_write_failures_total").Set(s.db.StorageFailures())
	failing := 0.0
	if s.db.StorageFailing() {
		failing = 1
	}
	m.set.GetOrCreateGauge("enrichd_storage_failing", nil).Set(failing)
	transactions, commits := s.db.WriteStats()
	m.counter("enrichd_db_write_transactions_total").Set(uint64(transactions))
	m.counter("enrichd_db_commits_total").Set(uint64(commits))
	// SQLite's checkpoints: a latency spike that lines up with their time, the
	// writer's own above all, points at the copy of the write-ahead log.
	if cc, ok := s.db.Driver.(interface {
		CheckpointStats() (count int64, busy, writerBusy time.Duration)
	}); ok {
		count, busy, writerBusy := cc.CheckpointStats()
		m.counter("enrichd_wal_checkpoints_run_total").Set(uint64(count))
		m.set.GetOrCreateFloatCounter("enrichd_wal_checkpoint_seconds_total").Set(busy.Seconds())
		m.set.GetOrCreateFloatCounter("enrichd_wal_writer_checkpoint_seconds_total").Set(writerBusy.Seconds())
	}
}
