package sqlite

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"enrichd/store"
)

// foreignWritePoll is how often the database is asked whether another process
// committed: a key revoked from the CLI stops working within about this long.
const foreignWritePoll = 500 * time.Millisecond

// keyCacheMax bounds the keys kept; past it the cache starts again empty, which costs
// each key one read.
const keyCacheMax = 10_000

type keyCache struct {
	mu   sync.Mutex
	keys map[[32]byte]*cachedKey
	// gen counts the invalidations: a read of the database that began before one
	// must not put what it read back into the cache.
	gen   uint64
	reads atomic.Int64 // keys read from the database, for tests
}

// cachedKey is a valid key and its last use as far as this process knows it.
type cachedKey struct {
	p    Principal
	used time.Time
}

// use returns the key's principal, and whether its use at now is due to be written:
// then it counts as written, so that one request a minute asks for the write.
func (c *keyCache) use(hash [32]byte, now time.Time) (p Principal, touch, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := c.keys[hash]
	if k == nil {
		return Principal{}, false, false
	}
	if now.Sub(k.used) >= store.KeyUseResolution {
		k.used, touch = now, true
	}
	return k.p, touch, true
}

// generation is read before the database is, and given back to put.
func (c *keyCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

func (c *keyCache) put(gen uint64, hash [32]byte, p Principal, used time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if c.keys == nil || len(c.keys) >= keyCacheMax {
		c.keys = map[[32]byte]*cachedKey{}
	}
	c.keys[hash] = &cachedKey{p: p, used: used}
}

func (c *keyCache) invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.keys)
}

// dataVersion reads PRAGMA data_version on the writer's one connection, between two
// of its transactions: a number no commit of this process changes, and every commit
// of another one does.
func (db *DB) dataVersion() (int64, error) {
	var v int64
	err := db.write.QueryRowContext(context.Background(), `PRAGMA data_version`).Scan(&v)
	return v, err
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
			db.keys.invalidate() // unknown, or read across a reopening: trust nothing kept
		case epoch != lastEpoch:
			last, lastEpoch = v, epoch
			db.keys.invalidate()
		case v != last:
			last = v
			db.keys.invalidate()
		}
	}
}
