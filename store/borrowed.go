package store

import "context"

// Borrowed are the steps of other domains that the upkeep's operations (the seeds of
// `enrichd bench`) take, lent by each driver from its own code until the domain they
// belong to is written in package store.
type Borrowed interface {
	// BorrowedKeepResult stores a task's result once, by its hash, and returns its id.
	BorrowedKeepResult(ctx context.Context, data []byte) (int64, error)
	// BorrowedLockOrg takes the organization's row first, as an enqueue does on
	// PostgreSQL; nothing on SQLite.
	BorrowedLockOrg(ctx context.Context, orgID string) error
	// BorrowedJoinQueue gives the organization its turn in the queue if it has none.
	BorrowedJoinQueue(ctx context.Context, orgID string) error
	// BorrowedNotifyTasks wakes every replica's workers once the transaction commits
	// (PostgreSQL's NOTIFY); nothing on SQLite.
	BorrowedNotifyTasks(ctx context.Context) error
}
