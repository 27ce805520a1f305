package sqlite

import (
	"context"
	"time"
)

// foreignWritePoll is how often the database is asked whether another process
// committed: a key revoked from the CLI stops working within about this long.
const foreignWritePoll = 500 * time.Millisecond

// dataVersion reads PRAGMA data_version on the writer's one connection, between two
// of its transactions: a number no commit of this process changes, and every commit
// of another one does.
func (db *DB) dataVersion() (int64, error) {
	var v int64
	err := db.write.QueryRowContext(context.Background(), `PRAGMA data_version`).Scan(&v)
	return v, err
}

// forget empties the caches of what another process may have changed: the keys, the
// suppressions.
func (db *DB) forget() {
	db.keys.Invalidate()
	db.suppressed.Invalidate()
}

// watchForeignWrites empties the key cache whenever another process has committed
// since the version read before the cache was first used, checking every
// foreignWritePoll until the database closes. data_version is a count of the one
// connection that answers it: when the writer's connection is opened anew
// (reopenWriter), the first reading on the new one is a new starting point, and the
// cache is emptied after it, since another process may have committed in between.
func (db *DB) watchForeignWrites(last int64) {
	defer close(db.watchDone)
	tick := time.NewTicker(foreignWritePoll)
	defer tick.Stop()
	lastEpoch := db.writerEpoch.Load()
	for {
		select {
		case <-db.closing:
			return
		case <-tick.C:
		}
		epoch := db.writerEpoch.Load()
		v, err := db.dataVersion()
		switch {
		case err != nil || db.writerEpoch.Load() != epoch:
			db.forget() // unknown, or read across a reopening: trust nothing kept
		case epoch != lastEpoch:
			last, lastEpoch = v, epoch
			db.forget()
		case v != last:
			last = v
			db.forget()
		}
	}
}
