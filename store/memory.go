package store

import (
	"fmt"
	"runtime"
)

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

// Option sets how Open opens the database.
type Option func(*Options)

// Options are what Open's options set, for the driver to apply: both are SQLite's
// (PostgreSQL's pool is sized by its URL's pool_max_conns).
type Options struct {
	CacheMiB int
	Readers  int
	// SubjectKey is the key of subjects' hashes (WithSubjectKey), the store's own: no
	// driver reads it.
	SubjectKey []byte
}

// WithCacheSize sets the page-cache budget, in MiB, shared by the writer and the
// readers (see DefaultCacheSize). Values out of 1..MaxCacheSize make Open fail.
func WithCacheSize(mib int) Option { return func(o *Options) { o.CacheMiB = mib } }

// WithReaders sets the number of reader connections (see DefaultReaders). Values out
// of 1..MaxReaders make Open fail.
func WithReaders(n int) Option { return func(o *Options) { o.Readers = n } }

// DefaultReaders is the number of reader connections when Open is not given one: one
// a core, since a read is CPU work in this pure-Go SQLite, but at least 2, so that one
// long read (a dashboard's list, an export) does not hold up every point read, and at
// most 16.
func DefaultReaders() int { return min(max(runtime.GOMAXPROCS(0), 2), 16) }

// ApplyOptions applies opts over the defaults and checks the result.
func ApplyOptions(opts []Option) (Options, error) {
	o := Options{CacheMiB: DefaultCacheSize, Readers: DefaultReaders()}
	for _, opt := range opts {
		opt(&o)
	}
	if o.CacheMiB < 1 || o.CacheMiB > MaxCacheSize {
		return o, fmt.Errorf("the page cache must be from 1 to %d MiB, not %d", MaxCacheSize, o.CacheMiB)
	}
	if o.Readers < 1 || o.Readers > MaxReaders {
		return o, fmt.Errorf("the readers must be from 1 to %d, not %d", MaxReaders, o.Readers)
	}
	return o, nil
}
