package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"enrichd/store"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// probeWrite is the write of CheckWritable (store.Health): it adds a row to
// schema_migrations and deletes it in the same transaction, which readers never see
// but which makes the page dirty, so the commit appends it to the write-ahead log as
// any write does. A full disk, a read-only file or failing I/O make it fail, where
// merely taking the write lock (BEGIN IMMEDIATE, then ROLLBACK) would not, nor would
// rewriting a row unchanged (SQLite skips writing a cell that is already as written).
// It goes through the writer, behind the transactions already waiting.
func (db *DB) probeWrite(ctx context.Context) error {
	err := db.write1(ctx, func(tx *Tx) error {
		if _, err := tx.Tx.ExecContext(ctx, probeInsert, ms(db.now())); err != nil {
			return err
		}
		_, err := tx.Tx.ExecContext(ctx, probeDelete)
		return err
	})
	if err != nil {
		if db.storageChecked(err); needsReopen(err) {
			db.reopenWriter()
		}
	}
	return err
}

// The probe's row: version 0 is never a migration's.
const (
	probeInsert = `INSERT INTO schema_migrations (version, title, applied_at) VALUES (0, 'write probe', ?)`
	probeDelete = `DELETE FROM schema_migrations WHERE version = 0`
)

// Migrations returns the newest migration applied to the file and the newest this
// binary knows. They differ when another binary migrated the file further, as during
// an upgrade that runs two versions side by side.
func (db *DB) Migrations(ctx context.Context) (applied, known int, err error) {
	applied, err = db.SchemaVersion(ctx)
	return applied, db.known, err
}

// Backup writes a consistent copy of the database to the file at path with VACUUM
// INTO, while other connections, in this process or another, keep reading and
// writing: the copy is the database as of the read transaction it runs in. The copy
// is written to a temporary file beside path, created readable by its owner only (it
// holds the same secrets), and moved into place once complete, so path never holds
// half a backup. An existing file at path is replaced only when overwrite is set.
//
// The copy is made on a connection of its own rather than the writer: it writes no
// page of this database, and holding the writer for the length of a copy would stop
// every write of the service meanwhile.
func (db *DB) Backup(ctx context.Context, path string, overwrite bool) error {
	// Replacing the live file (or its -wal or -shm) would corrupt it under a running serve.
	if target, err := os.Stat(path); err == nil {
		for _, live := range []string{db.path, db.path + "-wal", db.path + "-shm"} {
			if info, err := os.Stat(live); err == nil && os.SameFile(info, target) {
				return fmt.Errorf("cannot back up to %s: it is the database itself (or its journal); back up to another file", path)
			}
		}
	}
	if _, err := os.Lstat(path); err == nil && !overwrite {
		return fmt.Errorf("%s: %w (pass --force to replace it)", path, ErrBackupExists)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var suffix [6]byte
	rand.Read(suffix[:])
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp-"+hex.EncodeToString(suffix[:]))
	// VACUUM INTO accepts an empty file: creating it first is what sets its mode.
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("cannot write a backup in %s: %w", filepath.Dir(path), store.StripPath(err))
	}
	f.Close()
	defer os.Remove(tmp) // a no-op once moved into place

	conn, err := sql.Open("sqlite", db.dsn())
	if err != nil {
		return fmt.Errorf("backup to %s: %w", path, err)
	}
	defer conn.Close()
	conn.SetMaxOpenConns(1)
	if _, err := conn.ExecContext(ctx, `VACUUM INTO ?`, tmp); err != nil {
		return fmt.Errorf("backup to %s: %w", path, err)
	}
	if err := syncFile(tmp); err != nil {
		return fmt.Errorf("backup to %s: %w", path, err)
	}
	if overwrite {
		err = os.Rename(tmp, path)
	} else {
		// A link fails if path appeared meanwhile, where a rename would replace it.
		err = os.Link(tmp, path)
	}
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s: %w (pass --force to replace it)", path, ErrBackupExists)
	}
	if err != nil {
		return fmt.Errorf("backup to %s: %w", path, err)
	}
	return syncFile(filepath.Dir(path))
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// The oldest settled tasks, a batch at a time, and their keys.
const (
	purgeKeysQuery = `DELETE FROM idempotency_keys WHERE (org_id, key) IN (
		SELECT org_id, idempotency_key FROM tasks WHERE status IN ('succeeded', 'failed', 'canceled') AND finished_at < :cutoff
		ORDER BY finished_at LIMIT :limit)`
	purgeTasksQuery = `DELETE FROM tasks WHERE id IN (
		SELECT id FROM tasks WHERE status IN ('succeeded', 'failed', 'canceled') AND finished_at < :cutoff
		ORDER BY finished_at LIMIT :limit)`
)

