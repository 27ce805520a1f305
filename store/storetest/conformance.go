package storetest

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"testing"
	"time"

	"enrichd/store"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql "pgx", for Raw on PostgreSQL
	_ "modernc.org/sqlite"             // database/sql "sqlite", for Raw on SQLite
)

// Conformance runs everything the store promises, whatever the engine, each test on a
// fresh database: fresh returns the DSN of a new, empty one (a SQLite file path, or a
// postgres:// URL) that is removed when the test ends. Tests of one engine's own
// machinery (files, pragmas, query plans, checkpoints) stay beside that engine.
func Conformance(t *testing.T, fresh func(t testing.TB) string) {
	for _, c := range conformanceTests {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, NewEnv(t, fresh(t)))
		})
	}
}

type conformanceTest struct {
	name string
	run  func(t *testing.T, e *Env)
}

// Env is one conformance test's database: a first handle on it, the clock every handle
// of the test reads, and ways to open more handles and to look at the tables.
type Env struct {
	DSN   string
	Clock *Clock
	DB    *store.DB
	t     testing.TB
}

// NewEnv opens the database at dsn on a clock standing at 2026-11-01 12:00 UTC.
func NewEnv(t testing.TB, dsn string) *Env {
	t.Helper()
	clk := NewClock(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	return &Env{DSN: dsn, Clock: clk, DB: Open(t, dsn, clk), t: t}
}

// Postgres reports whether the database is a PostgreSQL one.
func (e *Env) Postgres() bool { return isPostgres(e.DSN) }

func isPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// Open opens another handle on the same database, on the same clock: what a second
// process on the SQLite file, or a second replica on the PostgreSQL database, is.
func (e *Env) Open() *store.DB {
	e.t.Helper()
	return Open(e.t, e.DSN, e.Clock)
}

// Raw opens database/sql on the same database, for the checks that read the tables
// themselves (the invariants no method returns). Statements use ? placeholders on both
// engines; it is closed when the test ends.
func (e *Env) Raw() *Raw {
	e.t.Helper()
	return OpenRaw(e.t, e.DSN)
}

// OpenRaw is Env.Raw for the database at dsn, a SQLite file's path or a PostgreSQL URL.
func OpenRaw(t testing.TB, dsn string) *Raw {
	t.Helper()
	// The store's own handle stays open beside this one, and its background
	// checkpoint takes the write lock for a moment each quiet second: without a busy
	// timeout a statement here that meets it fails at once with SQLITE_BUSY.
	pg := isPostgres(dsn)
	driver := "sqlite"
	if pg {
		driver = "pgx"
	} else {
		dsn += "?_pragma=busy_timeout(10000)"
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &Raw{db: db, pg: pg}
}

// HoldSnapshot begins a transaction that may still read the rows as they are now, as a
// long reader would, which keeps an erasure from completing: on SQLite a read that
// pins the log, on PostgreSQL a transaction id taken. Roll it back to let go; it is
// rolled back when the test ends.
func (r *Raw) HoldSnapshot(t testing.TB) *sql.Tx {
	t.Helper()
	tx, err := r.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	var n int64
	if err := tx.QueryRow(`SELECT count(*) FROM tasks`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if r.pg {
		if _, err := tx.Exec(`SELECT pg_current_xact_id()`); err != nil {
			t.Fatal(err)
		}
	}
	return tx
}

// Raw is database/sql on a test's database, with ? placeholders on both engines.
type Raw struct {
	db *sql.DB
	pg bool
}

// Pick returns the statement for the engine, where their dialects part.
func (r *Raw) Pick(sqlite, postgres string) string {
	if r.pg {
		return postgres
	}
	return sqlite
}

// Begin begins a transaction on its own connection, for a test that holds one open
// (its statements take no ? placeholders).
func (r *Raw) Begin() (*sql.Tx, error) { return r.db.Begin() }

func (r *Raw) Exec(q string, args ...any) (sql.Result, error) {
	return r.db.Exec(r.bind(q), args...)
}

func (r *Raw) QueryRow(q string, args ...any) *sql.Row {
	return r.db.QueryRow(r.bind(q), args...)
}

func (r *Raw) Query(q string, args ...any) (*sql.Rows, error) {
	return r.db.Query(r.bind(q), args...)
}

// bind numbers the ? placeholders for PostgreSQL. The tests' statements hold no ?
// inside string literals.
func (r *Raw) bind(q string) string {
	if !r.pg || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	n := 0
	for _, c := range q {
		if c == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

var _ = context.Background
