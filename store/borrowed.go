package store

import "context"

// Borrowed are the steps of other domains that the operations written here call,
// each run by the driver's own code until that domain is written here too.
type Borrowed interface {
	// BorrowedTask reads the task id, whole.
	BorrowedTask(ctx context.Context, id string) (*Task, error)
}
