package store

import (
	"context"
	"crypto/sha256"
	"errors"
)

// Task results are kept once in task_results, by the sha256 of their bytes, however
// many tasks have the same one; triggers count the tasks pointing at each and delete
// it when none is left.

// resultColumn is the task's result, put back in its place in a column list of tasks.
const resultColumn = `(SELECT data FROM task_results WHERE task_results.id = tasks.result_id)`

// keepResult returns the id of the task_results row holding data, adding it if no task
// has had the same bytes yet. Most results are already there (every store hit on a
// company shares one): a read of the hash's index finds them without writing the row.
// On PostgreSQL the row is locked (FOR NO KEY UPDATE, which the trigger's refs update
// of this transaction then holds already): a purge deleting the last task that had
// it, and with it the row, either waits for this transaction or has deleted the row
// before and this one adds it anew. A weaker FOR SHARE would let two transactions
// share the lock and deadlock when each trigger then updates refs.
//
// subject is the hash of whom the result is about, kept with a result added (the same
// bytes are always about the same subject). A result just fetched is most often new:
// addFirst tries to add it before looking for it, one statement (a round trip on
// PostgreSQL) instead of two, and two only when it was there.
func keepResult(ctx context.Context, tx Tx, data, subject []byte, addFirst bool) (int64, error) {
	sum := sha256.Sum256(data)
	add := func() (id int64, err error) {
		err = tx.QueryRow(ctx, `INSERT INTO task_results (hash, refs, data, subject_hash) VALUES (?, 0, ?, ?)
			ON CONFLICT (hash) DO NOTHING RETURNING id`, sum[:], string(data), subject).Scan(&id)
		return id, err
	}
	if addFirst {
		if id, err := add(); !errors.Is(err, ErrNoRows) {
			return id, err
		}
	}
	for {
		var id int64
		err := tx.QueryRow(ctx, `SELECT id FROM task_results WHERE hash = ? FOR NO KEY UPDATE`, sum[:]).Scan(&id)
		if !errors.Is(err, ErrNoRows) {
			return id, err
		}
		if id, err = add(); !errors.Is(err, ErrNoRows) {
			return id, err
		}
		// Another transaction added it since the read: read it again.
	}
}

// resultID is keepResult for a task that may have no result: nil then.
func resultID(ctx context.Context, tx Tx, data, subject []byte, addFirst bool) (any, error) {
	if data == nil {
		return nil, nil
	}
	if subject == nil {
		subject = noSubject
	}
	return keepResult(ctx, tx, data, subject, addFirst)
}
