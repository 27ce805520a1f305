// Package store is what the rest of enrichd calls to keep its state: organizations and
// API keys, users and sessions, the credit ledger, tasks and their queue, idempotency
// keys, the company and person records (the 30-day store and the imported dataset),
// Loops and their webhook deliveries, watches, batches and fill lists. It owns the
// types those are, the rules, and every operation: each a method of DB written once,
// its steps small functions that take the transaction, its statements one text for
// every engine (? placeholders; PostgreSQL's row locks, which SQLite's driver drops).
// What differs by engine is a Driver's, one per engine: how a statement runs
// (Executor), how a write transaction runs (SQLite's group commit, PostgreSQL's
// retries), and a few primitives (driver.go, and Tx in sql.go) where the SQL or the
// locking must differ. store/sqlite is a file, the default; store/postgres a server
// several replicas share. It knows no HTTP.
package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"enrichd/enrich"
)

// DB is the enrichd database: a Driver, and the clock every driver writes times by.
// Its methods are the Driver's; the few a driver may lack (Wakeups, Heartbeat) are
// answered here for a single process.
type DB struct {
	Driver

	// Now is the clock of every timestamp the store writes; tests move it.
	Now func() time.Time

	answers answerMemo // store hits' results by their input (see answerAhead)
	scrubs  scrubMarks // the marks of erasures ready to complete (CompleteErasures)

	// subjects hashes the people and companies rows are about (WithSubjectKey); nil
	// when the database was opened without the key, which then writes no such row.
	subjects *enrich.Subjects
}

// OpenFunc opens a driver on dsn. schema is the text of SQLite's migrations (the
// root schema.sql); a driver with migrations of its own ignores it. now is the clock
// the driver must read for every time it writes.
type OpenFunc func(ctx context.Context, dsn, schema string, now func() time.Time, opts Options) (Driver, error)

var (
	driversMu sync.Mutex
	drivers   = map[string]OpenFunc{}
)

// Register makes a driver available to Open under name: "sqlite" for file paths,
// "postgres" for postgres:// and postgresql:// URLs. Drivers call it from init, as
// database/sql drivers do; a program imports the ones it wants.
func Register(name string, open OpenFunc) {
	driversMu.Lock()
	defer driversMu.Unlock()
	if _, dup := drivers[name]; dup {
		panic("store: driver registered twice: " + name)
	}
	drivers[name] = open
}

// Engine names the driver Open picks for dsn: "postgres" for a postgres:// or
// postgresql:// URL, "sqlite" for anything else, which is a file path.
func Engine(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		return "postgres"
	}
	return "sqlite"
}

// Open opens the database dsn names (see Engine) and applies its pending migrations.
// The options size SQLite's page caches and either engine's connections.
func Open(ctx context.Context, dsn, schema string, opts ...Option) (*DB, error) {
	if dsn == "" {
		return nil, fmt.Errorf("no database path")
	}
	o, err := ApplyOptions(opts)
	if err != nil {
		return nil, err
	}
	name := Engine(dsn)
	driversMu.Lock()
	open, ok := drivers[name]
	known := make([]string, 0, len(drivers))
	for n := range drivers {
		known = append(known, n)
	}
	driversMu.Unlock()
	if !ok {
		sort.Strings(known)
		return nil, fmt.Errorf("no %s driver in this program (it has: %s)", name, strings.Join(known, ", "))
	}
	db := &DB{Now: time.Now}
	d, err := open(ctx, dsn, schema, func() time.Time { return db.Now() }, o)
	if err != nil {
		return nil, err
	}
	db.Driver = d
	if o.SubjectKey != nil {
		db.subjects = enrich.NewSubjects(o.SubjectKey)
		if err := db.claimSubjectKey(ctx, o.SubjectKey); err != nil {
			d.Close()
			return nil, err
		}
		// Rows from before subjects were hashed are hashed now, before any request
		// looks a subject up; on PostgreSQL a replica starting at the same time does
		// the same rows again, to the same effect. A database that cannot take writes
		// now opens all the same (its writes answer storage_unavailable): the serving
		// process's maintenance hashes them once it can.
		if _, err := db.HashSubjects(ctx, 0); err != nil && !IsStorageFault(err) {
			d.Close()
			return nil, fmt.Errorf("hashing the subjects of rows from before: %w", err)
		}
	}
	return db, nil
}

// Wakeups signals when another process enqueued a task, so that idle workers look
// for it at once rather than at their next poll. It is nil, which never signals, on
// an engine that only one process writes.
func (db *DB) Wakeups() <-chan struct{} {
	if w, ok := db.Driver.(interface{ Wakeups() <-chan struct{} }); ok {
		return w.Wakeups()
	}
	return nil
}

// Heartbeat records that this replica is alive for ttl and returns how many replicas
// are: each enforces its share of a key's rate limit. An engine that only one process
// serves has one.
func (db *DB) Heartbeat(ctx context.Context, replica string, ttl time.Duration) (int, error) {
	if h, ok := db.Driver.(interface {
		Heartbeat(context.Context, string, time.Duration) (int, error)
	}); ok {
		return h.Heartbeat(ctx, replica, ttl)
	}
	return 1, nil
}

// liveReplicas returns the replicas whose heartbeat is live (see Heartbeat), and
// replicated true, where the engine keeps them; an engine that only one process serves
// keeps none.
func (db *DB) liveReplicas(ctx context.Context) (ids []string, replicated bool, err error) {
	if l, ok := db.Driver.(interface {
		LiveReplicas(context.Context) ([]string, error)
	}); ok {
		ids, err = l.LiveReplicas(ctx)
		return ids, true, err
	}
	return nil, false, nil
}

// HoldWatchScheduler makes this process the one scheduling watches until release is
// called, or reports false when another replica is scheduling. An engine that only one
// process serves always says yes.
func (db *DB) HoldWatchScheduler(ctx context.Context) (release func(), ok bool, err error) {
	if h, ok := db.Driver.(interface {
		HoldWatchScheduler(context.Context) (func(), bool, error)
	}); ok {
		return h.HoldWatchScheduler(ctx)
	}
	return func() {}, true, nil
}

// StripPath drops the operation and path of an *fs.PathError, for a message that
// already names the path once.
func StripPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
