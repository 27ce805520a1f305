package postgres

import (
	"context"

	"enrichd/store"
)

// The task reads package store borrows (see store.Borrowed): this driver's own.

func (e exec) BorrowedTask(ctx context.Context, id string) (*store.Task, error) {
	return scanTask(e.q.QueryRow(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id = $1`, id))
}

func (exec) BorrowedTaskColumns() string                         { return taskColumns }
func (exec) BorrowedScanTask(row store.Row) (*store.Task, error) { return scanTask(row) }
func (*DB) BorrowedTaskColumns() string                          { return taskColumns }
func (*DB) BorrowedScanTask(row store.Row) (*store.Task, error)  { return scanTask(row) }
