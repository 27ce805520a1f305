package postgres

import (
	"context"
	"fmt"
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

// PurgeSettled deletes up to limit settled tasks that settled before cutoff, with their
// idempotency keys and the results no other task shares, and up to limit settled
// deliveries whose last attempt was before cutoff, oldest first, in one short
// transaction, as store.DB.PurgeSettled does. One replica purges at a time: while
// another holds the purge's lock this one deletes nothing and returns a zero Purged,
// which also tells a caller looping until a batch falls short to stop.
func (db *DB) PurgeSettled(ctx context.Context, cutoff time.Time, limit int) (store.Purged, error) {
	var p store.Purged
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		p = store.Purged{}
		if ok, err := db.tryAdvisoryXactLock(ctx, tx, lockPurgeSettled); err != nil || !ok {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT id, org_id, coalesce(idempotency_key, ''), result_id FROM tasks
			WHERE status IN ('succeeded', 'failed', 'canceled') AND finished_at < $1
			ORDER BY finished_at LIMIT $2 FOR UPDATE SKIP LOCKED`, ms(cutoff), limit)
		if err != nil {
			return err
		}
		var ids, keyOrgs, keys, keyTasks []string
		var results []int64
		for rows.Next() {
			var id, org, key string
			var result *int64
			if err := rows.Scan(&id, &org, &key, &result); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
			if key != "" {
				keyOrgs, keys, keyTasks = append(keyOrgs, org), append(keys, key), append(keyTasks, id)
			}
			if result != nil {
				results = append(results, *result)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(ids) > 0 {
			// The results first, in id order: a store hit holds its result while it adds
			// its task's count, which the deletions below take before the trigger gets to
			// the result (see CreateTask on the order of locks).
			if _, err := tx.Exec(ctx, `SELECT 1 FROM task_results WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE`, results); err != nil {
				return err
			}
			// Keys before their tasks: a key left without its task would answer a replay
			// with a task that is gone.
			if _, err := tx.Exec(ctx, `DELETE FROM idempotency_keys k USING unnest($1::text[], $2::text[], $3::text[]) AS d(org_id, key, task_id)
				WHERE k.org_id = d.org_id AND k.key = d.key AND k.task_id = d.task_id`, keyOrgs, keys, keyTasks); err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, `DELETE FROM tasks WHERE id = ANY($1)`, ids)
			if err != nil {
				return err
			}
			p.Tasks = int(tag.RowsAffected())
			// The trigger deletes a result with its last task; one left with no task by
			// any other way goes here too.
			if _, err := tx.Exec(ctx, `DELETE FROM task_results WHERE id = ANY($1) AND refs = 0`, results); err != nil {
				return err
			}
		}
		tag, err := tx.Exec(ctx, `DELETE FROM deliveries WHERE id IN (
			SELECT id FROM deliveries WHERE status IN ('succeeded', 'failed') AND last_attempt_at < $1
			ORDER BY last_attempt_at LIMIT $2 FOR UPDATE SKIP LOCKED)`, ms(cutoff), limit)
		if err != nil {
			return err
		}
		p.Deliveries = int(tag.RowsAffected())
		// A batch goes when its retention is up: its tasks settled long before. Its
		// rows come after the tasks here, as in CreateTask.
		tag, err = tx.Exec(ctx, purgeBatchesQuery, ms(cutoff), store.BatchesPerPurge(limit))
		if err != nil {
			return err
		}
		p.Batches = int(tag.RowsAffected())
		return nil
	})
	return p, err
}

const purgeBatchesQuery = `DELETE FROM batches WHERE id IN (
	SELECT id FROM batches WHERE created_at < $1 ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)`

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
