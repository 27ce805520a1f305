package postgres

import (
	"context"
	"testing"

	"enrichd/store"

	"github.com/matryer/is"
)

// A database that stops taking writes (here: made read-only, as a standby after a
// fail-over is) answers storage_unavailable, as the SQLite store does, until a write
// commits again.
func TestReadOnlyDatabaseIsStorageUnavailable(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, _ := newTestDB(t)
	_, err := db.pool.Exec(ctx, `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET default_transaction_read_only = on', current_database()); END $$`)
	is.NoErr(err)
	db.pool.Reset() // the setting applies to new connections
	_, err = db.CreateOrg(ctx, "acme")
	is.Equal(errCode(err), store.CodeStorageUnavailable)
	is.True(db.StorageFailing())
	is.True(db.CheckWritable(ctx) != nil)
	is.True(!db.Writable(ctx))
	is.True(db.StorageFailures() >= 2)

	// Reads still work meanwhile.
	_, err = db.ListOrgs(ctx)
	is.NoErr(err)

	// Undone from a session that sets itself writable first.
	conn, err := db.pool.Acquire(ctx)
	is.NoErr(err)
	_, err = conn.Exec(ctx, `SET default_transaction_read_only = off`)
	is.NoErr(err)
	_, err = conn.Exec(ctx, `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET default_transaction_read_only = off', current_database()); END $$`)
	is.NoErr(err)
	conn.Release()
	db.pool.Reset()
	waitProbe(db)
	is.NoErr(db.CheckWritable(ctx))
	is.True(!db.StorageFailing())
}

// waitProbe lets the last probe's second of reuse pass by forgetting it.
func waitProbe(db *DB) {
	db.probeMu.Lock()
	db.probe = nil
	db.probeMu.Unlock()
}
