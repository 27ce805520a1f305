package postgres

import (
	"context"

	"enrichd/store"

	"github.com/jackc/pgx/v5"
)

// linkBatchRow links the row a task was made for to the task, inside the task's
// transaction. The row comes after the task's other locks: nothing takes a batch row
// and then a task, an organization or a grant.
func linkBatchRow(ctx context.Context, tx pgx.Tx, ref *store.BatchRowRef, taskID string) error {
	_, err := tx.Exec(ctx, `UPDATE batch_rows SET task_id = $1 WHERE batch_id = $2 AND row_number = $3 AND task_id IS NULL`,
		taskID, ref.BatchID, ref.Row)
	return err
}
