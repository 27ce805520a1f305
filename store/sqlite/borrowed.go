package sqlite

import (
	"context"
	"time"

	"enrichd/store"
)

// The steps of other domains that package store's tasks and queue borrow, run by this
// package's own code until those domains are written in package store.

func (e txExec) BorrowedCharge(ctx context.Context, orgID, taskID string, cost int64, now time.Time) error {
	return charge(ctx, e.tx, orgID, taskID, cost, now)
}

func (e txExec) BorrowedRefund(ctx context.Context, taskID string, now time.Time) error {
	return refund(ctx, e.tx, taskID, now)
}

func (e txExec) BorrowedDeliverSettled(ctx context.Context, taskID string, loopID *string, now time.Time) error {
	return deliverSettled(ctx, e.tx, taskID, loopID, now)
}

func (e txExec) BorrowedCheckLoopForRun(ctx context.Context, orgID, loopID, objectType string) error {
	return checkLoopForRun(ctx, e.tx, orgID, loopID, objectType)
}

func (e txExec) BorrowedSettleWatch(ctx context.Context, taskID, watchID string, fetched bool, now time.Time) error {
	return settleWatch(ctx, e.tx, taskID, watchID, fetched, now)
}

func (e txExec) BorrowedLinkBatchRow(ctx context.Context, ref *store.BatchRowRef, taskID string) error {
	return linkBatchRow(ctx, e.tx, ref, taskID)
}
