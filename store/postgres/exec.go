package postgres

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"

	"enrichd/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pgQuerier is what a write transaction (pipe), a pgx transaction and the pool all do.
type pgQuerier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// exec runs the store's statements on PostgreSQL: their ? placeholders become $1, $2,
// ..., and pgx's "no rows" becomes store.ErrNoRows. With reading set, an unreachable
// database answers storage_unavailable (readChecked); a write's errors are left to
// inTx, which retries and counts them.
type exec struct {
	q       pgQuerier
	reading bool
	from    string // a write's: the NOTIFYs' sender (notifyTasks)
}

func (e exec) checked(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNoRows
	}
	if e.reading {
		return (*DB).readChecked(nil, err)
	}
	return err
}

func (e exec) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := e.q.Exec(ctx, rebind(query), args...)
	return tag.RowsAffected(), e.checked(err)
}

// ExecLater sends the statement with the transaction's next one (pipe.later): a Tx is
// always Write's pipe.
func (e exec) ExecLater(ctx context.Context, query string, args ...any) error {
	e.q.(*pipe).later(rebind(query), args...)
	return nil
}

// QueryLater sends the query with the transaction's next statement (pipe.laterQuery),
// its rows read by scan as they arrive.
func (e exec) QueryLater(ctx context.Context, scan func(store.Row) error, query string, args ...any) error {
	e.q.(*pipe).laterQuery(func(rows pgx.Rows) error {
		for rows.Next() {
			if err := scan(rows); err != nil {
				return err
			}
		}
		return e.checked(rows.Err())
	}, rebind(query), args...)
	return nil
}

// Flush sends what was queued (pipe.flush).
func (e exec) Flush(ctx context.Context) error { return e.q.(*pipe).flush(ctx) }

func (e exec) Query(ctx context.Context, query string, args ...any) (store.Rows, error) {
	rows, err := e.q.Query(ctx, rebind(query), args...)
	if err != nil {
		return nil, e.checked(err)
	}
	return pgRows{rows, e}, nil
}

func (e exec) QueryRow(ctx context.Context, query string, args ...any) store.Row {
	return pgRow{e.q.QueryRow(ctx, rebind(query), args...), e}
}

type pgRow struct {
	row pgx.Row
	e   exec
}

func (r pgRow) Scan(dest ...any) error { return r.e.checked(r.row.Scan(dest...)) }

type pgRows struct {
	pgx.Rows
	e exec
}

func (r pgRows) Err() error   { return r.e.checked(r.Rows.Err()) }
func (r pgRows) Close() error { r.Rows.Close(); return nil }

// rebound holds each statement's PostgreSQL text, rewritten once.
var rebound = store.NewRewrites(rebindText)

// indexHint is SQLite's INDEXED BY, which a statement names where SQLite's planner
// would pick a worse index; PostgreSQL's planner takes no hints.
var indexHint = regexp.MustCompile(`(?i)\s+INDEXED\s+BY\s+\w+`)

// rebind is query with its ? placeholders, outside quoted text, numbered $1, $2, ...,
// and without its index hints.
func rebind(query string) string { return rebound.Of(query) }

func rebindText(query string) string {
	query = indexHint.ReplaceAllString(query, "")
	var b strings.Builder
	n := 0
	var quote byte
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// Write runs fn in a write transaction (see inTx).
func (db *DB) Write(ctx context.Context, fn func(store.Tx) error) error {
	return db.inTx(ctx, func(tx *pipe) error { return fn(exec{q: tx, from: db.self}) })
}

// Read runs fn in a read-only transaction (see readTx).
func (db *DB) Read(ctx context.Context, fn func(store.Executor) error) error {
	return db.readTx(ctx, func(tx pgx.Tx) error { return fn(exec{q: tx, reading: true}) })
}

// Reader runs single reads on the pool.
func (db *DB) Reader() store.Executor { return db.reader }

// UniqueViolation reports whether err is a unique constraint's refusal.
func (db *DB) UniqueViolation(err error) bool { return isUniqueViolation(err, "") }
