// Package postgres is the store's driver for PostgreSQL, for several enrichd replicas
// sharing one database. It runs package store's statements (exec.go: their ?
// placeholders numbered), runs a write transaction its way (inTx, with retries),
// provides the primitives of store.Driver and store.Tx that differ by engine (the
// turn a claim takes with SKIP LOCKED, the deliveries a sender leases, advisory
// locks, NOTIFY), and its own migrations (schema.sql), LISTEN wakeups, the key cache
// that a NOTIFY empties on every replica, and replica heartbeats. It composes no operation: those are package store's.
//
// SQLite's single writer made read-then-write safe; here many writers run at once, so
// every rule that rested on it rests on the database instead, in the locks package
// store's statements take and in this driver's primitives: grants are locked (FOR
// UPDATE) before a charge, claims skip rows another replica holds (FOR UPDATE SKIP
// LOCKED), a Loop's delivery cap is counted over the deliveries leased in the
// database, idempotency rests on a unique key, and sweeps run on one replica at a time
// (pg_try_advisory_xact_lock). A task enqueued on one replica wakes the workers of the
// others through LISTEN/NOTIFY (DB.Wakeups), and its own in-process, polling staying the
// fallback.
//
// Transactions run at READ COMMITTED; a serialization failure or a deadlock is retried
// a few times (inTx). A write sends what needs no answer with its next statement
// (pipe). Times are BIGINT milliseconds since the epoch, UTC.
package postgres

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"enrichd/store"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed schema.sql
var schema string

// DefaultPoolSize is the connections a replica keeps at most when the DSN does not say
// (pool_max_conns=N). pgxpool's own default, the number of CPUs and at least 4, is too
// few: a transaction holds its connection for every round trip it makes, and the
// workers, the webhook sender and the API's requests all wait on the pool at once. Ten
// keeps ten replicas, with their LISTEN connections, inside PostgreSQL's default
// max_connections of 100 with room for an operator's psql and backups.
const DefaultPoolSize = 10

// Advisory lock keys: "enrichd" in ASCII in the high bytes, the purpose in the lowest,
// so they do not collide with another program's locks on the same database: the
// migrations' 0x01, the store's Locks (store.Lock's number), the watch round's 0x21.
const (
	lockBase    int64 = 0x656e7269636864 << 8
	lockMigrate       = lockBase | 0x01
)

