package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
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

// probeWrite is the write of CheckWritable (store.Health, store.ProbeWrite). It goes
// through the writer, behind the transactions already waiting.
func (db *DB) probeWrite(ctx context.Context) error {
	err := db.write1(ctx, func(tx *Tx) error { return store.ProbeWrite(ctx, txExec{tx}, db.now()) })
	if err != nil {
		if db.storageChecked(err); needsReopen(err) {
			db.reopenWriter()
		}
	}
	return err
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
		return false, db.checkpointFailed(err)
	}
	return busy == 0, nil
}

// checkpointFailed is the error of a checkpoint that failed: a storage fault, counted
// and logged once a minute by the store, or what SQLite said.
func (db *DB) checkpointFailed(err error) error {
	if err := db.storageChecked(err); store.IsStorageFault(err) {
		return err
	}
	return fmt.Errorf("checkpointing the database WAL: %w", err)
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

// ScrubMark is PostgreSQL's: a checkpoint empties SQLite's log of every change
// committed before it, whenever it runs.
func (db *DB) ScrubMark(ctx context.Context) (string, error) { return "", nil }

// Scrub empties the write-ahead log into the file: the writer overwrote the erased
// rows' bytes in their pages as it deleted them (secure_delete, set on every
// connection that writes), and the log's older frames, which still hold them, go.
// tables are PostgreSQL's concern: the checkpoint covers every table.
//
// It runs on the writer's connection, between two of its batches, so that no write
// is in its way; a reader is, and there it waits scrubReaderWait at most rather than
// the writer's busy timeout (10 s), which held every write off while a long reader
// ran. The completer tries again within seconds.
func (db *DB) Scrub(ctx context.Context, tables []string, mark string) (string, error) {
	failed := db.checkpointFailed
	conn, err := db.write.Conn(ctx)
	if err != nil {
		return "", failed(err)
	}
	defer conn.Close()
	var timeout int
	if err := conn.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&timeout); err != nil {
		return "", failed(err)
	}
	if _, err := conn.ExecContext(ctx, fmt.Sprintf(`PRAGMA busy_timeout = %d`, scrubReaderWait.Milliseconds())); err != nil {
		return "", failed(err)
	}
	busy, _, _, err := db.checkpoint(ctx, conn, `PRAGMA wal_checkpoint(TRUNCATE)`, true)
	if _, err := conn.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf(`PRAGMA busy_timeout = %d`, timeout)); err != nil {
		conn.Raw(func(any) error { return driver.ErrBadConn }) // not given back to the writer with the short timeout
		return "", failed(err)
	}
	if err != nil {
		return "", failed(err)
	}
	if busy != 0 {
		return "readers kept the write-ahead log busy: it could not be emptied into the file", nil
	}
	return "", nil
}

// scrubReaderWait is how long Scrub waits for readers in the way of its checkpoint.
const scrubReaderWait = 100 * time.Millisecond
