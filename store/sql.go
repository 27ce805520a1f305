package store

import (
	"context"
	"database/sql"
	"time"
)

// Executor runs SQL: a driver's transaction (Tx), or its reader for a read outside
// one (Driver.Reader). The statements are package store's, written once with ?
// placeholders; a driver rewrites them for its engine (PostgreSQL's $1, $2, ...).
type Executor interface {
	// Exec runs a statement and returns how many rows it changed.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	// QueryRow's Scan returns ErrNoRows when the query returned no row.
	QueryRow(ctx context.Context, query string, args ...any) Row
}

// Row is one row a query returned.
type Row interface{ Scan(dest ...any) error }

// Rows are the rows a query returned, read as database/sql's are.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// ErrNoRows is what Row.Scan returns on every engine when there was no row.
var ErrNoRows = sql.ErrNoRows

// Tx is a write transaction: an Executor, and the primitives whose SQL or locks differ
// by engine. The operations of package store are composed of these and of the
// statements they run through the Executor.
type Tx interface {
	Executor
	Borrowed

	// Tasks, the queue, records.

	// Organizations, keys, credits.

	// Users, sessions, the first start.

	// Loops and deliveries.

	// Watches and batches.

	// The database's upkeep.

	// LockPurge reports whether this transaction may purge (PurgeSettled): false while
	// another process's purge holds it (PostgreSQL's advisory lock); on SQLite, whose
	// single writer runs one purge at a time anyway, always true.
	LockPurge(ctx context.Context) (bool, error)
}

// collect reads every row of rows with scan, closing them.
func collect[T any](rows Rows, err error, scan func(Row) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// ms is t as the store keeps times: BIGINT milliseconds since the epoch, UTC.
func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

// nullMS is t as a nullable milliseconds parameter.
func nullMS(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMilli()
}

// fromNullMS is a nullable milliseconds column, read into *int64, as a time.
func fromNullMS(v *int64) *time.Time {
	if v == nil {
		return nil
	}
	t := fromMS(*v)
	return &t
}

// now is the store's clock at the millisecond precision it stores, so what a call
// returns equals what a later read of the same row gives.
func (db *DB) now() time.Time { return db.Now().UTC().Truncate(time.Millisecond) }

// write runs fn in one write transaction of the driver's (see Driver.Write).
func (db *DB) write(ctx context.Context, fn func(Tx) error) error { return db.Driver.Write(ctx, fn) }
