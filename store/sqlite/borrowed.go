package sqlite

import (
	"context"

	"enrichd/store"
)

// The task reads package store borrows (see store.Borrowed): this driver's own.

func (e txExec) BorrowedTask(ctx context.Context, id string) (*Task, error) {
	return scanTask(e.tx.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id = ?`, id))
}

func (txExec) BorrowedTaskColumns() string                         { return taskColumns }
func (txExec) BorrowedScanTask(row store.Row) (*store.Task, error) { return scanTask(row) }
func (*DB) BorrowedTaskColumns() string                            { return taskColumns }
func (*DB) BorrowedScanTask(row store.Row) (*store.Task, error)    { return scanTask(row) }
