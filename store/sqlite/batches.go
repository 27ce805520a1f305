package sqlite

import (
	"context"

	"enrichd/store"
)

// linkBatchRow links the row a task was made for to the task, inside the task's
// transaction.
func linkBatchRow(ctx context.Context, tx *Tx, ref *store.BatchRowRef, taskID string) error {
	_, err := tx.ExecContext(ctx, `UPDATE batch_rows SET task_id = ? WHERE batch_id = ? AND row_number = ? AND task_id IS NULL`,
		taskID, ref.BatchID, ref.Row)
	return err
}
