package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// A write the database cannot take (see storageFault) is answered as the SQLite store
// answers it: storage_unavailable, 503 with Retry-After over HTTP, and recorded in the
// DB's store.Health, which readiness, workers and the webhook sender ask.

// probeWrite is the write of CheckWritable (store.Health): a row added to
// schema_migrations and deleted in the same transaction, which readers never see but
// which takes a transaction id and writes WAL, as any write does. A read-only server
// (a standby after a fail-over), a full disk or a lost connection make it fail.
func (db *DB) probeWrite(ctx context.Context) error {
	return db.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, probeInsert, ms(db.now())); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, probeDelete)
		return err
	})
}

// The probe's row: version 0 is never a migration's. ON CONFLICT: two replicas' probes
// at once would otherwise wait on each other's row, and the second fail.
const (
	probeInsert = `INSERT INTO schema_migrations (version, title, applied_at) VALUES (0, 'write probe', $1)
		ON CONFLICT (version) DO UPDATE SET applied_at = excluded.applied_at`
	probeDelete = `DELETE FROM schema_migrations WHERE version = 0`
)
