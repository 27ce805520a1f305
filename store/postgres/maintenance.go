package postgres

import (
	"context"
	"fmt"

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
