package store

import (
	"sync"
	"sync/atomic"
	"time"
)

// keyCacheMax bounds the keys kept; past it the cache starts again empty, which costs
// each key one read.
const keyCacheMax = 10_000

// KeyCache holds the valid keys a process has read, by the hash of their token, so
// that a request answered from it reads nothing. The driver empties it whenever
// another process may have written (SQLite: a poll of the file's data version;
// PostgreSQL: a NOTIFY from the api_keys triggers, heard on a LISTEN connection, and
// no cache while that connection is not known to work), and RevokeKey does for this
// process.
type KeyCache struct {
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
func (c *KeyCache) use(hash [32]byte, now time.Time) (p Principal, touch, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := c.keys[hash]
	if k == nil {
		return Principal{}, false, false
	}
	if now.Sub(k.used) >= KeyUseResolution {
		k.used, touch = now, true
	}
	return k.p, touch, true
}

// generation is read before the database is, and given back to put.
func (c *KeyCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads.Add(1)
	return c.gen
}

func (c *KeyCache) put(gen uint64, hash [32]byte, p Principal, used time.Time) {
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

// Invalidate empties the cache: the next request of every key reads it again.
func (c *KeyCache) Invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.keys)
}

// Reads counts the keys read from the database rather than the cache, for tests.
func (c *KeyCache) Reads() int64 { return c.reads.Load() }
