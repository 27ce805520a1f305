package store

import "context"

// What the tests of package store_test need to see inside the store.

// Charge runs the charge step alone in a write transaction, then hold (when not nil)
// before the transaction ends.
func (db *DB) Charge(ctx context.Context, orgID, taskID string, cost int64, hold func()) error {
	return db.Write(ctx, func(tx Tx) error {
		grants, err := askGrants(ctx, tx, orgID)
		if err == nil {
			err = tx.Flush(ctx)
		}
		if err == nil {
			err = charge(ctx, tx, *grants, orgID, taskID, cost, db.now())
		}
		if err != nil {
			return err
		}
		if hold != nil {
			hold()
		}
		return nil
	})
}

// Refund runs the refund step alone in a write transaction.
func (db *DB) Refund(ctx context.Context, taskID string) error {
	return db.Write(ctx, func(tx Tx) error { return refund(ctx, tx, taskID, db.now()) })
}
