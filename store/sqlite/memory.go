package sqlite

import (
	"context"
	"enrichd/store"
	"fmt"
	"time"
)

// readerIdle is how long a reader connection stays open unused: long enough that a
// steady trickle of reads keeps its connections, short enough that a burst's extra
// connections, and their caches, go soon after it.
const readerIdle = 30 * time.Second

// minReaderCacheKiB is the smallest cache a reader gets however the budget divides:
// a few dozen pages, what the longest query of an index-served read touches.
const minReaderCacheKiB = 256

// ReleaseMemory empties the writer connection's page cache (PRAGMA shrink_memory),
// for a quiet moment: its pages are read back from the file as writes need them
// again. It goes through the writer like any write, behind what is waiting. Idle
// readers close on their own.
func (db *DB) ReleaseMemory(ctx context.Context) error {
	return db.inTx(ctx, func(tx *Tx) error {
		// Not ctx: the transaction may be shared with others (see inTx).
		_, err := tx.Tx.ExecContext(context.Background(), `PRAGMA shrink_memory`)
		return err
	})
}

// cacheSize is the pragma of a cache of kib KiB (a negative cache_size counts KiB,
// a positive one pages).
func cacheSize(kib int) string { return fmt.Sprintf("cache_size(-%d)", kib) }

// cacheSplit divides the budget, in KiB. The writer takes half: it is the only
// connection that writes, so nothing else invalidates its cache, and every write walks
// the same hot pages (the ends of the tables and of the time-ordered indexes, the
// interior pages of all of them). The readers share the other half: in WAL mode a
// connection empties its cache whenever it starts a read after another connection
// committed, so while writes go on a reader's cache holds little more than the pages
// of its current query; it pays only in stretches without writes.
func cacheSplit(o store.Options) (writerKiB, readerKiB int) {
	total := o.CacheMiB << 10
	return total / 2, max(total/2/o.Readers, minReaderCacheKiB)
}
