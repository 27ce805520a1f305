package postgres

import (
	"context"
	"time"

	"enrichd/store"

	"github.com/jackc/pgx/v5"
)

// The steps of other domains that package store's tasks and queue borrow, run by this
// package's own code until those domains are written in package store.

func (e exec) BorrowedCharge(ctx context.Context, orgID, taskID string, cost int64, now time.Time) error {
	return chargeCredits(ctx, e.q.(pgx.Tx), orgID, taskID, cost, now)
}

func (e exec) BorrowedRefund(ctx context.Context, taskID string, now time.Time) error {
	return refundCredits(ctx, e.q.(pgx.Tx), taskID, now)
}

func (e exec) BorrowedDeliverSettled(ctx context.Context, taskID string, loopID *string, now time.Time) error {
	return deliverSettled(ctx, e.q.(pgx.Tx), taskID, loopID, now)
}

func (e exec) BorrowedCheckLoopForRun(ctx context.Context, orgID, loopID, objectType string) error {
	return checkLoopForRun(ctx, e.q.(pgx.Tx), orgID, loopID, objectType)
}

// BorrowedSettleWatch: this package's settleWatch takes the watch before the task.
func (e exec) BorrowedSettleWatch(ctx context.Context, taskID, watchID string, fetched bool, now time.Time) error {
	return settleWatch(ctx, e.q.(pgx.Tx), watchID, taskID, fetched, now)
}

func (e exec) BorrowedLinkBatchRow(ctx context.Context, ref *store.BatchRowRef, taskID string) error {
	return linkBatchRow(ctx, e.q.(pgx.Tx), ref, taskID)
}
