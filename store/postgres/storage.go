package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"enrichd/store"

	"github.com/jackc/pgx/v5"
)

// A write the database cannot take (see storageFault) is answered as the SQLite store
// answers it: storage_unavailable, 503 with Retry-After over HTTP. The DB remembers it:
// StorageFailing is true from then on until a write commits again (a probe write,
// Writable and CheckWritable, or any other), so readiness, workers and the webhook
// sender stop short of the database instead of failing against it. Failures are
// logged once per store.StorageLogInterval with a count, not one line a write.

// probeEvery is how often, at most, a probe write is made: callers that ask again
// within it share the last probe's result.
const probeEvery = time.Second

// storageHealth is what the DB knows of the database's ability to take writes.
type storageHealth struct {
	failing  atomic.Bool
	failures atomic.Uint64 // writes refused for storage since Open
	log      atomic.Pointer[slog.Logger]

	mu         sync.Mutex
	since      time.Time // the first failure of the current run of failures
	announced  bool      // whether a line was logged during the current run
	unreported uint64    // failures not yet in a log line
	reported   time.Time // when the last failure line was written
}

// SetLogger sets where storage failures are reported; slog.Default() until then.
func (db *DB) SetLogger(l *slog.Logger) { db.health.log.Store(l) }

func (db *DB) logger() *slog.Logger {
	if l := db.health.log.Load(); l != nil {
		return l
	}
	return slog.Default()
}

// StorageFailing reports whether a write failed for storage and no write has committed
// since.
func (db *DB) StorageFailing() bool { return db.health.failing.Load() }

// StorageFailures counts the writes refused for storage since Open (probes included).
func (db *DB) StorageFailures() uint64 { return db.health.failures.Load() }

// storageFailed records a write refused for storage, and logs it at most once per
// store.StorageLogInterval with the count since the last line.
func (db *DB) storageFailed(err error) {
	h := &db.health
	h.failures.Add(1)
	now := db.nowFn()
	h.mu.Lock()
	if !h.failing.Swap(true) {
		h.since, h.announced = now, false
	}
	h.unreported++
	var n uint64
	if h.reported.IsZero() || now.Sub(h.reported) >= store.StorageLogInterval {
		n, h.unreported, h.reported, h.announced = h.unreported, 0, now, true
	}
	since := h.since
	h.mu.Unlock()
	if n > 0 {
		db.logger().Error("the database cannot take writes: writes are answered storage_unavailable",
			"failures", n, "failing_since", since.UTC().Format(time.RFC3339), "err", err.Error())
	}
}

// storageRecovered records a write that committed: the end of a run of failures,
// logged once if the run's start was.
func (db *DB) storageRecovered() {
	h := &db.health
	if !h.failing.Load() {
		return
	}
	h.mu.Lock()
	if !h.failing.Swap(false) {
		h.mu.Unlock()
		return
	}
	n, since, announced := h.unreported, h.since, h.announced
	if announced {
		h.unreported = 0
	}
	h.mu.Unlock()
	if announced {
		db.logger().Info("the database takes writes again", "failures_unreported", n,
			"failing_for", db.nowFn().Sub(since).Round(time.Millisecond).String())
	}
}

// Writable reports whether the database takes writes, cheaply: true while no write
// has failed for storage; otherwise it makes a probe write (CheckWritable, at most one
// a second across callers) and reports whether it committed.
func (db *DB) Writable(ctx context.Context) bool {
	if !db.StorageFailing() {
		return true
	}
	return db.CheckWritable(ctx) == nil
}

// CheckWritable proves the database takes writes by committing one: a row added to
// schema_migrations and deleted in the same transaction, which readers never see but
// which takes a transaction id and writes WAL, as any write does. A read-only server
// (a standby after a fail-over), a full disk or a lost connection make it fail. A probe
// that commits ends a run of storage failures.
//
// Probes are shared: one runs at a time, and callers within a second of the last one
// get its result, so a flood of /readyz requests costs at most one small write a
// second. The probe runs on its own; callers wait for it as long as their context lets
// them.
func (db *DB) CheckWritable(ctx context.Context) error {
	db.probeMu.Lock()
	p := db.probe
	// A probe that committed is not reused once a write has failed for storage since.
	if p == nil || (p.finished() && (time.Since(p.ended) >= probeEvery || p.err == nil && db.StorageFailures() != p.failures)) {
		p = &writeProbe{done: make(chan struct{})}
		db.probe = p
		go func() {
			bg := context.Background()
			err := db.inTx(bg, func(tx pgx.Tx) error {
				if _, err := tx.Exec(bg, probeInsert, ms(db.now())); err != nil {
					return err
				}
				_, err := tx.Exec(bg, probeDelete)
				return err
			})
			if err == nil {
				db.storageRecovered() // inTx did if the probe wrote, which it always does
			}
			p.err, p.ended, p.failures = err, time.Now(), db.StorageFailures()
			close(p.done)
		}()
	}
	db.probeMu.Unlock()
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Errorf("the database does not take writes: %w", p.err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the database write could not be made in time (a lock held by a long transaction?): %w", ctx.Err())
	}
}

// The probe's row: version 0 is never a migration's. ON CONFLICT: two replicas' probes
// at once would otherwise wait on each other's row, and the second fail.
const (
	probeInsert = `INSERT INTO schema_migrations (version, title, applied_at) VALUES (0, 'write probe', $1)
		ON CONFLICT (version) DO UPDATE SET applied_at = excluded.applied_at`
	probeDelete = `DELETE FROM schema_migrations WHERE version = 0`
)

// writeProbe is one CheckWritable, under way or done.
type writeProbe struct {
	done     chan struct{}
	err      error     // once done
	ended    time.Time // once done
	failures uint64    // StorageFailures once done
}

func (p *writeProbe) finished() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
