package store

import "context"

// DeliverSettledStep runs deliverSettled in a transaction of its own, and
// CheckLoopForRunStep runs checkLoopForRun on the reader: the steps of the Loops that
// the tasks' operations take, for the tests of package store_test.
func (db *DB) DeliverSettledStep(ctx context.Context, taskID string, loopID *string) error {
	return db.Write(ctx, func(tx Tx) error { return deliverSettled(ctx, tx, taskID, loopID, db.now()) })
}

func (db *DB) CheckLoopForRunStep(ctx context.Context, orgID, loopID, objectType string) error {
	return checkLoopForRun(ctx, db.Reader(), orgID, loopID, objectType)
}
