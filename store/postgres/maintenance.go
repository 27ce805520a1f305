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

// Scrub vacuums tables, outside any transaction, so that the tuples an erasure
// deleted or overwrote are pruned from their pages and from the indexes. A VACUUM
// does not overwrite the space it frees (new rows do, in time), and the server's
// write-ahead log keeps what it logged until its segments are recycled:
// docs/privacy.md says what removes the rest (VACUUM FULL).
//
// FREEZE makes the VACUUM wait for each page's cleanup lock where a plain one skips a
// page another session has pinned, leaving its dead tuples whole; INDEX_CLEANUP ON
// removes the index entries of those tuples, which a plain VACUUM leaves when few
// pages have any. An erasure is rare: the cost of scanning the tables whole is paid
// for a person's bytes gone from every page.
//
// VACUUM keeps a dead tuple that a snapshot still open in the database may read, so
// the tables are vacuumed only once every snapshot of this database's clients older
// than the call has ended: a statement that was reading when the erasure's last event
// was recorded would otherwise leave that event's earlier version whole.
// Scrub waits for them up to scrubWait, then reports the scrub not done (false) for a
// later round to try again.
func (db *DB) Scrub(ctx context.Context, tables []string) (bool, error) {
	if len(tables) == 0 {
		return true, nil
	}
	if ok, err := db.snapshotsBeforeEnded(ctx, scrubWait); err != nil || !ok {
		return false, err
	}
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = pgx.Identifier{t}.Sanitize()
	}
	if _, err := db.pool.Exec(ctx, `VACUUM (FREEZE, INDEX_CLEANUP ON) `+strings.Join(names, ", ")); err != nil {
		return false, db.storageChecked(fmt.Errorf("vacuuming %s: %w", strings.Join(tables, ", "), err))
	}
	return true, nil
}

// scrubWait is how long Scrub waits for the transactions older than it to end.
const scrubWait = 10 * time.Second

// snapshotsBeforeEnded waits, up to wait, until no other client of this database holds
// a snapshot older than the call (one whose xmin, the oldest transaction it sees as
// running, is older than the first transaction id not yet given out then) or is in a
// transaction given its id before the call, and reports whether that came. Sessions
// of another role show neither here and are not waited for (docs/privacy.md says so);
// VACUUM's own workers hold back nothing.
func (db *DB) snapshotsBeforeEnded(ctx context.Context, wait time.Duration) (bool, error) {
	var next string // as an xid: xid8's epoch dropped, as backend_xmin has none
	// The id given to this statement's own transaction: every transaction given one
	// before the call has a smaller one. (A snapshot's xmax is one past the last
	// transaction completed, which a transaction given its id earlier and still open
	// may equal or pass.)
	if err := db.pool.QueryRow(ctx, `SELECT (pg_current_xact_id()::text::numeric % 4294967296)::text`).
		Scan(&next); err != nil {
		return false, db.storageChecked(fmt.Errorf("reading the next transaction id: %w", err))
	}
	deadline := time.Now().Add(wait)
	for {
		var older int64
		// A transaction with an id holds VACUUM back by that id even between its
		// statements, where it holds no snapshot and shows no xmin: a scrub run then
		// left the tuples erased after it began whole (seen under load).
		err := db.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
				AND ((backend_xmin IS NOT NULL AND age(backend_xmin) > age($1::text::xid))
					OR (backend_xid IS NOT NULL AND age(backend_xid) > age($1::text::xid)))`, next).Scan(&older)
		if err != nil {
			return false, db.storageChecked(fmt.Errorf("reading the transactions under way: %w", err))
		}
		if older == 0 {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
