package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/jackc/pgx/v5"
)

// Backup refuses: a copy of a PostgreSQL database is the server's to make, consistent
// and without stopping the replicas, with its own tools.
func (db *DB) Backup(ctx context.Context, path string, overwrite bool) error {
	return &enrich.Error{Kind: enrich.KindInvalid, Code: "backup_unsupported",
		Message: "enrichd backs up SQLite files only; on PostgreSQL use the server's tools: pg_dump for a copy " +
			"(pg_dump --format=custom), or continuous archiving with point-in-time recovery (PITR) for backups that lose nothing"}
}

// Checkpoint is SQLite's: PostgreSQL checkpoints its write-ahead log itself. It
// reports that nothing was emptied.
func (db *DB) Checkpoint(ctx context.Context) (bool, error) { return false, nil }

// ReleaseMemory is SQLite's: the memory PostgreSQL holds is the server's, not this
// process's, and the pool's idle connections close on their own.
func (db *DB) ReleaseMemory(ctx context.Context) error { return nil }

// SpaceUsage reports the database's size and each table's, indexes and TOAST
// included (pg_total_relation_size), the biggest first. PostgreSQL does not say how
// much of a table's pages is unused without the pgstattuple extension: Unused is 0.
func (db *DB) SpaceUsage(ctx context.Context) (*store.Space, error) {
	sp := &store.Space{}
	err := db.readTx(ctx, func(tx pgx.Tx) error {
		sp.Objects = nil
		if err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM tasks), pg_database_size(current_database())`).Scan(&sp.Tasks, &sp.Bytes); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT c.relname::text, pg_total_relation_size(c.oid) AS size
			FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE c.relkind IN ('r', 'p') AND n.nspname = current_schema()
			ORDER BY size DESC, c.relname`)
		if err != nil {
			return err
		}
		sp.Objects, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.ObjectSpace, error) {
			var o store.ObjectSpace
			err := row.Scan(&o.Name, &o.Bytes)
			return o, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the database's space: %w", err)
	}
	return sp, nil
}

// ScrubMark returns the id the next transaction gets (as an xid, its epoch dropped,
// as pg_stat_activity's ids have none): every transaction that changed a row before
// the call, having committed, got a smaller one. Scrub given it waits for what was
// running before it, and not for what began after.
func (db *DB) ScrubMark(ctx context.Context) (string, error) {
	var mark string
	if err := db.pool.QueryRow(ctx, `SELECT (pg_current_xact_id()::text::numeric % 4294967296)::text`).
		Scan(&mark); err != nil {
		return "", db.storageChecked(fmt.Errorf("reading the next transaction id: %w", err))
	}
	return mark, nil
}

// Scrub vacuums tables, outside any transaction, so that the tuples deleted or
// overwritten before mark (ScrubMark's) are pruned from their pages and from the
// indexes. A VACUUM does not overwrite the space it frees (new rows do, in time), and
// the server's write-ahead log keeps what it logged until its segments are recycled:
// docs/privacy.md says what removes the rest (VACUUM FULL).
//
// FREEZE makes the VACUUM wait for each page's cleanup lock where a plain one skips a
// page another session has pinned, leaving its dead tuples whole; INDEX_CLEANUP ON
// removes the index entries of those tuples, which a plain VACUUM leaves when few
// pages have any. An erasure is rare: the cost of scanning the tables whole is paid
// for a person's bytes gone from every page.
//
// VACUUM keeps a dead tuple that some snapshot may still read, so the tables are
// vacuumed only once nothing can hold one from before mark (heldBefore). Scrub waits
// up to scrubWait, then reports what holds it back, for a later round to try again
// with the same mark.
func (db *DB) Scrub(ctx context.Context, tables []string, mark string) (string, error) {
	if len(tables) == 0 {
		return "", nil
	}
	if held, err := db.waitUntilNothingHolds(ctx, mark, scrubWait); err != nil || held != "" {
		return held, err
	}
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = pgx.Identifier{t}.Sanitize()
	}
	if _, err := db.pool.Exec(ctx, `VACUUM (FREEZE, INDEX_CLEANUP ON) `+strings.Join(names, ", ")); err != nil {
		return "", db.storageChecked(fmt.Errorf("vacuuming %s: %w", strings.Join(tables, ", "), err))
	}
	// A standby's feedback, or a slot's, may go back to before mark while the VACUUM
	// runs (a standby that reconnects sends what it still reads): if it is still
	// behind the mark now, the VACUUM may have kept what the mark's erasures took, and
	// a later round runs it again.
	return db.waitUntilNothingHolds(ctx, mark, 0)
}

