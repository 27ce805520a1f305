package store

import "context"

// Borrowed are the task reads that the operations written here call, run by the
// driver's own code until the tasks are written here too.
type Borrowed interface {
	// BorrowedTask reads the task id, whole.
	BorrowedTask(ctx context.Context, id string) (*Task, error)
	BorrowedTaskReads
}

// BorrowedTaskReads read tasks (tasks' taskColumns and scanTask): a transaction and
// the driver answer them.
type BorrowedTaskReads interface {
	// BorrowedTaskColumns is the column list BorrowedScanTask reads, of table tasks.
	BorrowedTaskColumns() string
	BorrowedScanTask(row Row) (*Task, error)
}
