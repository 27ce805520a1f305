package store

import (
	"context"
	"fmt"
	"runtime"
	"time"
)

// The memory the store holds is mostly SQLite's page caches, one per connection: what
// a connection has read stays cached up to its cache_size, and stays resident after
// the load that filled it is gone. Open sizes them from one budget on purpose, idle
// readers are closed, and ReleaseMemory empties the writer's cache.

// DefaultCacheSize is the page-cache budget, in MiB over all connections, when Open is
// not given one. Under load the page caches take up to about twice their budget in
// resident memory: this build of SQLite allocates each 4 KiB page with its header in
// an 8 KiB block. The writer's 16 MiB hold thousands of pages, far more than the
// interior pages of every index and the tails of the tables and time-ordered indexes
// that each write walks; a page that was evicted costs a read from the OS's file
// cache, a few microseconds against the hundreds a request costs. serve stays under
// 100 MB resident with it (62 MB after 30 s of load), where 64 MiB a connection
// reached 156 MB.
const DefaultCacheSize = 32

// MaxCacheSize and MaxReaders bound Open's options: PRAGMA cache_size takes KiB in a
// 32-bit integer, and readers past the cores only wait for one.
const (
	MaxCacheSize = 64 << 10 // MiB
	MaxReaders   = 64
)

// readerIdle is how long a reader connection stays open unused: long enough that a
// steady trickle of reads keeps its connections, short enough that a burst's extra
// connections, and their caches, go soon after it.
const readerIdle = 30 * time.Second

// minReaderCacheKiB is the smallest cache a reader gets however the budget divides:
// a few dozen pages, what the longest query of an index-served read touches.
const minReaderCacheKiB = 256

// Option sets how Open opens the database.
type Option func(*options)

type options struct {
	cacheMiB int
	readers  int
}

// WithCacheSize sets the page-cache budget, in MiB, shared by the writer and the
// readers (see DefaultCacheSize). Values out of 1..MaxCacheSize make Open fail.
func WithCacheSize(mib int) Option { return func(o *options) { o.cacheMiB = mib } }

// WithReaders sets the number of reader connections (see DefaultReaders). Values out
// of 1..MaxReaders make Open fail.
func WithReaders(n int) Option { return func(o *options) { o.readers = n } }

// DefaultReaders is the number of reader connections when Open is not given one: one
// a core, since a read is CPU work in this pure-Go SQLite, but at least 2, so that one
// long read (a dashboard's list, an export) does not hold up every point read, and at
// most 16.
func DefaultReaders() int { return min(max(runtime.GOMAXPROCS(0), 2), 16) }

func openOptions(opts []Option) (options, error) {
	o := options{cacheMiB: DefaultCacheSize, readers: DefaultReaders()}
	for _, opt := range opts {
		opt(&o)
	}
	if o.cacheMiB < 1 || o.cacheMiB > MaxCacheSize {
		return o, fmt.Errorf("the page cache must be from 1 to %d MiB, not %d", MaxCacheSize, o.cacheMiB)
	}
	if o.readers < 1 || o.readers > MaxReaders {
		return o, fmt.Errorf("the readers must be from 1 to %d, not %d", MaxReaders, o.readers)
	}
	return o, nil
}

// The readers do not map the file (mmap_size). On a 300,000-row table larger than
// their caches it made raw point reads 1.3 to 1.9 times as fast, but every page it
// touches counts as resident, once per reader (RssFile: 158 MB for that 77 MB file
// with two readers), which the budget would not bound; through the HTTP handler
// (BenchmarkGetTask) it made no difference measurable above the noise, since a
// request costs far more than its point read and recent pages are in the WAL, which
// is not mapped.

// cacheSplit divides the budget, in KiB. The writer takes half: it is the only
// connection that writes, so nothing else invalidates its cache, and every write walks
// the same hot pages (the ends of the tables and of the time-ordered indexes, the
// interior pages of all of them). The readers share the other half: in WAL mode a
// connection empties its cache whenever it starts a read after another connection
// committed, so while writes go on a reader's cache holds little more than the pages
// of its current query; it pays only in stretches without writes.
func (o options) cacheSplit() (writerKiB, readerKiB int) {
	total := o.cacheMiB << 10
	return total / 2, max(total/2/o.readers, minReaderCacheKiB)
}

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
