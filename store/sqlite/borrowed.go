package sqlite

import (
	"context"
	"time"

	"enrichd/store"
)

// The steps of other domains that package store's watches and batches borrow (see
// store.BorrowedByWatches): this driver's own.

func (e txExec) BorrowedBalance(ctx context.Context, orgID string) (store.Balance, error) {
	return balance(ctx, e.tx, orgID)
}

func (e txExec) BorrowedInsufficientCredits(ctx context.Context, orgID string, cost, remaining int64) error {
	return insufficientCredits(ctx, e.tx, orgID, cost, remaining)
}

func (e txExec) BorrowedInsertDelivery(ctx context.Context, loopID, orgID, event string, taskID *string, payload []byte, now time.Time) (*store.Delivery, error) {
	return insertDelivery(ctx, e.tx, loopID, orgID, event, taskID, payload, now)
}

func (txExec) BorrowedTaskColumns() string                         { return taskColumns }
func (txExec) BorrowedScanTask(row store.Row) (*store.Task, error) { return scanTask(row) }
func (*DB) BorrowedTaskColumns() string                            { return taskColumns }
func (*DB) BorrowedScanTask(row store.Row) (*store.Task, error)    { return scanTask(row) }
