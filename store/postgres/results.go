package postgres

import (
	"context"
	"crypto/sha256"
	"errors"

	"github.com/jackc/pgx/v5"
)

// Task results are kept once in task_results, by the sha256 of their bytes, however
// many tasks have the same one; triggers count the tasks pointing at each and delete
// it when none is left.

// keepResult returns the id of the task_results row holding data, adding it if no task
// has it yet. The row is locked (FOR NO KEY UPDATE, which the trigger's refs update of
// this transaction then holds already): a purge deleting the last task that had it,
// and with it the row, either waits for this transaction or has deleted the row before
// and this one adds it anew. A weaker FOR SHARE would let two transactions share the
// lock and deadlock when each trigger then updates refs.
func keepResult(ctx context.Context, tx pgx.Tx, data []byte) (int64, error) {
	sum := sha256.Sum256(data)
	for {
		var id int64
		err := tx.QueryRow(ctx, `SELECT id FROM task_results WHERE hash = $1 FOR NO KEY UPDATE`, sum[:]).Scan(&id)
		if !errors.Is(err, pgx.ErrNoRows) {
			return id, err
		}
		err = tx.QueryRow(ctx, `INSERT INTO task_results (hash, refs, data) VALUES ($1, 0, $2)
			ON CONFLICT (hash) DO NOTHING RETURNING id`, sum[:], string(data)).Scan(&id)
		if !errors.Is(err, pgx.ErrNoRows) {
			return id, err
		}
		// Another transaction added it since the read: read it again.
	}
}