// Hold is store.Tx's: the lock's advisory lock, held until the transaction ends.
func (e exec) Hold(ctx context.Context, lock store.Lock, wait bool) (bool, error) {
	key := lockBase | int64(lock)
	if wait {
		_, err := e.Exec(ctx, `SELECT pg_advisory_xact_lock(?)`, key)
		return err == nil, err
	}
	var ok bool
	err := e.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(?)`, key).Scan(&ok)
	return ok, err
}

// DB is the enrichd store on a PostgreSQL database.
type DB struct {
	pool   *pgxpool.Pool
	reader store.Executor // the pool as an Executor, made once (see Reader)
	// nowFn is the clock of every timestamp the store writes; tests move it.
	nowFn func() time.Time
	known int // migrations in the schema this binary embeds

	store.Health // storage failures, and the probe write (probeWrite)

	transactions atomic.Int64 // inTx calls since Open
	roundTrips   atomic.Int64 // the write transactions' since Open (pipe)
	commits      atomic.Int64 // of them, the ones that committed

	touches store.KeyTouches // keys' last use being written
	keys    store.KeyCache   // valid keys by the hash of their token, while listening (KeyCache)
	// suppressed is the organizations' suppressions, while listening (SuppressionCache)
	suppressed store.SuppressionCache

	listen listener
	// self is what this process's NOTIFYs of queued tasks carry, so that its own
	// listener passes them over: the process wakes its workers itself as it queues.
	self      string
	closing   chan struct{}
	closeOnce sync.Once
}

// Open connects to the database at dsn (a postgres:// URL or key=value string) and
// applies the migrations it lacks. now is the clock of every timestamp it writes.
func Open(ctx context.Context, dsn string, now func() time.Time) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("the PostgreSQL connection string: %w", err)
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = DefaultPoolSize
	}
	if now == nil {
		now = time.Now
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to PostgreSQL: %w", err)
	}
	db := &DB{pool: pool, nowFn: now, self: uuid.NewString(), closing: make(chan struct{})}
	db.reader = exec{q: pool, reading: true}
	db.Health.Init(func() time.Time { return db.nowFn() }, db.probeWrite)
	if err := db.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return db, nil
}

// Close stops the LISTEN connection and the key touches, and closes the pool.
func (db *DB) Close() error {
	db.closeOnce.Do(func() { close(db.closing) })
	db.touches.Close()
	db.listen.stop()
	db.pool.Close()
	return nil
}

// now is the store's clock at the millisecond precision it stores, so what a call
// returns equals what a later read of the same row gives.
func (db *DB) now() time.Time { return db.nowFn().UTC().Truncate(time.Millisecond) }

// migrate applies the embedded migrations the database lacks. Replicas started together
// would each find a migration missing and apply it twice: a session advisory lock,
// held on one connection across all of them, makes the others wait and then find
// nothing to do.
func (db *DB) migrate(ctx context.Context) error {
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return db.storageChecked(fmt.Errorf("cannot connect to PostgreSQL: %w", err))
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, lockMigrate); err != nil {
		return fmt.Errorf("PostgreSQL: waiting for the migration lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, lockMigrate)
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version BIGINT PRIMARY KEY, title TEXT NOT NULL, applied_at BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("PostgreSQL: creating the migrations table: %w", err)
	}
	known, err := store.Migrate(ctx, schema, db.now, func(fn func(store.Executor, func(string) error) error) error {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			return fn(exec{q: tx}, func(script string) error { _, err := tx.Exec(ctx, script); return err })
		})
	})
	if err != nil {
		return fmt.Errorf("PostgreSQL: %w", err)
	}
	db.known = known
	return nil
}

// KnownMigrations is how many migrations the schema this binary embeds has.
func (db *DB) KnownMigrations() int { return db.known }

// WriteStats are the totals since Open: write transactions run (inTx), and commits.
// Without group commit they differ only by the transactions that failed.
func (db *DB) WriteStats() (transactions, commits int64) {
	return db.transactions.Load(), db.commits.Load()
}

// writeTimeout bounds a write transaction. Its statements do not stop when the caller
// gives up (see inTx), so a database that stops answering would otherwise hold the
// caller, and a pooled connection, for as long as the TCP connection lives.
const writeTimeout = 30 * time.Second

// maxTxAttempts is how many times a transaction is run when it fails on a
// serialization failure or a deadlock, which another attempt usually does not meet.
const maxTxAttempts = 4

// inTx runs fn in a read-write transaction (READ COMMITTED): its changes are committed
// when fn returns nil and undone otherwise. A caller gives up on a write by not starting
// it, never by interrupting it, as with the SQLite store: once begun, fn runs to its end
// whatever becomes of ctx (bounded by writeTimeout). A serialization failure or a
// deadlock (40001, 40P01) runs fn again, so fn must have no effect outside the
// transaction. A write the database cannot take (see storageFault) fails with the
// store's storage_unavailable *enrich.Error.
func (db *DB) inTx(ctx context.Context, fn func(tx *pipe) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	db.transactions.Add(1)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	var err error
	for attempt := 1; ; attempt++ {
		err = db.tx1(ctx, fn)
		if attempt == maxTxAttempts || !retryable(err) {
			break
		}
		select {
		case <-time.After(time.Duration(attempt) * time.Duration(1+rand.IntN(10)) * time.Millisecond):
		case <-ctx.Done():
			return db.storageChecked(err)
		}
	}
	return db.storageChecked(err)
}

func (db *DB) tx1(ctx context.Context, fn func(tx *pipe) error) error {
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("starting a database transaction: %w", err)
	}
	defer conn.Release()
	tx := newPipe(conn.Conn(), &db.roundTrips)
	defer tx.rollback(context.WithoutCancel(ctx))
	if err := store.Guarded(fn)(tx); err != nil {
		return err
	}
	// While the database fails, a commit that wrote proves it takes writes again; one
	// that wrote nothing proves nothing.
	wrote := false
	if db.StorageFailing() {
		if err := tx.QueryRow(ctx, `SELECT pg_current_xact_id_if_assigned() IS NOT NULL`).Scan(&wrote); err != nil {
			return err
		}
	}
	if err := tx.commit(ctx); err != nil {
		return err
	}
	db.commits.Add(1)
	if wrote {
		db.Recovered()
	}
	return nil
}

// readTx runs fn in a read-only REPEATABLE READ transaction, for one consistent view
// across several queries. A single query needs none: it reads db.pool directly (and
// passes its error through readChecked).
func (db *DB) readTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	err := pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
	return db.readChecked(err)
}

func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// storageFault reports whether err says the database cannot take writes or cannot be
// reached: the server shutting down or not yet up (57P01-57P03), a full disk (53100),
// a read-only server (25006, a standby after a fail-over), an I/O error or damage
// (58030, XX001, XX002), a lost or refused connection (class 08, a failed connect, a
// network error). Constraint violations, lock waits and the caller's own cancellation
// are not.
func storageFault(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "57P01", "57P02", "57P03", "53100", "25006", "58030", "XX001", "XX002":
			return true
		}
		return strings.HasPrefix(pe.Code, "08")
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.SafeToRetry(err) // a connection found closed before anything was sent
}

// commitError is a COMMIT that failed. When the connection was lost on the way, the
// server may have committed or not: the caller cannot be told "nothing was done".
type commitError struct{ err error }

func (e *commitError) Error() string { return "committing to the database: " + e.err.Error() }
func (e *commitError) Unwrap() error { return e.err }

// storageChecked turns err, the outcome of a write transaction, into the error its
// caller sees (store.Health.WriteChecked), but a COMMIT lost on the way answers
// commit_unknown: the server may have committed it.
func (db *DB) storageChecked(err error) error {
	checked := db.WriteChecked(err, storageFault)
	if ce := (*commitError)(nil); store.IsStorageFault(checked) && errors.As(err, &ce) {
		return store.CommitUnknown()
	}
	return checked
}

// readChecked is storageChecked for a read: an unreachable database answers
// storage_unavailable (503, retry) rather than an internal error, but a read does not
// count as a write refused (StorageFailures).
func (db *DB) readChecked(err error) error { return store.ReadChecked(err, storageFault) }

// tasksChannel is the NOTIFY channel of enqueued tasks.
const tasksChannel = "enrichd_tasks"

// notifyTasks tells every other replica's listener (DB.Wakeups) that a task was
// queued; from is the sender (DB.self). It is sent with the transaction's next
// statement: PostgreSQL delivers the notification when the transaction commits, and
// not at all if it rolls back; notifications of one transaction are folded into one.
func notifyTasks(tx *pipe, from string) {
	tx.later(`SELECT pg_notify($1, $2)`, tasksChannel, from)
}

func ms(t time.Time) int64 { return t.UnixMilli() }
