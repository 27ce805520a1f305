package store

import (
	"context"
	"database/sql"
	"sync"
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

	// ExecLater runs a statement whose outcome the caller does not read. PostgreSQL
	// sends it with the transaction's next statement, or with its commit, a round trip
	// fewer, and its failure fails that statement or the commit (as an earlier
	// statement's error: see UniqueViolation); SQLite runs it at once. Its arguments
	// must not change until it is sent.
	ExecLater(ctx context.Context, query string, args ...any) error
	// QueryLater runs a query whose rows scan reads, one call a row, when they arrive:
	// PostgreSQL sends it as ExecLater sends a statement, so reads that do not depend
	// on each other share one round trip (a task's backlog, its charge's grants and its
	// audit entry's head); SQLite runs it at once. What scan keeps may be used only once
	// Flush, or the next statement that reads a result, has returned; a failure, the
	// query's or scan's, is returned there.
	QueryLater(ctx context.Context, scan func(Row) error, query string, args ...any) error
	// Flush sends what ExecLater and QueryLater queued and returns the first failure (as
	// an earlier statement's error); nothing on SQLite, which queues nothing.
	Flush(ctx context.Context) error

	// Hold takes lock until the transaction ends, and reports whether it did: with
	// wait, once no other transaction holds it; without, only if none does (false: another
	// process is doing that work now). PostgreSQL's replicas take an advisory lock;
	// SQLite's single writer, one process, holds every lock already.
	Hold(ctx context.Context, lock Lock, wait bool) (bool, error)

	// Tasks, the queue, records.

	// PointRecordKey points origin's key at the record recordID, with redirect, the
	// hash of the identifier the key names and that of its record's subject where it
	// differs (answer, nil for NULL: see subjects.go), and returns the record it named
	// before (0: none). On PostgreSQL a key another transaction is adding is waited for
	// and then moved, so a record left without keys is deleted whichever of the two
	// commits last.
	PointRecordKey(ctx context.Context, origin, key string, recordID int64, redirect sql.NullInt64, subject []byte, answer any) (previous int64, err error)
	// LockOrgs holds the organizations' rows, taken in one order, against the other
	// enqueues of their tasks, a claimer dropping their turns, and another write of
	// their Loops' names (PostgreSQL, FOR NO KEY UPDATE, which the inserts that refer
	// to an organization do not wait for; nothing on SQLite's single writer).
	// Everything that makes a task queued calls it before it reads the backlog or joins
	// the line.
	LockOrgs(ctx context.Context, orgIDs ...string) error
	// NextTurn returns the organization whose turn in the queue is next, but for those
	// passed, or ErrNoRows. On PostgreSQL the turn is held for the transaction and
	// those other claimers hold are skipped (SKIP LOCKED); when every turn is held and
	// none was passed, it waits for the first rather than report an empty queue.
	NextTurn(ctx context.Context, passed []string) (orgID string, err error)
	// LeaveQueue drops the organization's turn, which the caller holds and found no
	// task to claim for. On PostgreSQL the turn stays while another transaction holds
	// the organization's row (it may be queuing a task this one cannot see yet) or a
	// queued task of it.
	LeaveQueue(ctx context.Context, orgID string) error
	// NotifyQueued tells the workers of every other replica, when the transaction
	// commits, that a task was queued (PostgreSQL's NOTIFY). The caller wakes its own
	// process's workers (SQLite's are all in the process).
	NotifyQueued(ctx context.Context) error

	// Organizations, keys, credits.

	// LockTaskGrants locks the grants the task taskID was charged from, in grantOrder,
	// before a refund reads their expiry: a row lock on PostgreSQL, nothing on SQLite's
	// single writer.
	LockTaskGrants(ctx context.Context, taskID string) error

	// Loops and deliveries.

	// PickDueDeliveries chooses up to limit due deliveries to claim at now (ms), oldest
	// due first, no Loop past perLoop less what is in flight to it (inFlight, and on
	// PostgreSQL the leases in the database), holding what it picked until the commit.
	PickDueDeliveries(ctx context.Context, now int64, limit, perLoop int, inFlight map[string]int) ([]string, error)
	// LeaseDeliveries leases the deliveries ids until leaseUntil (ms) and returns them
	// in that order, ready to send at now (ms).
	LeaseDeliveries(ctx context.Context, ids []string, leaseUntil, now int64) ([]*Dispatch, error)
}

// Lock names work that one process does at a time (Tx.Hold).
type Lock int

const (
	LockSessionPurge     Lock = 2    // PurgeSessions
	LockInstall          Lock = 3    // the first start, Install and its link
	LockExpireTasks      Lock = 0x10 // ExpireTasks
	LockRequeueAbandoned Lock = 0x11 // RequeueAbandoned
	LockPurgeSettled     Lock = 0x12 // PurgeSettled
	LockDueWatches       Lock = 0x20 // DueWatches' claims
	// LockSourceBudgets is held by a booking that a budget caps, from its read of the
	// month to its write (BookSourceAsk); LockSettleDeadAsks by SettleDeadSourceAsks.
	LockSourceBudgets  Lock = 0x30
	LockSettleDeadAsks Lock = 0x31
)

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

// fromNullMS is a nullable milliseconds column as a time. The column is read into
// sql.NullInt64 rather than *int64: a pointer target costs an allocation a row.
func fromNullMS(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMS(v.Int64)
	return &t
}

// now is the store's clock at the millisecond precision it stores, so what a call
// returns equals what a later read of the same row gives.
func (db *DB) now() time.Time { return db.Now().UTC().Truncate(time.Millisecond) }

// Rewrites keeps each statement's text as an engine runs it, worked out once by
// rewrite: a driver looks it up for every statement it runs, and a map under a read
// lock does that without allocating (a sync.Map boxes the string key every time).
type Rewrites struct {
	rewrite func(string) string
	mu      sync.RWMutex
	texts   map[string]string
}

// NewRewrites keeps what rewrite makes of each statement.
func NewRewrites(rewrite func(string) string) *Rewrites {
	return &Rewrites{rewrite: rewrite, texts: map[string]string{}}
}

// Of is query as the engine runs it.
func (r *Rewrites) Of(query string) string {
	r.mu.RLock()
	out, ok := r.texts[query]
	r.mu.RUnlock()
	if ok {
		return out
	}
	out = r.rewrite(query)
	r.mu.Lock()
	r.texts[query] = out
	r.mu.Unlock()
	return out
}
