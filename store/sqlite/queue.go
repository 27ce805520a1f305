package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"enrichd/store"
)

// The queue's primitives: the single writer orders the claims, so a claim takes the
// first turn, drops a turn with nothing queued at once, and sends a served turn to
// max(seq) + 1.

// NextTurn returns the first turn in the line: a turn with nothing queued has been
// dropped (LeaveQueue), so none is passed.
func (e txExec) NextTurn(ctx context.Context, passed []string) (string, error) {
	var org string
	err := e.tx.QueryRowContext(ctx, `SELECT org_id FROM queue_turns ORDER BY seq LIMIT 1`).Scan(&org)
	if errors.Is(err, sql.ErrNoRows) {
		return "", store.ErrNoRows
	}
	return org, err
}

// LeaveQueue drops the organization's turn: nothing else writes meanwhile.
func (e txExec) LeaveQueue(ctx context.Context, orgID string) error {
	_, err := e.tx.ExecContext(ctx, `DELETE FROM queue_turns WHERE org_id = ?`, orgID)
	return err
}

// QueueSeq is the place after the last in line, which the single writer computes alone.
func (db *DB) QueueSeq() string { return `(SELECT coalesce(max(seq), 0) + 1 FROM queue_turns)` }
