package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"

	"enrichd/enrich"
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
	_, err = facade(db).CreateOrg(ctx, "acme")
	is.Equal(errCode(err), store.CodeStorageUnavailable)
	is.True(db.StorageFailing())
	is.True(db.CheckWritable(ctx) != nil)
	is.True(!db.Writable(ctx))
	is.True(db.StorageFailures() >= 2)

	// Reads still work meanwhile.
	_, err = facade(db).ListOrgs(ctx)
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
	db.ForgetProbe()
	is.NoErr(db.CheckWritable(ctx))
	is.True(!db.StorageFailing())
}

// A commit cut off with its connection is not "nothing was done": the server may have
// committed before the connection went. The answer says the outcome is unknown and
// how to retry without a second task.
func TestACommitCutOffPromisesNothing(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, _ := newTestDB(t)
	err := db.inTx(ctx, func(tx *pipe) error {
		var pid int
		if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			return err
		}
		// Another connection ends this one's session, as a failover or a network cut does.
		_, err := db.pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid)
		return err
	})
	var e *enrich.Error
	is.True(errors.As(err, &e))
	is.Equal(e.Code, store.CodeStorageUnavailable)
	is.True(strings.Contains(e.Message, "may or may not have been kept"))
	is.True(strings.Contains(e.Message, "Idempotency-Key"))
}
