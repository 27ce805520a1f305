package store

import (
	"context"
	"database/sql"
	"time"
)

// SQLite's automatic checkpoint runs inside the commit that pushes the write-ahead log
// past its threshold: that commit, on the single writer, copies thousands of pages
// into the database file and syncs it, and every write waiting behind it waits as
// long. The writer's automatic checkpoints are off instead, and a connection of its
// own copies the log in the background: a PASSIVE checkpoint takes no lock a writer
// needs, so commits go on while it runs, and the writer starts the log over once it
// has all been copied.

// checkpointEvery is how often the background checkpoint runs while there are writes.
const checkpointEvery = time.Second

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
		if n := db.commits.Load(); n != seen {
			seen = n
			// A failure (a full disk, say) is the writer's to report: it fails the
			// same way, and the next round tries again.
			conn.ExecContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`)
		}
	}
}
