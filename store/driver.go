package store

import (
	"context"
	"log/slog"
)

// Driver is what an engine implements, and all it implements: how statements run, the
// primitives whose SQL or locking differ by engine (these, and Tx's in sql.go), and
// the database's own upkeep. Every operation is package store's, composed of them; the
// guarantees (a charge never takes a grant below zero, an Idempotency-Key makes one
// task, a task or delivery is claimed by one worker at a time, a sweep is run by one
// process at a time) rest on the statements' row locks and on these primitives. A
// driver may also answer Wakeups, Heartbeat and HoldWatchScheduler (see DB's), which
// matter only where several processes share the database.
type Driver interface {
	Close() error

	// How statements run. Write runs fn in one write transaction, committed when fn
	// returns nil and undone otherwise; how is the engine's (SQLite commits the
	// transactions waiting together, each in a savepoint of one; PostgreSQL runs fn
	// again on a serialization failure or a deadlock), so fn must have no effect outside
	// the transaction. A write the database cannot take fails with storage_unavailable.
	// Read runs fn in one read-only transaction, a consistent view across its queries;
	// Reader runs a single read outside one. UniqueViolation reports whether err is a
	// unique constraint's refusal of the statement that returned it (not of an earlier
	// one sent with it, Tx.ExecLater).
	Write(ctx context.Context, fn func(Tx) error) error
	Read(ctx context.Context, fn func(Executor) error) error
	Reader() Executor
	UniqueViolation(err error) bool

	// API keys: the facade's, kept in the driver's process. KeyTouches are the writes of
	// keys' last use under way, which Close waits for. KeyCache holds the keys read, and
	// the driver empties it whenever another process may have written; it is nil while
	// the driver cannot tell (PostgreSQL without its LISTEN connection), and every
	// request then reads its key.
	KeyTouches() *KeyTouches
	KeyCache() *KeyCache
	// SuppressionCache holds the organizations' suppressions read, emptied as KeyCache
	// is; nil while the driver cannot tell, and every check then reads the index.
	SuppressionCache() *SuppressionCache

	// Tasks and their queue. SingleWriter reports whether one writer runs every write
	// transaction (SQLite): work done before a transaction on the reader (CreateTask's
	// answer from a stored record) then holds the others up less. IndexedBy is table in
	// a FROM clause, naming index where the engine can be told to walk it, so that a
	// schema that could no longer serve the query fails instead of scanning the table.
	// QueueSeq is the expression of the next place in the queue's line (PostgreSQL's
	// sequence, which two claimers at once never compute alike).
	SingleWriter() bool
	IndexedBy(table, index string) string
	QueueSeq() string

	// Records. FoldedEquals is the condition that column equals a ? parameter whatever
	// its case, as the engine's index on column folds it.
	FoldedEquals(column string) string

	// The database itself: its schema, health, upkeep and size.
	// KnownMigrations is how many migrations the schema this binary embeds has.
	KnownMigrations() int
	SetLogger(l *slog.Logger)
	StorageFailing() bool
	StorageFailures() uint64
	CheckWritable(ctx context.Context) error
	Writable(ctx context.Context) bool
	Backup(ctx context.Context, path string, overwrite bool) error
	Checkpoint(ctx context.Context) (bool, error)
	// ScrubMark marks the database's state once every change a scrub is to rid the files
	// of has committed; Scrub is given it. PostgreSQL's is the next transaction's id
	// (Scrub waits for what began before it, not after); SQLite's is "".
	ScrubMark(ctx context.Context) (string, error)
	// Scrub rids the database's files of what was deleted or overwritten in tables
	// before mark (an erasure's rows, its events' identifiers): SQLite's writer
	// overwrites deleted content as it goes (secure_delete), and Scrub copies the
	// write-ahead log into the file and empties it, so no older page is left in it;
	// PostgreSQL vacuums the tables, outside a transaction, once nothing can read the
	// rows as they were before mark. held says what keeps it from being done now
	// (readers keeping SQLite's log busy, a transaction open on PostgreSQL), "" when it
	// is done: a later call tries again.
	Scrub(ctx context.Context, tables []string, mark string) (held string, err error)
	ReleaseMemory(ctx context.Context) error
	SpaceUsage(ctx context.Context) (*Space, error)
	WriteStats() (transactions, commits int64)

	// For the benchmarks' ceiling: WriteAlone runs fn in a write transaction of its
	// own, begun at once and committed alone, never with others (SQLite's group commit).
	WriteAlone(ctx context.Context, fn func(Tx) error) error
}
