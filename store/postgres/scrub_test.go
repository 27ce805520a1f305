package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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
	db := openTest(t, migratedDSN(t), clk)

	open, err := db.pool.Begin(ctx)
	is.NoErr(err)
	defer open.Rollback(ctx)
	pid := beginWriting(t, open)
	var xmin *string
	is.NoErr(db.pool.QueryRow(ctx, `SELECT backend_xmin::text FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&xmin))
	is.Equal(xmin, nil) // no snapshot between statements: only its id shows
	mark, err := db.ScrubMark(ctx)
	is.NoErr(err)

	waitUntilHeldBy(t, db, mark, pid)
	held, err := db.waitUntilNothingHolds(ctx, mark, 300*time.Millisecond)
	is.NoErr(err)
	is.True(held != "") // waited for it, and it was still open

	is.NoErr(open.Rollback(ctx))
	held, err = db.waitUntilNothingHolds(ctx, mark, time.Minute)
	is.NoErr(err)
	is.Equal(held, "")
}

// A snapshot starts at the oldest transaction with an id running anywhere on the
// server: a transaction of another database, begun before an erasure's mark and still
// open, lets a snapshot taken in this one after the scrub's check keep the erased
// tuples from VACUUM (an erasure then completed with dead tuples of the person in the
// pages, about once in twenty runs of the HTTP suite). The scrub waits for it; a
// transaction begun once it ended, in either database, holds nothing back.
func TestScrubWaitsForATransactionOfAnotherDatabaseBegunBeforeItsMark(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	clk := &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	db := openTest(t, migratedDSN(t), clk)
	other, err := pgx.Connect(ctx, migratedDSN(t))
	is.NoErr(err)
	defer other.Close(ctx)

	before, err := other.Begin(ctx)
	is.NoErr(err)
	defer before.Rollback(ctx)
	pid := beginWriting(t, before)
	mark, err := db.ScrubMark(ctx)
	is.NoErr(err)
	waitUntilHeldBy(t, db, mark, pid)

	// What began after it ended, here and there, is not waited for.
	is.NoErr(before.Rollback(ctx))
	after, err := db.pool.Begin(ctx)
	is.NoErr(err)
	defer after.Rollback(ctx)
	beginWriting(t, after)
	later, err := other.Begin(ctx)
	is.NoErr(err)
	defer later.Rollback(ctx)
	beginWriting(t, later)
	held, err := db.waitUntilNothingHolds(ctx, mark, time.Minute)
	is.NoErr(err)
	is.Equal(held, "")
}

// beginWriting gives tx an id, as its first write does, and returns its process id.
func beginWriting(t *testing.T, tx pgx.Tx) (pid int) {
	t.Helper()
	if _, err := tx.Exec(context.Background(), `SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	return int(tx.Conn().PgConn().PID())
}

// waitUntilHeldBy waits until what holds mark back, as the scrub sees it, includes
// the process pid.
func waitUntilHeldBy(t *testing.T, db *DB, mark string, pid int) {
	t.Helper()
	var n int
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err := db.pool.QueryRow(context.Background(), `SELECT count(*) FROM (`+holdersBefore+`) AS h(what) WHERE what LIKE $2`,
			mark, fmt.Sprintf("%%(process %d,%%", pid)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
	}
	t.Fatalf("the scrub was not held by process %d", pid)
}
