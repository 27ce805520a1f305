package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// storageFault reports whether err is SQLite saying that the file cannot be written:
// full (SQLITE_FULL, or the writer's own errNoHeadroom), read-only (SQLITE_READONLY), failing I/O (SQLITE_IOERR), not
// openable (SQLITE_CANTOPEN), or damaged (SQLITE_CORRUPT, SQLITE_NOTADB). Constraint
// violations, busy locks and the like are not storage faults.
func storageFault(err error) bool {
	if errors.Is(err, errNoHeadroom) {
		return true
	}
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code() & 0xff { // the primary result code of an extended one
	case sqlite3.SQLITE_FULL, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN,
		sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return true
	}
	return false
}

// storageChecked turns err, the outcome of a write transaction, into the error its
// caller sees (store.Health.WriteChecked).
func (db *DB) storageChecked(err error) error { return db.WriteChecked(err, storageFault) }

// needsReopen reports whether err is one the writer connection keeps for its life: a
// file SQLite opened read-only (its permissions refused writing) stays read-only to
// that connection even once they are fixed.
func needsReopen(err error) bool {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	code := e.Code() & 0xff
	return code == sqlite3.SQLITE_READONLY || code == sqlite3.SQLITE_CANTOPEN
}

// reopenWriter asks the writer to close its connection before its next transaction,
// so that one opens the file anew. The writer does it between batches (reopenIfAsked),
// when no transaction holds the connection: closing it only if idle at the moment of
// asking would miss it under steady write traffic, and keep a read-only connection for
// as long as the traffic lasts.
func (db *DB) reopenWriter() { db.reopen.Store(true) }

// reopenIfAsked closes the writer's connection if reopenWriter asked for it. It runs on
// the writer between batches; it waits for the connection if a checkpoint holds it.
func (db *DB) reopenIfAsked() {
	if !db.reopen.Swap(false) {
		return
	}
	conn, err := db.write.Conn(context.Background())
	if err != nil {
		return // no connection to close: the next transaction opens one
	}
	// A connection whose Raw returns ErrBadConn is closed, not put back in the pool.
	conn.Raw(func(any) error { return driver.ErrBadConn })
	conn.Close()
	db.writerEpoch.Add(1) // after the close: see watchForeignWrites
}

// changes is the number of rows the writer connection changed since it was opened
// (SQLite's total_changes()), or -1 if it cannot be read.
func changes(tx *sql.Tx) int64 {
	var n int64
	if err := tx.QueryRowContext(context.Background(), `SELECT total_changes()`).Scan(&n); err != nil {
		return -1
	}
	return n
}
