package postgres

import (
	"context"
	"errors"

	"enrichd/store"

	"github.com/jackc/pgx/v5"
)

// The queue is package store's (see its ClaimTask); these are its locks.
// queue_turns holds the organizations that have queued tasks, in the order of their next turn; a claim serves the lowest seq, FIFO within the
// organization, and sends it to the back of the line. With several claimers at once:
//   - a claimer locks the turn it serves (FOR UPDATE SKIP LOCKED): the others pass to
//     the next organization instead of waiting, and no two claim for the same one at a
//     time; its task is locked the same way, so no two claim the same task;
//   - a turn's new place comes from the sequence queue_turns_seq, not max(seq) + 1,
//     which two claimers would compute alike;
//   - a claimer drops a turn whose organization has nothing queued only while it holds
//     the organization's row (SKIP LOCKED again): everything that makes a task queued
//     (an enqueue, a requeue, a release) holds that row first, and joins the line after
//     it, so a turn is never dropped under a task about to be queued.

// NextTurn takes the first turn no other claimer holds (SKIP LOCKED), but for those
// passed.
func (e exec) NextTurn(ctx context.Context, passed []string) (string, error) {
	var org string
	// Not nil: `<> ALL(NULL)` is never true.
	err := e.q.QueryRow(ctx, `SELECT org_id FROM queue_turns WHERE org_id <> ALL($1)
		ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED`, append([]string{}, passed...)).Scan(&org)
	if errors.Is(err, pgx.ErrNoRows) && len(passed) == 0 {
		// Every turn is held by other claimers. Their transactions are short (a claim,
		// a settle), and the organization may well have more queued tasks: wait for the
		// first turn rather than report an empty queue and sleep until the next poll,
		// which left one busy tenant's tasks to one claim at a time. This transaction
		// holds no turn yet, so it waits in no cycle.
		err = e.q.QueryRow(ctx, `SELECT org_id FROM queue_turns ORDER BY seq LIMIT 1 FOR UPDATE`).Scan(&org)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return "", store.ErrNoRows
	}
	return org, err
}

// LeaveQueue: see leaveQueue.
func (e exec) LeaveQueue(ctx context.Context, orgID string) error {
	return leaveQueue(ctx, e.q, orgID)
}

// QueueSeq is the sequence queue_turns_seq: two claimers at once never take the same
// place, as they would computing max(seq) + 1.
func (db *DB) QueueSeq() string { return `nextval('queue_turns_seq')` }

// leaveQueue drops the organization's turn, which the caller holds, when it has no
// queued task: they were canceled or expired since it got in line. A queued task
// locked by another transaction (a cancel under way) keeps the turn, and so does an
// organization whose row another transaction holds: it may be queuing a task that this
// transaction cannot see yet.
func leaveQueue(ctx context.Context, tx pgQuerier, orgID string) error {
	var id string
	err := tx.QueryRow(ctx, `SELECT id FROM orgs WHERE id = $1 FOR NO KEY UPDATE SKIP LOCKED`, orgID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `DELETE FROM queue_turns WHERE org_id = $1
		AND NOT EXISTS (SELECT 1 FROM tasks WHERE org_id = $1 AND status = 'queued')`, orgID)
	return err
}
