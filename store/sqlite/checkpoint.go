package sqlite

import (
	"context"
	"database/sql"
	"time"
)

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
