package postgres

import (
	"context"

	"enrichd/store"
)

// BorrowedTask reads the task id, whole (see store.Borrowed).
func (e exec) BorrowedTask(ctx context.Context, id string) (*store.Task, error) {
	return scanTask(e.q.QueryRow(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id = $1`, id))
}
