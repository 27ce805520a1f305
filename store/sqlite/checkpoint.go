package sqlite

import (
	"context"
	"database/sql"
	"os"
	"time"
)

// checkpointEvery is how often the background checkpoint runs.
const checkpointEvery = time.Second

// walSizeLimit is the size of the write-ahead log's file past which, on a cramped disk,
// the log is truncated under load (see checkpointLoop).
const walSizeLimit = 4 << 20

// walFileLimit is the size the log's file is cut back to when the log is started over
// (journal_size_limit). It is well above walRestartAt plus the second of writes a log
// may grow by before it is started over, so that a log started over under load writes
// over the blocks its file already has: cutting the file back to a few megabytes at
// each start stalled the commit that did it for up to 100 ms. Once writes stop, the
// first quiet second's TRUNCATE gives the whole file back (checkpointLoop).
const walFileLimit = 256 << 20

// checkpointLoop copies the write-ahead log into the database file every second that
// saw commits (PASSIVE: it never waits). It also empties the log and gives its space
// back (TRUNCATE), once a second, while writes fail for storage, since the space the
// log holds is what a full disk needs back; in the first quiet second after writes,
// so that the log does not hold the space of a burst while nothing is written; and
// under load once the log passes walSizeLimit on a cramped disk (diskCramped).
// TRUNCATE waits for readers and holds writers off, briefly: the connection's busy
// timeout is short, and a checkpoint that could not run is tried again next second.
func (db *DB) checkpointLoop(conn *sql.DB) {
	defer close(db.checkpointDone)
	defer conn.Close()
	tick := time.NewTicker(checkpointEvery)
	defer tick.Stop()
	seen := db.commits.Load()
	for {
		select {
		case <-db.closing:
			return
		case <-tick.C:
		}
		// A failure (a full disk, say) is the writer's to report: it fails the same way,
		// and the next round tries again.
		switch n := db.commits.Load(); {
		case db.StorageFailing():
			db.checkpoint(context.Background(), conn, `PRAGMA wal_checkpoint(TRUNCATE)`, false)
		case n != seen && db.walBytes() > walSizeLimit && db.diskCramped():
			// Under steady reads a passive checkpoint copies the log but never gets to
			// start it over, and it grows as long as the load lasts. Truncating holds the
			// writer off, which costs a busy server about a tenth of its write rate, so
			// it is done under load only where the disk cannot spare the log's growth.
			seen = n
			db.checkpoint(context.Background(), conn, `PRAGMA wal_checkpoint(TRUNCATE)`, false)
		case n != seen:
			seen = n
			if frames, ok := db.catchUp(conn); ok && frames*walFrameBytes > db.restartAt.Load() {
				db.restartWAL.Store(true)
			}
		case db.walBytes() > 0:
			db.checkpoint(context.Background(), conn, `PRAGMA wal_checkpoint(TRUNCATE)`, false)
		}
	}
}

// walRestartAt is the log's length past which the writer finishes a checkpoint itself,
// between two batches (finishCheckpointIfAsked), so that the log is started over.
//
// The background checkpoint copies the log while the writer goes on appending to it,
// so under a steady write load it never catches up with the log's end, and a log that
// is never copied to its end is never started over: its file grew by about 45 MB a
// second of store hits, without end (4 GB in a minute). The writer's own checkpoint
// runs with no other writer, so it copies the log to its end (short of what a reader
// still reads), and the next commit starts the log over from its beginning. It holds
// the writes off while it runs, about 9 ms after the background's catch-up under a
// steady load of store hits; a short log keeps reads and checkpoints fast (a page not
// in the log is looked for in each block of its index, one per 4,096 frames), and
// started over each second the log served store hits faster, with a lower p99, than
// one let grow to 128 MB first.
const walRestartAt = 16 << 20

// walFrameBytes is the length of one frame of the log: a page and its header.
const walFrameBytes = 4096 + 24

// catchUpFrames is how far behind the log's end a background checkpoint may stop
// before the writer is asked to finish it; catchUpPasses bounds the passes made to
// get there.
const (
	catchUpFrames = 256
	catchUpPasses = 8
)

// catchUp runs passive checkpoints until one ends within catchUpFrames of the log's
// end, each pass copying only what the writer appended during the one before, and
// reports the log's length in frames and whether it got there: the writer's own
// checkpoint then has only those few frames left to copy.
func (db *DB) catchUp(conn *sql.DB) (frames int64, ok bool) {
	for range catchUpPasses {
		busy, frames, copied, err := db.checkpoint(context.Background(), conn, `PRAGMA wal_checkpoint(PASSIVE)`, false)
		if err != nil || busy != 0 || frames < 0 {
			return 0, false
		}
		if frames-copied <= catchUpFrames {
			return frames, true
		}
	}
	return frames, false
}

// finishCheckpointIfAsked runs, on the writer's connection and between two batches, a
// checkpoint that copies the log to its end, when checkpointLoop found the log past
// walRestartAt.
func (db *DB) finishCheckpointIfAsked() {
	if !db.restartWAL.Swap(false) {
		return
	}
	busy, frames, copied, err := db.checkpoint(context.Background(), db.write, `PRAGMA wal_checkpoint(PASSIVE)`, true)
	if err == nil && busy == 0 && frames == copied {
		db.logCopied.Add(1) // the next commit starts the log over, no reader holding it back
	}
}

// queryRower is a connection pool or one connection of it (*sql.DB, *sql.Conn).
type queryRower interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// checkpoint runs one checkpoint statement on conn and counts it, with the time it
// took (apart when the writer ran it), in CheckpointStats. It returns what SQLite
// answers: whether it was kept from finishing, the log's frames, and those copied.
func (db *DB) checkpoint(ctx context.Context, conn queryRower, statement string, writer bool) (busy, frames, copied int64, err error) {
	start := time.Now()
	err = conn.QueryRowContext(ctx, statement).Scan(&busy, &frames, &copied)
	took := int64(time.Since(start))
	db.checkpoints.Add(1)
	db.checkpointNanos.Add(took)
	if writer {
		db.writerCheckpointNanos.Add(took)
	}
	return busy, frames, copied, err
}

// CheckpointStats are the checkpoints' totals since Open: how many ran, the time they
// took, and of that time the writer's own (finishCheckpointIfAsked), which holds every
// write off while it runs. A latency spike that lines up with them points at the copy.
func (db *DB) CheckpointStats() (count int64, busy, writerBusy time.Duration) {
	return db.checkpoints.Load(), time.Duration(db.checkpointNanos.Load()), time.Duration(db.writerCheckpointNanos.Load())
}

// crampedDisk is the free space below which the log is truncated under load: enough
// for the log to grow for a few seconds at the highest write rates measured.
const crampedDisk = 256 << 20

// diskCramped reports whether the disk holding the database has less free space than
// crampedDisk plus four times the log's size; a disk whose free space cannot be read
// is not.
func (db *DB) diskCramped() bool {
	free, ok := freeBytes(db.path)
	return ok && free < crampedDisk+4*db.walBytes()
}

// walBytes is the size of the write-ahead log file, 0 if it cannot be read.
func (db *DB) walBytes() int64 {
	st, err := os.Stat(db.path + "-wal")
	if err != nil {
		return 0
	}
	return st.Size()
}
