package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"enrichd/store"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// probeEvery is how often, at most, a probe write is made: callers that ask again
// within it share the last probe's result, whether it committed or failed.
const probeEvery = time.Second

// storageFault reports whether err is SQLite saying that the file cannot be written:
// full (SQLITE_FULL), read-only (SQLITE_READONLY), failing I/O (SQLITE_IOERR), not
// openable (SQLITE_CANTOPEN), or damaged (SQLITE_CORRUPT, SQLITE_NOTADB). Constraint
// violations, busy locks and the like are not storage faults.
func storageFault(err error) bool {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code() & 0xff { // the primary result code of an extended one
	case sqlite3.SQLITE_FULL, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN,
		sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return true
	}
	return false
}

// storageHealth is what the DB knows of its file's ability to take writes.
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

// StorageFailing reports whether a write failed for storage and no write (a probe
// or any other that changed a row) has committed since.
func (db *DB) StorageFailing() bool { return db.health.failing.Load() }

// StorageFailures counts the writes refused for storage since Open (probes included).
func (db *DB) StorageFailures() uint64 { return db.health.failures.Load() }

// storageChecked turns err, the outcome of a write transaction, into the error its
// caller sees: a storage fault becomes a storage_unavailable *enrich.Error and is
// recorded; anything else is returned as it is.
func (db *DB) storageChecked(err error) error {
	if err == nil || !storageFault(err) {
		return err
	}
	db.storageFailed(err)
	return store.StorageUnavailable()
}

// storageFailed records a write refused for storage, and logs it at most once per
// StorageLogInterval, with the count since the last line: a disk that is full for
// hours, or one that flaps between a probe that fits and writes that do not, makes
// one ERROR line a minute, not one a write.
func (db *DB) storageFailed(err error) {
	h := &db.health
	h.failures.Add(1)
	now := db.Now()
	h.mu.Lock()
	if !h.failing.Swap(true) {
		h.since, h.announced = now, false
	}
	h.unreported++
	var n uint64
	if h.reported.IsZero() || now.Sub(h.reported) >= StorageLogInterval {
		n, h.unreported, h.reported, h.announced = h.unreported, 0, now, true
	}
	since := h.since
	h.mu.Unlock()
	if n > 0 {
		db.logger().Error("the database cannot take writes: writes are answered storage_unavailable",
			"failures", n, "failing_since", since.UTC().Format(time.RFC3339), "err", err.Error())
	}
}

// storageRecovered records a write that changed rows and committed (a probe or any
// other): the end of a run of failures, logged once if the run's start was.
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
			"failing_for", db.Now().Sub(since).Round(time.Millisecond).String())
	}
}

// needsReopen reports whether err is one the writer connection keeps for its life: a
// file SQLite opened read-only (its permissions refused writing) stays read-only to
// that connection even once they are fixed.
func needsReopen(err error) bool {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	code := e.Code() & 0xff
	return code == sqlite3.SQLITE_READONLY || code == sqlite3.SQLITE_CANTOPEN
}

// reopenWriter asks the writer to close its connection before its next transaction,
// so that one opens the file anew. The writer does it between batches (reopenIfAsked),
// when no transaction holds the connection: closing it only if idle at the moment of
// asking would miss it under steady write traffic, and keep a read-only connection for
// as long as the traffic lasts.
func (db *DB) reopenWriter() { db.reopen.Store(true) }

// reopenIfAsked closes the writer's connection if reopenWriter asked for it. It runs on
// the writer between batches; it waits for the connection if a checkpoint holds it.
func (db *DB) reopenIfAsked() {
	if !db.reopen.Swap(false) {
		return
	}
	conn, err := db.write.Conn(context.Background())
	if err != nil {
		return // no connection to close: the next transaction opens one
	}
	// A connection whose Raw returns ErrBadConn is closed, not put back in the pool.
	conn.Raw(func(any) error { return driver.ErrBadConn })
	conn.Close()
	db.writerEpoch.Add(1) // after the close: see watchForeignWrites
}

// changes is the number of rows the writer connection changed since it was opened
// (SQLite's total_changes()), or -1 if it cannot be read.
func changes(tx *sql.Tx) int64 {
	var n int64
	if err := tx.QueryRowContext(context.Background(), `SELECT total_changes()`).Scan(&n); err != nil {
		return -1
	}
	return n
}

// Writable reports whether the database takes writes, cheaply: true while no write
// has failed for storage; otherwise it makes a probe write (CheckWritable, at most one
// every second across callers) and reports whether it committed. Workers ask it before
// claiming work, so they wait instead of failing against a full disk.
func (db *DB) Writable(ctx context.Context) bool {
	if !db.StorageFailing() {
		return true
	}
	return db.CheckWritable(ctx) == nil
}
