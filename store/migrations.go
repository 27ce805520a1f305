package store

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Migration is one "-- migration N: title" section of an engine's schema: the root
// schema.sql for SQLite, store/postgres/schema.sql for PostgreSQL. A driver applies,
// in order, those its database's schema_migrations table does not list, each in a
// transaction that also records it there.
type Migration struct {
	Version int
	Title   string
	SQL     string
}

var migrationHeader = regexp.MustCompile(`(?m)^-- migration (\d+): (.*)$`)

// ParseMigrations splits schema into its migrations, which must be numbered 1, 2, 3...
// with no gap: a gap would be a migration one binary applies and another skips.
func ParseMigrations(schema string) ([]Migration, error) {
	heads := migrationHeader.FindAllStringSubmatchIndex(schema, -1)
	if len(heads) == 0 {
		return nil, fmt.Errorf("the schema has no \"-- migration N: title\" sections")
	}
	var out []Migration
	for i, h := range heads {
		end := len(schema)
		if i+1 < len(heads) {
			end = heads[i+1][0]
		}
		v, _ := strconv.Atoi(schema[h[2]:h[3]])
		if v != i+1 {
			return nil, fmt.Errorf("schema: migration %d found where %d was expected", v, i+1)
		}
		out = append(out, Migration{Version: v, Title: strings.TrimSpace(schema[h[4]:h[5]]), SQL: schema[h[1]:end]})
	}
	return out, nil
}

// Migrate applies, in order, the migrations of schema (ParseMigrations) that the
// schema_migrations table, which the driver has made sure exists, does not list, each in
// a transaction that also records it there, and returns how many schema has. run is
// the driver's: it runs fn in a transaction on the connection that holds the table,
// giving it the transaction for the bookkeeping and script, which runs a migration's
// text as written (several statements, no placeholders).
func Migrate(ctx context.Context, schema string, now func() time.Time,
	run func(fn func(tx Executor, script func(string) error) error) error) (int, error) {
	migrations, err := ParseMigrations(schema)
	if err != nil {
		return 0, err
	}
	for _, m := range migrations {
		err := run(func(tx Executor, script func(string) error) error {
			var applied int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&applied); err != nil {
				return err
			}
			if applied > 0 {
				return nil
			}
			if err := script(m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, title, applied_at) VALUES (?, ?, ?)`,
				m.Version, m.Title, ms(now()))
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("migration %d (%s): %w", m.Version, m.Title, err)
		}
	}
	return len(migrations), nil
}

// SchemaVersion returns the newest migration applied to the database.
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := db.Reader().QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}

// Migrations returns the newest migration applied to the database and the newest this
// binary knows. They differ when another binary migrated the database further, as
// during an upgrade that runs two versions side by side (a rolling upgrade of the
// replicas, on PostgreSQL).
func (db *DB) Migrations(ctx context.Context) (applied, known int, err error) {
	applied, err = db.SchemaVersion(ctx)
	return applied, db.KnownMigrations(), err
}

// ProbeWrite is the write of CheckWritable (see Health), in tx: a row added to
// schema_migrations and deleted in the same transaction, which readers never see but
// which writes as any write does (on SQLite it makes the page dirty, so the commit
// appends it to the log; on PostgreSQL it takes a transaction id and writes WAL). A
// full disk, a read-only file or server, failing I/O or a lost connection make it fail,
// where taking the write lock alone would not, nor would rewriting a row unchanged
// (SQLite skips writing a cell already as written). Version 0 is never a migration's.
// ON CONFLICT: two PostgreSQL replicas' probes at once would otherwise wait on each
// other's row, and the second fail.
func ProbeWrite(ctx context.Context, tx Executor, now time.Time) error {
	if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, title, applied_at) VALUES (0, 'write probe', ?)
		ON CONFLICT (version) DO UPDATE SET applied_at = excluded.applied_at`, ms(now)); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `DELETE FROM schema_migrations WHERE version = 0`)
	return err
}
