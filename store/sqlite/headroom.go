package sqlite

import (
	"context"
	"errors"
	"fmt"
)

// headroomMargin is the free space, beyond the write-ahead log's size, that the file
// system holding the database keeps: one batch of the writer appends well under half
// of it to the log.
const headroomMargin = 512 << 10

// errNoHeadroom is the writer refusing a batch on a disk too full to take it safely.
// It is a storage fault like SQLITE_FULL (storageFault).
var errNoHeadroom = errors.New("the disk holding the database is nearly full")

// makeHeadroom is checkHeadroom, having first emptied the write-ahead log if that
// is what it lacks: the log file keeps the size of the last burst of writes although
// what it holds was copied since, and the writer, between batches, holds no lock that
// would keep the checkpoint from emptying it. Readers in the middle of a transaction
// can; then the write is refused, and checkpointLoop tries again.
func (db *DB) makeHeadroom() error {
	err := db.checkHeadroom()
	if err == nil || db.walBytes() == 0 {
		return err
	}
	db.checkpoint(context.Background(), db.checkpointer, `PRAGMA wal_checkpoint(TRUNCATE)`, false)
	return db.checkHeadroom()
}

// checkHeadroom refuses a write while the file system holding the database has less
// free space than the write-ahead log's size plus headroomMargin.
//
// A checkpoint copies the log's pages into the database file, which grows by the pages
// new to it, up to the log's size; only then can the log be emptied and its space
// given back. On a disk the log itself has filled, that copy fails for want of room,
// and the database stays unwritable after the writes stop, through restarts too. So
// the writer stops short of that point: the log is checkpointed and truncated while
// writes are refused (checkpointLoop), the space it held comes back, and writes
// resume by themselves. A file system whose free space cannot be read is not checked:
// SQLite's own SQLITE_FULL still applies.
func (db *DB) checkHeadroom() error {
	free, ok := freeBytes(db.path)
	if !ok {
		return nil
	}
	wal := db.walBytes()
	if free >= wal+headroomMargin {
		return nil
	}
	return fmt.Errorf("%w (database or disk is full): %d bytes free, %d needed to write and then checkpoint the write-ahead log of %d bytes",
		errNoHeadroom, free, wal+headroomMargin, wal)
}
