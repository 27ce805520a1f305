package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"regexp"

	"enrichd/store"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// The store's statements speak SQLite but for their row locks (FOR UPDATE, SKIP
// LOCKED, FOR KEY SHARE), which the single writer makes needless: unlocked drops
// them, once per statement. They run prepared (see stmtCache).

var rowLock = regexp.MustCompile(`(?i)\s+FOR\s+(?:NO\s+KEY\s+UPDATE|KEY\s+SHARE|UPDATE|SHARE)(?:\s+OF\s+\w+(?:\s*,\s*\w+)*)?(?:\s+SKIP\s+LOCKED|\s+NOWAIT)?`)

var unlockedQueries = store.NewRewrites(func(query string) string { return rowLock.ReplaceAllString(query, "") })

// unlocked is query without its row-lock clauses.
func unlocked(query string) string { return unlockedQueries.Of(query) }

// txExec is a write transaction as store.Tx.
type txExec struct{ tx *Tx }

func (e txExec) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := e.tx.ExecContext(ctx, unlocked(query), args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// ExecLater runs the statement at once: the writer is in this process, and a statement
// costs no round trip.
func (e txExec) ExecLater(ctx context.Context, query string, args ...any) error {
	_, err := e.Exec(ctx, query, args...)
	return err
}

// QueryLater runs the query at once, as ExecLater runs a statement.
func (e txExec) QueryLater(ctx context.Context, scan func(store.Row) error, query string, args ...any) error {
	rows, err := e.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Flush has nothing to send: ExecLater and QueryLater ran their statements at once.
func (e txExec) Flush(context.Context) error { return nil }

func (e txExec) Query(ctx context.Context, query string, args ...any) (store.Rows, error) {
	return e.tx.QueryContext(ctx, unlocked(query), args...)
}

func (e txExec) QueryRow(ctx context.Context, query string, args ...any) store.Row {
	return e.tx.QueryRowContext(ctx, unlocked(query), args...)
}

// Hold is store.Tx's: the single writer, in one process, holds every lock already.
func (txExec) Hold(context.Context, store.Lock, bool) (bool, error) { return true, nil }

// readExec is the reader pool, or one of its transactions, as a store.Executor. A
// read the file cannot serve answers storage_unavailable, as a write does.
type readExec struct {
	q interface {
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	}
}

func (e readExec) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	return 0, errors.New("a write on the reader")
}

func (e readExec) Query(ctx context.Context, query string, args ...any) (store.Rows, error) {
	rows, err := e.q.QueryContext(ctx, unlocked(query), args...)
	return rows, readChecked(err)
}

func (e readExec) QueryRow(ctx context.Context, query string, args ...any) store.Row {
	return checkedRow{e.q.QueryRowContext(ctx, unlocked(query), args...)}
}

type checkedRow struct{ *sql.Row }

func (r checkedRow) Scan(dest ...any) error { return readChecked(r.Row.Scan(dest...)) }

// readChecked answers storage_unavailable for a read the file cannot serve; a read
// does not count as a write refused.
func readChecked(err error) error { return store.ReadChecked(err, storageFault) }

// Write runs fn in a write transaction on the single writer (see inTx).
func (db *DB) Write(ctx context.Context, fn func(store.Tx) error) error {
	return db.inTx(ctx, func(tx *Tx) error { return fn(txExec{tx}) })
}

// Read runs fn in a read transaction of the reader pool.
func (db *DB) Read(ctx context.Context, fn func(store.Executor) error) error {
	return readChecked(db.inReadTx(ctx, func(tx *Tx) error { return fn(readExec{tx}) }))
}

// Reader runs single reads on the reader pool.
func (db *DB) Reader() store.Executor { return db.reader }

// UniqueViolation reports whether err is a UNIQUE or PRIMARY KEY constraint's refusal.
func (db *DB) UniqueViolation(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && (e.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || e.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY)
}
