package store

import (
	"context"
	"time"
)

// Borrowed are the steps of other domains that the operations on tasks and the queue
// take inside their transactions: the charge and refund of credits, the webhook event
// of a settled task, the check of a task's Loop, a watch's settle and a batch row's
// link. A driver runs them with its own code until those domains are written here;
// each keeps the argument order of the step that replaces it.
type Borrowed interface {
	BorrowedCharge(ctx context.Context, orgID, taskID string, cost int64, now time.Time) error
	BorrowedRefund(ctx context.Context, taskID string, now time.Time) error
	BorrowedDeliverSettled(ctx context.Context, taskID string, loopID *string, now time.Time) error
	BorrowedCheckLoopForRun(ctx context.Context, orgID, loopID, objectType string) error
	BorrowedSettleWatch(ctx context.Context, taskID, watchID string, fetched bool, now time.Time) error
	BorrowedLinkBatchRow(ctx context.Context, ref *BatchRowRef, taskID string) error
}
