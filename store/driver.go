package store

import (
	"context"
	"io"
	"log/slog"
	"time"

	"enrichd/enrich"
)

// Driver is what an engine implements: each method one named operation, most of them
// one transaction. The rules that are the same on every engine (what a webhook's
// body is, which errors a refusal answers, how a record is keyed) are package store's,
// and drivers call them; a driver holds SQL and the locking its engine needs for the
// same guarantees: a charge never takes a grant below zero, an Idempotency-Key makes
// one task, a task or delivery is claimed by one worker at a time, and a sweep is run
// by one process at a time.
type Driver interface {
	Close() error

	// How statements run. Write runs fn in one write transaction, committed when fn
	// returns nil and undone otherwise; how is the engine's (SQLite commits the
	// transactions waiting together, each in a savepoint of one; PostgreSQL runs fn
	// again on a serialization failure or a deadlock), so fn must have no effect outside
	// the transaction. A write the database cannot take fails with storage_unavailable.
	// Read runs fn in one read-only transaction, a consistent view across its queries;
	// Reader runs a single read outside one. UniqueViolation reports whether err is a
	// unique constraint's refusal.
	Write(ctx context.Context, fn func(Tx) error) error
	Read(ctx context.Context, fn func(Executor) error) error
	Reader() Executor
	UniqueViolation(err error) bool

	// API keys: the facade's, kept in the driver's process. KeyTouches are the writes of
	// keys' last use under way, which Close waits for. KeyCache holds the keys read, and
	// the driver empties it whenever another process may have written; it is nil on an
	// engine where every request reads its key (several replicas share PostgreSQL).
	KeyTouches() *KeyTouches
	KeyCache() *KeyCache

	// Tasks and their queue.
	CreateTask(ctx context.Context, nt NewTask) (*Enqueued, error)
	GetTask(ctx context.Context, orgID, id string) (*Task, error)
	ListTasks(ctx context.Context, orgID, status string, page, pageSize int) ([]*Task, int64, error)
	FindTasks(ctx context.Context, orgID string, f TaskFilter) ([]*Task, *TaskCursor, error)
	CountTasks(ctx context.Context, orgID, status string) (int64, error)
	CancelTask(ctx context.Context, orgID, id string) (*Task, error)
	ClaimTask(ctx context.Context, lease time.Duration) (*Claim, error)
	ExtendLease(ctx context.Context, c *Claim, lease time.Duration) (bool, error)
	Settle(ctx context.Context, c *Claim, out Outcome) (bool, error)
	ReleaseTask(ctx context.Context, c *Claim) error
	ExpireTasks(ctx context.Context) ([]ExpiredTask, error)
	RequeueAbandoned(ctx context.Context) (requeued int, gaveUp []ExpiredTask, err error)
	QueueDepth(ctx context.Context) (queued, running int64, err error)

	// Records: the 30-day store, the imported dataset, what email lookups hold. The
	// facade builds FindStored, Held and Dataset on these.
	//
	// FindRecord returns the record of origin that key names (see RecordKey), or nil.
	FindRecord(ctx context.Context, origin, key string) (*StoredRecord, error)
	// FindStaff returns up to limit records of origin, people, with a current position
	// whose company's by is value: a shortlist, in no order.
	FindStaff(ctx context.Context, origin string, by StaffBy, value string, limit int) ([]StoredRecord, error)
	// Gathering is enrich.Held's: what a lookup of address gathered at or after since.
	Gathering(ctx context.Context, address string, since time.Time) (*enrich.Gathering, error)
	Import(ctx context.Context, r io.Reader, norm enrich.Normalizer) (ImportStats, error)
	// HasRecords reports whether origin holds any record: the dashboard's getting
	// started list asks it of the dataset.
	HasRecords(ctx context.Context, origin string) (bool, error)

	// Watches and batches: package store's (watches.go, batches.go), on the Tx
	// primitives of their section; the task reads they borrow (BorrowedTaskReads).
	BorrowedTaskReads

	// The database itself: its schema, health, upkeep and size.
	SchemaVersion(ctx context.Context) (int, error)
	Migrations(ctx context.Context) (applied, known int, err error)
	SetLogger(l *slog.Logger)
	StorageFailing() bool
	StorageFailures() uint64
	CheckWritable(ctx context.Context) error
	Writable(ctx context.Context) bool
	PurgeSettled(ctx context.Context, cutoff time.Time, limit int) (Purged, error)
	Backup(ctx context.Context, path string, overwrite bool) error
	Checkpoint(ctx context.Context) (bool, error)
	ReleaseMemory(ctx context.Context) error
	SpaceUsage(ctx context.Context) (*Space, error)
	WriteStats() (transactions, commits int64)

	// For benchmarks: rows made in bulk, and the engine's bare write and read.
	SeedTasks(ctx context.Context, orgID string, n int) error
	SeedQueuedTasks(ctx context.Context, orgID string, n int) error
	SeedLedger(ctx context.Context, orgID string, grantID int64, n int, span time.Duration) error
	SeedDeliveries(ctx context.Context, orgID, loopID string, n int) error
	CeilingWrite(ctx context.Context, orgID string, grantID int64) (string, error)
	CeilingRead(ctx context.Context, id string) error
}