// scrubWait is how long Scrub waits for what holds its mark back.
const scrubWait = 10 * time.Second

// waitUntilNothingHolds polls heldBefore, up to wait, and returns "" once nothing
// holds mark back, or what still did when the wait ended.
func (db *DB) waitUntilNothingHolds(ctx context.Context, mark string, wait time.Duration) (string, error) {
	deadline := time.Now().Add(wait)
	for {
		var held string
		if err := db.pool.QueryRow(ctx, heldBefore, mark).Scan(&held); err != nil {
			return "", db.storageChecked(fmt.Errorf("reading the transactions under way: %w", err))
		}
		if held == "" || time.Now().After(deadline) {
			return held, nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// heldBefore describes the first thing found that keeps VACUUM from removing a tuple
// deleted by a transaction before $1 (an xid), or returns "" when nothing does.
// VACUUM keeps a tuple while its deleter is not before the database's horizon: the
// oldest of this database's sessions' snapshots (backend_xmin) and ids (backend_xid),
// a standby's feedback (the xmin of its walsender, which has no database), a
// replication slot's xmin and a prepared transaction, less vacuum_defer_cleanup_age.
//
// A session's snapshot starts at the oldest transaction with an id running anywhere
// on the server, so a transaction with an id before $1 in another database, still
// open, would let a snapshot taken in this one after the check hold the tuples (seen
// in the tests, where many databases share a server): those are waited for too. Once
// none is left, every snapshot taken later starts after $1.
//
// Sessions of another role show their ids here too (pg_stat_activity hides their
// queries, not their ids); a session of any role left open in a transaction holds the
// scrub back until it ends, and the description names its database and process.
//
// Not seen: a backend still starting (for the milliseconds before it shows in
// pg_stat_activity), and a logical replication slot being created with a snapshot to
// copy from (its xmin shows only once it is made). Scrub checks again after the
// VACUUM, which catches a standby's feedback that went back while it ran and is
// still behind the mark.
const heldBefore = `SELECT coalesce((` + holdersBefore + ` LIMIT 1), '')`

// holdersBefore lists what keeps VACUUM from removing a tuple deleted before $1, one
// description each (heldBefore).
const holdersBefore = `
	SELECT 'a transaction begun before the erasure is still open (process ' || pid || ', database ' || coalesce(datname, '-') || ', ' || coalesce(backend_type, 'another role''s session') || ')'
		FROM pg_stat_activity
		WHERE pid <> pg_backend_pid() AND backend_xid IS NOT NULL AND age(backend_xid) > age($1::text::xid)
	UNION ALL
	SELECT 'a snapshot taken before the erasure is still open (process ' || pid || ', database ' || coalesce(datname, '-') || ', ' || coalesce(backend_type, 'another role''s session') || ')'
		FROM pg_stat_activity
		WHERE pid <> pg_backend_pid() AND (datname = current_database() OR datname IS NULL)
			AND backend_xmin IS NOT NULL AND age(backend_xmin) > age($1::text::xid)
	UNION ALL
	SELECT 'the prepared transaction ' || gid || ' (database ' || database || ') is older than the erasure'
		FROM pg_prepared_xacts WHERE age(transaction) > age($1::text::xid)
	UNION ALL
	SELECT 'the replication slot ' || slot_name || ' holds rows back from before the erasure'
		FROM pg_replication_slots WHERE xmin IS NOT NULL AND age(xmin) > age($1::text::xid)
	UNION ALL
	SELECT 'vacuum_defer_cleanup_age is ' || current_setting('vacuum_defer_cleanup_age', true) || ': VACUUM keeps that many transactions'' dead rows; set it to 0'
		WHERE coalesce(current_setting('vacuum_defer_cleanup_age', true), '0') <> '0'
`
