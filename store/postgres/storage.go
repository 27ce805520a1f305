package postgres

import (
	"context"

	"enrichd/store"
)

// A write the database cannot take (see storageFault) is answered as the SQLite store
// answers it: storage_unavailable, 503 with Retry-After over HTTP, and recorded in the
// DB's store.Health, which readiness, workers and the webhook sender ask.

// probeWrite is the write of CheckWritable (store.Health, store.ProbeWrite).
func (db *DB) probeWrite(ctx context.Context) error {
	return db.Write(ctx, func(tx store.Tx) error { return store.ProbeWrite(ctx, tx, db.now()) })
}
