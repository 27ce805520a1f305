package sqlite

import "context"

// BorrowedTask reads the task id, whole (see store.Borrowed).
func (e txExec) BorrowedTask(ctx context.Context, id string) (*Task, error) {
	return scanTask(e.tx.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id = ?`, id))
}
