package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
)

// A transaction that has an id, open between two of its statements, holds no snapshot
// (its backend shows no xmin) but its id holds back what VACUUM may remove: a scrub
// run then would leave the tuples an erasure deleted after it whole. Scrub waits for
// it as for a snapshot.
func TestScrubWaitsForAnOpenTransactionBetweenItsStatements(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	clk := &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	db := openTest(t, freshDSN(t), clk)

	open, err := db.pool.Begin(ctx)
	is.NoErr(err)
	defer open.Rollback(ctx)
	_, err = open.Exec(ctx, `SELECT pg_current_xact_id()`) // gives it an id, as a write does
	is.NoErr(err)
	var xmin *string
	is.NoErr(db.pool.QueryRow(ctx, `SELECT backend_xmin::text FROM pg_stat_activity
		WHERE backend_xid IS NOT NULL AND pid <> pg_backend_pid() AND datname = current_database()`).Scan(&xmin))
	is.Equal(xmin, nil) // no snapshot between statements: only its id shows

	ended, err := db.snapshotsBeforeEnded(ctx, 300*time.Millisecond)
	is.NoErr(err)
	is.True(!ended) // waited for it, and it was still open

	is.NoErr(open.Rollback(ctx))
	ended, err = db.snapshotsBeforeEnded(ctx, time.Minute)
	is.NoErr(err)
	is.True(ended)
}
