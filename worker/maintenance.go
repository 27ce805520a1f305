package worker

import (
	"context"
	"time"

	"enrichd/store"
)

// purgeBatch is how many tasks (and deliveries) one retention transaction deletes at
// most: small enough that the writer is never held for long, so requests and workers
// get their turn between batches.
const purgeBatch = 500

// maintain runs every cfg.MaintenanceInterval until ctx ends: retention deletes what
// is older than cfg.Retain, the stored records no source refreshed for
// cfg.RetainRecords, what ambiguous email lookups gathered longer ago than
// cfg.KeepGathered and the sources' misses older than cfg.Freshness, expired
// dashboard sessions go, then, if nothing happened since the last round, the WAL is
// checkpointed and truncated. A round is skipped while the database cannot take
// writes, and the storage faults of a round are left to the store's log line.
func (s *Pool) maintain(ctx context.Context) {
	tick := time.NewTicker(s.cfg.MaintenanceInterval)
	defer tick.Stop()
	seen := s.activity.Load()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !s.db.Writable(ctx) {
			continue
		}
		if s.cfg.Retain > 0 {
			s.purge(ctx)
		}
		if s.cfg.RetainRecords > 0 {
			s.purgeRecords(ctx)
		}
		if s.cfg.RetainAudit > 0 {
			s.purgeAudit(ctx)
		}
		// Other people's profiles go once past their window, whatever the other
		// settings: no retry reads them then.
		s.purgeGatherings(ctx)
		// The sources' misses go once past the freshness window, whatever the
		// retention of tasks: no task reads them then.
		s.purgeMisses(ctx)
		// Rows a replica of an older release wrote during a rolling upgrade, without
		// the hashes of whom they are about, are hashed as those written now are.
		if s.db.Subjects() != nil {
			if n, err := s.db.HashSubjects(ctx, 10*purgeBatch); err != nil && ctx.Err() == nil && !store.IsStorageFault(err) {
				s.log.Error("hashing the subjects of rows written without them", "err", err)
			} else if n > 0 {
				s.log.Info("hashed the subjects of rows written without them", "rows", n)
			}
		}
		// Sessions past their expiry are refused when used; this deletes the rows of
		// those never used again.
		if _, err := s.db.PurgeSessions(ctx, s.cfg.SessionIdle); err != nil && ctx.Err() == nil && !store.IsStorageFault(err) {
			s.log.Error("deleting expired dashboard sessions", "err", err)
		}
		if now := s.activity.Load(); now == seen {
			if ok, err := s.db.Checkpoint(ctx); err != nil && ctx.Err() == nil && !store.IsStorageFault(err) {
				s.log.Error("checkpointing the WAL", "err", err)
			} else if err == nil {
				s.metrics.counter("enrichd_wal_checkpoints_total", "complete", boolLabel(ok)).Inc()
			}
		} else {
			seen = now
		}
	}
}

// purge deletes settled tasks and delivery history older than cfg.Retain, batch after
// batch, each in its own short transaction, until a batch finds less than a full one.
func (s *Pool) purge(ctx context.Context) {
	cutoff := s.db.Now().Add(-s.cfg.Retain)
	var tasks, deliveries int
	for ctx.Err() == nil {
		p, err := s.db.PurgeSettled(ctx, cutoff, purgeBatch)
		if err != nil {
			if ctx.Err() == nil && !store.IsStorageFault(err) { // the store logs those
				s.log.Error("deleting settled tasks past retention", "err", err)
			}
			break
		}
		tasks += p.Tasks
		deliveries += p.Deliveries
		s.metrics.counter("enrichd_retention_deleted_total", "kind", "tasks").Add(p.Tasks)
		s.metrics.counter("enrichd_retention_deleted_total", "kind", "deliveries").Add(p.Deliveries)
		s.metrics.counter("enrichd_retention_deleted_total", "kind", "batches").Add(p.Batches)
		if p.Tasks < purgeBatch && p.Deliveries < purgeBatch && p.Batches < store.BatchesPerPurge(purgeBatch) {
			break
		}
	}
	if tasks > 0 || deliveries > 0 {
		s.log.Info("deleted settled tasks and deliveries past retention", "tasks", tasks, "deliveries", deliveries,
			"before", cutoff.Format("2006-01-02T15:04:05Z"))
	}
}

// purgeRecords deletes the stored records no source refreshed for cfg.RetainRecords,
// with their keys and positions, batch after batch, each in its own short
// transaction, until a batch finds less than a full one.
func (s *Pool) purgeRecords(ctx context.Context) {
	cutoff := s.db.Now().Add(-s.cfg.RetainRecords)
	records := 0
	for ctx.Err() == nil {
		n, err := s.db.PurgeRecords(ctx, cutoff, purgeBatch)
		if err != nil {
			if ctx.Err() == nil && !store.IsStorageFault(err) {
				s.log.Error("deleting stored records past retention", "err", err)
			}
			break
		}
		records += n
		s.metrics.counter("enrichd_retention_deleted_total", "kind", "records").Add(n)
		if n < purgeBatch {
			break
		}
	}
	if records > 0 {
		s.log.Info("deleted stored records no source refreshed within retention", "records", records,
			"before", cutoff.Format("2006-01-02T15:04:05Z"))
	}
}

// purgeAudit deletes the audit log's entries older than cfg.RetainAudit, chain by
// chain, batch after batch, each in its own short transaction that leaves the chain's
// checkpoint and records the cut, until a batch finds less than a full one. A chain is
// cut once its oldest entry is a day past the cutoff, so about once a day.
func (s *Pool) purgeAudit(ctx context.Context) {
	cutoff := s.db.Now().Add(-s.cfg.RetainAudit)
	entries := 0
	for ctx.Err() == nil {
		n, err := s.db.PurgeAudit(ctx, cutoff, 4*purgeBatch)
		if err != nil {
			if ctx.Err() == nil && !store.IsStorageFault(err) {
				s.log.Error("deleting audit log entries past retention", "err", err)
			}
			break
		}
		entries += n
		s.metrics.counter("enrichd_retention_deleted_total", "kind", "audit_entries").Add(n)
		if n < 4*purgeBatch {
			break
		}
	}
	if entries > 0 {
		s.log.Info("deleted audit log entries past retention, leaving each chain's checkpoint", "entries", entries,
			"before", cutoff.Format("2006-01-02T15:04:05Z"))
	}
}

// purgeGatherings deletes what ambiguous email lookups gathered longer ago than
// cfg.KeepGathered, the candidates' profiles with it, batch after batch, each in its
// own short transaction, until a batch finds less than a full one.
func (s *Pool) purgeGatherings(ctx context.Context) {
	cutoff := s.db.Now().Add(-s.cfg.KeepGathered())
	for ctx.Err() == nil {
		gatherings, candidates, err := s.db.PurgeGatherings(ctx, cutoff, purgeBatch)
		if err != nil {
			if ctx.Err() == nil && !store.IsStorageFault(err) {
				s.log.Error("deleting the profiles email lookups gathered past retention", "err", err)
			}
			return
		}
		s.metrics.counter("enrichd_retention_deleted_total", "kind", "email_gatherings").Add(gatherings)
		s.metrics.counter("enrichd_retention_deleted_total", "kind", "email_candidates").Add(candidates)
		if gatherings < purgeBatch {
			return
		}
	}
}

func boolLabel(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
