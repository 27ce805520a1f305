package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/matryer/is"
)

// replicaRows counts the replicas rows named id, read outside any transaction.
func replicaRows(t *testing.T, db *DB, id string) int {
	t.Helper()
	var n int
	if err := db.pool.QueryRow(context.Background(), `SELECT count(*) FROM replicas WHERE id = $1`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A statement sent later runs in its place: the statement after it sees what it did,
// and the commit keeps it.
func TestALaterStatementRunsBeforeTheNextOne(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, _ := newTestDB(t)
	var seen int
	is.NoErr(db.inTx(ctx, func(tx *pipe) error {
		tx.later(`INSERT INTO replicas (id, expires_at) VALUES ($1, 1)`, "a")
		return tx.QueryRow(ctx, `SELECT count(*) FROM replicas WHERE id = $1`, "a").Scan(&seen)
	}))
	is.Equal(seen, 1)
	is.Equal(replicaRows(t, db, "a"), 1)

	// A transaction of later statements alone is sent with its commit.
	is.NoErr(db.inTx(ctx, func(tx *pipe) error {
		tx.later(`INSERT INTO replicas (id, expires_at) VALUES ($1, 1)`, "b")
		tx.later(`UPDATE replicas SET expires_at = 2 WHERE id = $1`, "b")
		return nil
	}))
	var expires int64
	is.NoErr(db.pool.QueryRow(ctx, `SELECT expires_at FROM replicas WHERE id = 'b'`).Scan(&expires))
	is.Equal(expires, int64(2))
}

// A later statement that fails fails the statement it was sent with, as an earlier
// statement's error: a unique violation of it is not the next statement's own. The
// transaction keeps nothing, and the connection goes back to the pool usable.
func TestALaterStatementsFailureIsTheTransactions(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, _ := newTestDB(t)
	is.NoErr(db.inTx(ctx, func(tx *pipe) error {
		_, err := tx.Exec(ctx, `INSERT INTO replicas (id, expires_at) VALUES ('taken', 1)`)
		return err
	}))

	var next error
	err := db.inTx(ctx, func(tx *pipe) error {
		tx.later(`INSERT INTO replicas (id, expires_at) VALUES ($1, 1)`, "kept?")
		tx.later(`INSERT INTO replicas (id, expires_at) VALUES ($1, 1)`, "taken")
		var n int
		next = tx.QueryRow(ctx, `SELECT count(*) FROM replicas`).Scan(&n)
		return next
	})
	is.True(err != nil)
	var le *laterError
	is.True(errors.As(next, &le))         // the earlier statement's failure ...
	is.True(!isUniqueViolation(next, "")) // ... not read as the query's own
	is.True(isUniqueViolation(le.err, ""))
	is.Equal(replicaRows(t, db, "kept?"), 0)

	// The same failure at the commit: not "the outcome is unknown", since the server
	// refused it and skipped the commit.
	err = db.inTx(ctx, func(tx *pipe) error {
		tx.later(`INSERT INTO replicas (id, expires_at) VALUES ($1, 1)`, "kept?")
		tx.later(`INSERT INTO replicas (id, expires_at) VALUES ($1, 1)`, "taken")
		return nil
	})
	is.True(errors.As(err, &le))
	var ce *commitError
	is.True(!errors.As(err, &ce))
	is.Equal(replicaRows(t, db, "kept?"), 0)

}

// A statement that pgx cannot prepare fails as itself, not as the earlier statement
// it was to be sent with, and nothing of the batch runs.
func TestAStatementThatCannotBePreparedFailsAsItself(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, _ := newTestDB(t)
	var own error
	err := db.inTx(ctx, func(tx *pipe) error {
		tx.later(`INSERT INTO replicas (id, expires_at) VALUES ($1, 1)`, "kept?")
		_, own = tx.Exec(ctx, `SELEC 1`)
		return own
	})
	is.True(err != nil)
	var le *laterError
	is.True(!errors.As(own, &le))
	is.True(strings.Contains(own.Error(), "syntax error"))
	is.Equal(replicaRows(t, db, "kept?"), 0)
}

// A transaction undone after some of its statements were sent leaves nothing, and the
// later statements not yet sent are never sent: a sequence, which no rollback takes
// back, does not move.
func TestAnUndoneTransactionSendsNoLaterStatement(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, _ := newTestDB(t)
	seq := func() (v string) {
		is.NoErr(db.pool.QueryRow(ctx, `SELECT last_value || ' ' || is_called FROM queue_turns_seq`).Scan(&v))
		return v
	}
	before := seq()
	undo := errors.New("undone")
	err := db.inTx(ctx, func(tx *pipe) error {
		if _, err := tx.Exec(ctx, `INSERT INTO replicas (id, expires_at) VALUES ('sent', 1)`); err != nil {
			return err
		}
		tx.later(`SELECT nextval('queue_turns_seq')`)
		return undo
	})
	is.True(errors.Is(err, undo))
	is.Equal(replicaRows(t, db, "sent"), 0)
	is.Equal(seq(), before)

	// The same statement sent with the commit does move it.
	is.NoErr(db.inTx(ctx, func(tx *pipe) error {
		tx.later(`SELECT nextval('queue_turns_seq')`)
		return nil
	}))
	is.True(seq() != before)
}

// Rows read from a batch close it, read to the end or not, so the transaction goes on.
func TestRowsReadWithLaterStatementsLeaveTheTransactionUsable(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, _ := newTestDB(t)
	is.NoErr(db.inTx(ctx, func(tx *pipe) error {
		tx.later(`INSERT INTO replicas (id, expires_at) VALUES ('r1', 1), ('r2', 1), ('r3', 1)`)
		rows, err := tx.Query(ctx, `SELECT id FROM replicas ORDER BY id`)
		if err != nil {
			return err
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		is.NoErr(rows.Err())
		rows.Close()
		is.Equal(ids, []string{"r1", "r2", "r3"})

		tx.later(`DELETE FROM replicas WHERE id = 'r1'`)
		rows, err = tx.Query(ctx, `SELECT id FROM replicas ORDER BY id`)
		if err != nil {
			return err
		}
		rows.Close() // before its end
		_, err = tx.Exec(ctx, `DELETE FROM replicas WHERE id = 'r2'`)
		return err
	}))
	is.Equal(replicaRows(t, db, "r1")+replicaRows(t, db, "r2")+replicaRows(t, db, "r3"), 1)
}

// Queries asked for later are sent together with the statements queued before them,
// in their order, at the flush: until then nothing is sent (another connection can
// still take the row one of them locks), and then each query's rows reach its read,
// the later statements' effects in them.
func TestQueriesAskedForLaterAreReadTogetherAtTheFlush(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, _ := newTestDB(t)
	_, err := db.pool.Exec(ctx, `INSERT INTO replicas (id, expires_at) VALUES ('held', 7)`)
	is.NoErr(err)
	lockedElsewhere := func() bool {
		other, err := db.pool.Begin(ctx)
		is.NoErr(err)
		defer other.Rollback(ctx)
		_, err = other.Exec(ctx, `SELECT 1 FROM replicas WHERE id = 'held' FOR UPDATE NOWAIT`)
		return err != nil
	}
	e := exec{}
	var ids []string
	var expires int64
	is.NoErr(db.inTx(ctx, func(tx *pipe) error {
		e.q = tx
		tx.later(`INSERT INTO replicas (id, expires_at) VALUES ('q1', 1), ('q2', 1)`)
		is.NoErr(e.QueryLater(ctx, func(r store.Row) error {
			var id string
			err := r.Scan(&id)
			ids = append(ids, id)
			return err
		}, `SELECT id FROM replicas WHERE id LIKE 'q%' ORDER BY id`))
		is.NoErr(e.QueryLater(ctx, func(r store.Row) error { return r.Scan(&expires) },
			`SELECT expires_at FROM replicas WHERE id = ? FOR UPDATE`, "held"))
		is.True(!lockedElsewhere()) // nothing sent yet
		is.Equal(len(ids), 0)
		if err := e.Flush(ctx); err != nil {
			return err
		}
		is.True(lockedElsewhere())
		return nil
	}))
	is.Equal(ids, []string{"q1", "q2"})
	is.Equal(expires, int64(7))

	// A query asked for and never flushed is read before the commit, and kept.
	var n int
	is.NoErr(db.inTx(ctx, func(tx *pipe) error {
		e.q = tx
		tx.later(`INSERT INTO replicas (id, expires_at) VALUES ('q3', 1)`)
		return e.QueryLater(ctx, func(r store.Row) error { return r.Scan(&n) }, `SELECT count(*) FROM replicas WHERE id LIKE 'q%'`)
	}))
	is.Equal(n, 3)
	is.Equal(replicaRows(t, db, "q3"), 1)
}

// A query asked for later that fails, or whose rows its read refuses, fails the flush
// as an earlier statement's error, and the transaction keeps nothing.
func TestAQueryAskedForLaterFailsTheFlush(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, _ := newTestDB(t)
	refused := errors.New("refused by its read")
	for _, c := range []struct {
		query string
		read  func(store.Row) error
		want  func(error) bool
	}{
		{`SELECT no_such_column FROM replicas`, func(store.Row) error { return nil }, // refused at prepare
			func(err error) bool { return strings.Contains(err.Error(), "no_such_column") }},
		{`SELECT 1 / (SELECT count(*) FROM replicas WHERE id = 'none')`, func(store.Row) error { return nil }, // as it runs
			func(err error) bool { return strings.Contains(err.Error(), "division by zero") }},
		{`SELECT id FROM replicas WHERE id = 'f1'`, func(store.Row) error { return refused },
			func(err error) bool { return errors.Is(err, refused) }},
	} {
		err := db.inTx(ctx, func(tx *pipe) error {
			e := exec{q: tx}
			tx.later(`INSERT INTO replicas (id, expires_at) VALUES ('f1', 1)`)
			is.NoErr(e.QueryLater(ctx, c.read, c.query))
			return e.Flush(ctx)
		})
		is.True(err != nil)
		var le *laterError
		is.True(errors.As(err, &le))
		is.True(c.want(err))
		is.Equal(replicaRows(t, db, "f1"), 0)
	}
}

// This process's own notifications of queued tasks wake none of its workers (it wakes
// them itself as it queues); another replica's do.
func TestWakeupsPassOverThisProcesssOwnNotifies(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := migratedDSN(t)
	c := &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	a := openTest(t, dsn, c)
	wake := a.Wakeups()
	// Nobody else notifies on this database yet: a's own notifies, once its listener
	// hears them, must have woken nothing.
	deadline := time.Now().Add(30 * time.Second)
	for a.listen.ownPassed.Load() == 0 {
		is.NoErr(a.inTx(ctx, func(tx *pipe) error { notifyTasks(tx, a.self); return nil }))
		time.Sleep(20 * time.Millisecond)
		if time.Now().After(deadline) {
			t.Fatal("a's listener heard none of its own notifies in 30 s")
		}
	}
	is.Equal(len(wake), 0) // heard, and passed over

	b := openTest(t, dsn, c)
	is.NoErr(b.inTx(ctx, func(tx *pipe) error { notifyTasks(tx, b.self); return nil }))
	select {
	case <-wake:
	case <-time.After(30 * time.Second):
		t.Fatal("another replica's notify woke nobody")
	}
}

// A transaction whose query's read failed does not commit, even if it passes over the
// failure: the server ran on (a read refused by its caller is no error of the server's),
// so the statements sent with the query, and after it, would otherwise be kept. So
// does one whose query was never flushed and is read, and fails, at the commit.
func TestAFailedReadIsNeverCommitted(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, _ := newTestDB(t)
	refused := errors.New("refused by its read")
	err := db.inTx(ctx, func(tx *pipe) error {
		e := exec{q: tx}
		tx.later(`INSERT INTO replicas (id, expires_at) VALUES ('n1', 1)`)
		is.NoErr(e.QueryLater(ctx, func(store.Row) error { return refused }, `SELECT 1`))
		_, err := tx.Exec(ctx, `INSERT INTO replicas (id, expires_at) VALUES ('n2', 1)`) // sent with them
		is.True(errors.Is(err, refused))
		return nil // passing over it
	})
	is.True(errors.Is(err, refused))
	is.Equal(replicaRows(t, db, "n1")+replicaRows(t, db, "n2"), 0)

	err = db.inTx(ctx, func(tx *pipe) error {
		tx.later(`INSERT INTO replicas (id, expires_at) VALUES ('n3', 1)`)
		return exec{q: tx}.QueryLater(ctx, func(store.Row) error { return refused }, `SELECT 1`)
	})
	is.True(errors.Is(err, refused))
	is.Equal(replicaRows(t, db, "n3"), 0)
}

// The round trips of a task's writes, each of which costs about what its statements
// cost on a two-core machine. A queued task's creation takes three: its first read
// with the BEGIN; the reads the rest decides on (the backlog, the grants, the audit
// chain's head) with the writes made before them; the writes after them with the
// COMMIT. A store hit takes one more, for the shared copy of its result (keepResult).
// The settle of a fetched company takes five: the claim checked with the BEGIN and
// the record it replaces read, the record added, its key pointed at it, its result's
// copy added, and the COMMIT.
func TestTheRoundTripsOfATasksWrites(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, _ := newTestDB(t)
	org := newOrg(t, db, "acme", 10)
	enqueue(t, db, domainTask(org.ID, "first.com")) // the chain's first entry makes its head
	created := func(nt store.NewTask) (*store.Task, int64) {
		before := db.roundTrips.Load()
		task := enqueue(t, db, nt)
		return task, db.roundTrips.Load() - before
	}

	nt := domainTask(org.ID, "stripe.com")
	nt.MaxBacklog = 10
	task, trips := created(nt)
	is.Equal(task.Status, store.StatusQueued)
	is.Equal(trips, int64(3))

	settled := func(task *store.Task) int64 {
		c, err := facade(db).ClaimTask(ctx, time.Minute)
		is.NoErr(err)
		for c != nil && c.TaskID != task.ID {
			c, err = facade(db).ClaimTask(ctx, time.Minute)
			is.NoErr(err)
		}
		is.True(c != nil)
		before := db.roundTrips.Load()
		ok, err := facade(db).Settle(ctx, c, store.Outcome{Result: company("stripe.com"), Fetched: true})
		is.NoErr(err)
		is.True(ok)
		return db.roundTrips.Load() - before
	}
	is.Equal(settled(task), int64(5))

	nt.Freshness = time.Hour
	hit, trips := created(nt)
	is.Equal(hit.Status, store.StatusSucceeded)
	is.Equal(trips, int64(4))

	// Fetched again, at the same time, with the same bytes: the record is rewritten
	// in place and its key found pointing at it (two round trips more), and the
	// result's copy is found where adding it first failed (one more), and the three
	// tasks share it.
	nt.Freshness = 0
	again, _ := created(nt)
	is.Equal(settled(again), int64(8))
	var copies, refs int
	is.NoErr(db.pool.QueryRow(ctx, `SELECT count(*), max(refs) FROM task_results`).Scan(&copies, &refs))
	is.Equal([]int{copies, refs}, []int{1, 3})
}

// A task's creation that will write what an erasure writes before it takes the audit
// chain's head (a refund's or an expiry's day total, credit_days) does not hold the
// head while it waits for that row: the erasure, holding the row, takes the head at
// once, and neither waits for the other. The erasure is played by a transaction that
// appends the same ledger row and then takes the head, NOWAIT.
func TestATasksCreationHoldsNoAuditHeadWhileItWaitsOnAnErasuresTotals(t *testing.T) {
	for _, c := range []struct {
		name string
		kind string // the ledger row the erasure writes first
		task func(org *store.Org) store.NewTask
	}{
		{"a task failed at the request, refunded", "refund", func(org *store.Org) store.NewTask {
			nt := domainTask(org.ID, "failed.com")
			nt.Fail = &enrich.TaskError{Code: "not_found", Message: "failed at the request"}
			return nt
		}},
		{"a charge that writes off an expired grant", "expiry", func(org *store.Org) store.NewTask {
			return domainTask(org.ID, "queued.com")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			db, clk := newTestDB(t)
			org := newOrg(t, db, "acme", 10)
			enqueue(t, db, domainTask(org.ID, "first.com")) // the chain's head exists
			now := clk.Now().UnixMilli()
			// The grant the erasure's row names, written off already (the creation
			// locks none such), and for the expiry, one whose time has run out and
			// that the creation's charge writes off.
			var expired int64
			is.NoErr(db.pool.QueryRow(ctx, `INSERT INTO credit_grants (org_id, amount, remaining, expires_at, expired_at, created_at)
				VALUES ($1, 5, 0, $2, $2, $3) RETURNING id`, org.ID, now-1000, now-2000).Scan(&expired))
			if c.kind == "expiry" {
				_, err := db.pool.Exec(ctx, `INSERT INTO credit_grants (org_id, amount, remaining, expires_at, created_at)
					VALUES ($1, 5, 5, $2, $3)`, org.ID, now-1000, now-2000)
				is.NoErr(err)
			}

			erasure, err := db.pool.Begin(ctx)
			is.NoErr(err)
			defer erasure.Rollback(ctx)
			var erasurePID int
			is.NoErr(erasure.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&erasurePID))
			_, err = erasure.Exec(ctx, `INSERT INTO credit_ledger (org_id, kind, amount, grant_id, task_id, created_at)
				VALUES ($1, $2, 1, $3, NULL, $4)`, org.ID, c.kind, expired, now)
			is.NoErr(err)

			created := make(chan error, 1)
			go func() {
				_, err := facade(db).CreateTask(ctx, store.BySystem, c.task(org))
				created <- err
			}()
			// Until the creation waits for the erasure's row.
			deadline := time.Now().Add(10 * time.Second)
			for {
				var waiting int
				is.NoErr(db.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
					WHERE wait_event_type = 'Lock' AND $1 = ANY(pg_blocking_pids(pid))`, erasurePID).Scan(&waiting))
				if waiting > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the task's creation never waited for the erasure's totals")
				}
				time.Sleep(5 * time.Millisecond)
			}
			_, err = erasure.Exec(ctx, `SELECT seq FROM audit_heads WHERE org_id = $1 FOR UPDATE NOWAIT`, org.ID)
			is.NoErr(err) // the creation does not hold the head
			is.NoErr(erasure.Commit(ctx))
			is.NoErr(<-created)
		})
	}
}
