package worker

import (
	"context"
	"log/slog"
	"time"

	"enrichd/enrich"
	"enrichd/store"
)

// missKeeper is the pipeline's enrich.Misses: the priced sources' misses, kept in the
// database so that every replica, and the next start, skips them alike.
type missKeeper struct {
	db      *store.DB
	log     *slog.Logger
	metrics *workerMetrics
}

var _ enrich.Misses = missKeeper{}

// Of reads the subject's misses. One that cannot be read counts as none: the sources
// are asked, as they were before their misses were remembered.
func (k missKeeper) Of(ctx context.Context, in enrich.Input, since time.Time) map[string][]string {
	misses, err := k.db.SourceMisses(ctx, in, since)
	if err != nil {
		if ctx.Err() == nil && !store.IsStorageFault(err) { // the store logs those
			k.log.Error("reading the sources' misses: they are asked", "lookup", string(in.Lookup), "err", err.Error())
		}
		return nil
	}
	if len(misses) == 0 {
		return nil
	}
	out := map[string][]string{}
	for _, m := range misses {
		out[m.Source] = append(out[m.Source], m.OrgID)
	}
	return out
}

func (k missKeeper) Remember(ctx context.Context, in enrich.Input, source, scope string) {
	if err := k.db.RememberMiss(ctx, in, source, scope); err != nil {
		if !store.IsStorageFault(err) {
			k.log.Error("remembering a source's miss", "source", source, "lookup", string(in.Lookup), "err", err.Error())
		}
		return
	}
	k.metrics.counter("enrichd_source_misses_remembered_total", "source", source).Inc()
}

func (k missKeeper) Forget(ctx context.Context, in enrich.Input, source string) {
	if _, err := k.db.ForgetMisses(ctx, in, source); err != nil && !store.IsStorageFault(err) {
		k.log.Error("deleting a source's misses it has answered for since", "source", source, "lookup", string(in.Lookup), "err", err.Error())
	}
}

// purgeMisses deletes the misses remembered before the freshness window, batch after
// batch, each in its own short transaction, until a batch finds less than a full one.
// No task reads them any more.
func (s *Pool) purgeMisses(ctx context.Context) {
	cutoff := s.db.Now().Add(-s.cfg.Freshness)
	for ctx.Err() == nil {
		n, err := s.db.PurgeMisses(ctx, cutoff, purgeBatch)
		if err != nil {
			if ctx.Err() == nil && !store.IsStorageFault(err) {
				s.log.Error("deleting the sources' misses past the freshness window", "err", err)
			}
			return
		}
		s.metrics.counter("enrichd_retention_deleted_total", "kind", "source_misses").Add(n)
		if n < purgeBatch {
			return
		}
	}
}