// PurgeSettled deletes up to limit settled tasks (succeeded, failed or canceled) that
// settled before cutoff, with their idempotency keys and the results no other task
// shares, and up to limit settled deliveries (succeeded or failed) whose last attempt
// was before cutoff, oldest first, in one short transaction. Unsettled tasks and
// pending deliveries are never touched. The credit ledger keeps its rows: it names
// tasks by id without referring to them, so an organization's balance and history
// stay whole. Call it again until it deletes fewer than limit of each.
func (db *DB) PurgeSettled(ctx context.Context, cutoff time.Time, limit int) (Purged, error) {
	var p Purged
	err := db.inTx(ctx, func(tx *Tx) error {
		p = Purged{}
		// Keys first, found through the tasks' own: a key left without its task would
		// answer a replay with a task that is gone. Deleting a task deletes its result too
		// once no other task shares it (the trigger task_results_delete).
		if _, err := tx.ExecContext(ctx, purgeKeysQuery, sql.Named("cutoff", ms(cutoff)), sql.Named("limit", limit)); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, purgeTasksQuery, sql.Named("cutoff", ms(cutoff)), sql.Named("limit", limit))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		p.Tasks = int(n)
		res, err = tx.ExecContext(ctx, `DELETE FROM deliveries WHERE id IN (
			SELECT id FROM deliveries WHERE status IN ('succeeded', 'failed') AND last_attempt_at < :cutoff
			ORDER BY last_attempt_at LIMIT :limit)`, sql.Named("cutoff", ms(cutoff)), sql.Named("limit", limit))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		if err != nil {
			return err
		}
		p.Deliveries = int(n)
		// A batch goes when its retention is up: its tasks settled long before.
		res, err = tx.ExecContext(ctx, purgeBatchesQuery, ms(cutoff), store.BatchesPerPurge(limit))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		p.Batches = int(n)
		return err
	})
	return p, err
}

const purgeBatchesQuery = `DELETE FROM batches WHERE id IN (SELECT id FROM batches WHERE created_at < ? ORDER BY created_at LIMIT ?)`

// Checkpoint copies the write-ahead log into the database file and truncates it to
// nothing, through the writer connection. Under steady reads SQLite's automatic
// checkpoints cannot reset the log, which then keeps its largest size; this is for
// quiet moments, since it waits for readers and holds the writer while it runs. It
// reports whether the log could be emptied (false: readers kept it busy). A file that
// cannot take the copy fails it as any write: storage_unavailable, counted and logged
// by the store (IsStorageFault).
func (db *DB) Checkpoint(ctx context.Context) (bool, error) {
	var busy, logPages, done int
	if err := db.write.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logPages, &done); err != nil {
		if err := db.storageChecked(err); store.IsStorageFault(err) {
			return false, err // counted, and logged once a minute by the store
		}
		return false, fmt.Errorf("checkpointing the database WAL: %w", err)
	}
	return busy == 0, nil
}

// CheckIntegrity opens the database file at path read-only, apart from any DB, and
// runs PRAGMA integrity_check on it: for a backup, before it is trusted.
func CheckIntegrity(ctx context.Context, path string) error {
	conn, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return err
	}
	defer conn.Close()
	rows, err := conn.QueryContext(ctx, `PRAGMA integrity_check`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return err
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("integrity_check: %s", strings.Join(problems, "; "))
	}
	return nil
}
