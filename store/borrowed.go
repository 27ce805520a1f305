package store

import (
	"context"
	"time"
)

// BorrowedByWatches are the steps of other domains (credits, tasks, deliveries) that
// the watches and batches call, answered by each driver's own code until those domains
// are written once here too.
type BorrowedByWatches interface {
	// BorrowedBalance is the organization's balance (credits' balance).
	BorrowedBalance(ctx context.Context, orgID string) (Balance, error)
	// BorrowedInsufficientCredits is the 402 of a request costing cost when remaining
	// is left (credits' insufficientCredits).
	BorrowedInsufficientCredits(ctx context.Context, orgID string, cost, remaining int64) error
	// BorrowedInsertDelivery queues a delivery of event to a Loop (deliveries'
	// insertDelivery).
	BorrowedInsertDelivery(ctx context.Context, loopID, orgID, event string, taskID *string, payload []byte, now time.Time) (*Delivery, error)
	BorrowedTaskReads
}

// BorrowedTaskReads read tasks (tasks' taskColumns and scanTask): a transaction and
// the driver answer them.
type BorrowedTaskReads interface {
	// BorrowedTaskColumns is the column list BorrowedScanTask reads, of table tasks.
	BorrowedTaskColumns() string
	BorrowedScanTask(row Row) (*Task, error)
}
