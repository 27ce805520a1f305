package postgres

import (
	"context"
	"time"

	"enrichd/store"

	"github.com/jackc/pgx/v5"
)

// The steps of other domains that package store's watches and batches borrow (see
// store.BorrowedByWatches): this driver's own. A write's exec runs on a pgx.Tx.

func (e exec) BorrowedBalance(ctx context.Context, orgID string) (store.Balance, error) {
	return balance(ctx, e.q.(pgx.Tx), orgID)
}

func (e exec) BorrowedInsufficientCredits(ctx context.Context, orgID string, cost, remaining int64) error {
	return insufficientCredits(ctx, e.q.(pgx.Tx), orgID, cost, remaining)
}

func (e exec) BorrowedInsertDelivery(ctx context.Context, loopID, orgID, event string, taskID *string, payload []byte, now time.Time) (*store.Delivery, error) {
	return insertDelivery(ctx, e.q.(pgx.Tx), loopID, orgID, event, taskID, payload, now)
}

func (exec) BorrowedTaskColumns() string                         { return taskColumns }
func (exec) BorrowedScanTask(row store.Row) (*store.Task, error) { return scanTask(row) }
func (*DB) BorrowedTaskColumns() string                          { return taskColumns }
func (*DB) BorrowedScanTask(row store.Row) (*store.Task, error)  { return scanTask(row) }
