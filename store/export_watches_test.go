package store

import "context"

// SettleWatch applies a settled task to its watch in a write transaction of db, the
// step Settle takes in its own (settleWatch).
func SettleWatch(ctx context.Context, db *DB, taskID, watchID string, fetched bool) error {
	return db.Write(ctx, func(tx Tx) error { return settleWatch(ctx, tx, db.subjects, taskID, watchID, fetched, db.now()) })
}

// LinkBatchRow links a batch's row to a task in a write transaction of db, the step
// CreateTask takes in its own (linkBatchRow).
func LinkBatchRow(ctx context.Context, db *DB, ref *BatchRowRef, taskID string) error {
	return db.Write(ctx, func(tx Tx) error { return linkBatchRow(ctx, tx, ref, taskID) })
}
