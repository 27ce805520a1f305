package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pipe is a write transaction on one connection that sends what needs no answer with
// the next statement that does, in one round trip: its BEGIN with its first statement,
// the statements queued by later (a lock taken, a NOTIFY, a row whose failure is the
// transaction's) and the queries queued by laterQuery (reads that do not depend on
// each other) with the next statement or flush, and the last of them with its COMMIT. A
// batch row's task took fifteen round trips; on a two-core machine each cost about as
// much as the statements' own work on the server (docs/performance.md).
//
// The statements run in the order they were made, as one at a time would; only their
// errors come later. A statement queued by later that fails makes the next statement,
// or the commit, fail with its error (laterError), and PostgreSQL runs nothing after it
// in the transaction.
type pipe struct {
	conn    *pgx.Conn
	trips   *atomic.Int64 // counts each round trip
	pending *pgx.Batch    // not sent yet, in their order; nil when none
	sent    bool          // a statement, the BEGIN with it, reached the connection
	// failed is the first failure read from a batch: the transaction no longer
	// commits, even if its caller passes over the failure (a query's read refused its
	// rows, and the server ran on; pgx could not prepare a batch, and none of it ran).
	failed error
}

func newPipe(conn *pgx.Conn, trips *atomic.Int64) *pipe {
	p := &pipe{conn: conn, trips: trips}
	p.later("begin")
	return p
}

// later queues a statement to be sent with the next one. Its arguments must not change
// until then.
func (p *pipe) later(sql string, args ...any) *pgx.QueuedQuery {
	if p.pending == nil {
		p.pending = &pgx.Batch{}
	}
	return p.pending.Queue(sql, args...)
}

// laterQuery queues a query to be sent with the next statement, its rows given to read
// as they arrive; a failure of read's is returned as the query's own (laterError).
func (p *pipe) laterQuery(read func(pgx.Rows) error, sql string, args ...any) {
	p.later(sql, args...).Query(read)
}

// isRead reports whether q was queued by laterQuery, its rows to be read.
func isRead(q *pgx.QueuedQuery) bool { return q.Fn != nil }

// readPending reads the outcomes of b's first n statements, in their order, each
// query's rows through its read (laterQuery).
func readPending(br pgx.BatchResults, b *pgx.Batch, n int) error {
	for _, q := range b.QueuedQueries[:n] {
		var err error
		if isRead(q) {
			err = q.Fn(br)
		} else {
			_, err = br.Exec()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// laterError is the failure of a statement queued by later, returned by the statement
// it was sent with: not that statement's own (a unique violation of the earlier one is
// not the later one's, see isUniqueViolation), but a retry of the transaction or a
// storage fault is read through it. A statement of the batch that pgx could not
// prepare or encode is returned as it is (send).
type laterError struct{ err error }

func (e *laterError) Error() string {
	return "an earlier statement of the transaction: " + e.err.Error()
}
func (e *laterError) Unwrap() error { return e.err }

// send sends the pending statements and then sql, reads the pending ones' outcomes,
// and leaves sql's to the caller, who closes br.
func (p *pipe) send(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	b := p.pending
	p.pending, p.sent = nil, true
	n := b.Len()
	b.Queue(sql, args...)
	p.trips.Add(1)
	br := p.conn.SendBatch(ctx, b)
	if err := readPending(br, b, n); err != nil {
		p.failed = err
		br.Close()
		// pgx prepares and encodes the whole batch before it sends any of it: a
		// failure there is of the statement it names, and nothing ran.
		if pe := (pgx.ErrPreprocessingBatch{}); errors.As(err, &pe) && pe.SQL() == sql {
			return nil, err
		}
		return nil, &laterError{err}
	}
	return br, nil
}

// flush sends the pending statements alone and reads their outcomes.
func (p *pipe) flush(ctx context.Context) error {
	b := p.pending
	if b == nil {
		return nil
	}
	p.pending, p.sent = nil, true
	p.trips.Add(1)
	br := p.conn.SendBatch(ctx, b)
	err := readPending(br, b, b.Len())
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		p.failed = err
		return &laterError{err}
	}
	return nil
}

func (p *pipe) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if p.pending == nil {
		p.trips.Add(1)
		return p.conn.Exec(ctx, sql, args...)
	}
	br, err := p.send(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

func (p *pipe) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if p.pending == nil {
		p.trips.Add(1)
		return p.conn.Query(ctx, sql, args...)
	}
	br, err := p.send(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

func (p *pipe) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if p.pending == nil {
		p.trips.Add(1)
		return p.conn.QueryRow(ctx, sql, args...)
	}
	br, err := p.send(ctx, sql, args)
	if err != nil {
		return errRow{err}
	}
	return batchRow{row: br.QueryRow(), br: br}
}

// commit sends the pending statements with the COMMIT. A statement that fails there
// was not committed, and nothing after it; a connection lost on the way leaves the
// outcome unknown (commitError).
func (p *pipe) commit(ctx context.Context) error {
	if p.failed != nil {
		return fmt.Errorf("not committed after an earlier statement failed: %w", p.failed)
	}
	if p.pending != nil && slices.ContainsFunc(p.pending.QueuedQueries, isRead) {
		// A query's rows were asked for and never used before the commit: read them
		// first, so that a failure to read them is not taken for the commit's.
		if err := p.flush(ctx); err != nil {
			return err
		}
	}
	b := p.pending
	if !p.sent && b.Len() == 1 {
		p.pending = nil
		return nil // nothing but the BEGIN: there is no transaction to end
	}
	if b == nil {
		b = &pgx.Batch{}
	}
	begun := p.sent
	p.pending, p.sent = nil, true
	n := b.Len()
	b.Queue("commit")
	p.trips.Add(1)
	br := p.conn.SendBatch(ctx, b)
	defer br.Close()
	if err := readPending(br, b, n); err != nil {
		if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) {
			return &laterError{err} // the server refused it, and skipped the commit
		}
		return commitFailed(err, begun)
	}
	tag, err := br.Exec()
	if err == nil {
		err = br.Close()
	}
	if err != nil {
		return commitFailed(err, begun)
	}
	if tag.String() == "ROLLBACK" { // a statement failed and its error was passed over
		return fmt.Errorf("the transaction was rolled back at its commit: %w", pgx.ErrTxCommitRollback)
	}
	return nil
}

// commitFailed is the error of a commit's batch that the server did not refuse: its
// outcome is unknown (commitError), unless nothing of it ran: a statement pgx could not
// encode or the server could not prepare, or a batch that began the transaction too
// (only statements sent later) on a connection found closed before anything was sent,
// which a BEGIN of its own had met first and reported as such.
func commitFailed(err error, begun bool) error {
	unsent := errors.As(err, &pgx.ErrPreprocessingBatch{}) && !storageFault(err)
	if unsent || (!begun && pgconn.SafeToRetry(err)) {
		return err
	}
	return &commitError{err}
}

// rollback ends a transaction that did not commit, if the connection is in one.
func (p *pipe) rollback(ctx context.Context) {
	p.pending = nil
	if p.sent && !p.conn.IsClosed() && p.conn.PgConn().TxStatus() != 'I' {
		p.trips.Add(1)
		p.conn.Exec(ctx, "rollback")
	}
}

// batchRows are a query's rows read from a batch, which closing them closes.
type batchRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if r.br != nil {
		r.err = r.br.Close()
		r.br = nil
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

// batchRow is a query's one row read from a batch, which Scan closes.
type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
