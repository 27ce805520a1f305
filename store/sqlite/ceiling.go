package sqlite

import (
	"context"

	"enrichd/store"
)

// WriteAlone runs fn in a transaction of its own, straight on the writer's connection
// rather than queued for the writer: the ceiling is one transaction per task, without
// the group commit the service's writes get. Its statements are prepared from the
// second on, as the writer prepares the service's.
func (db *DB) WriteAlone(ctx context.Context, fn func(store.Tx) error) error {
	err := db.runTx(ctx, func(tx *Tx) error { return fn(txExec{tx}) })
	db.writes.preparePending(ctx)
	return err
}
