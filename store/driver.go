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

	// Organizations, API keys, users and sessions.
	CreateKey(ctx context.Context, orgName, keyName string, createOrg bool) (string, *APIKey, error)
	ListKeys(ctx context.Context, orgName string) ([]APIKey, error)
	RevokeKey(ctx context.Context, orgName, idOrPrefix string) error
	Authenticate(ctx context.Context, plain string) (*Principal, error)
	CreateUser(ctx context.Context, orgName, email, role string) (*User, string, error)
	ListUsers(ctx context.Context, orgName string) ([]User, error)
	DisableUser(ctx context.Context, email string) (*User, error)
	NewSetupLink(ctx context.Context, email string) (string, error)
	LinkUser(ctx context.Context, token string) (*User, error)
	SetPassword(ctx context.Context, token, passwordHash string) (*User, error)
	UserForLogin(ctx context.Context, email string) (*User, string, error)
	CreateSession(ctx context.Context, userID string, absolute time.Duration) (string, error)
	SessionUser(ctx context.Context, token string, idle time.Duration) (*User, error)
	EndSession(ctx context.Context, token string) error
	PurgeSessions(ctx context.Context, idle time.Duration) (int, error)

	// The first start: while the database has no user, NewInstallLink makes a new
	// first-start link (valid InstallLinkTTL; earlier ones stop working) and returns its
	// token, or "" once a user exists. CheckInstallLink refuses a token Install would
	// refuse; Install uses the link, in one transaction: the organization (created
	// unless it exists), its admin with the password, every first-start link voided.
	// HasUsers reports whether anyone, disabled or not, is a user yet.
	NewInstallLink(ctx context.Context) (string, error)
	HasUsers(ctx context.Context) (bool, error)
	CheckInstallLink(ctx context.Context, token string) error
	Install(ctx context.Context, token string, in NewInstall) (*User, error)

	// Credits.
	GrantCredits(ctx context.Context, orgName string, amount int64, expiresAt *time.Time) (int64, error)
	CreditBalance(ctx context.Context, orgName string) (Balance, error)
	CreditLedger(ctx context.Context, orgName string) ([]LedgerEntry, error)
	ListGrants(ctx context.Context, orgID string) ([]Grant, error)
	LedgerPage(ctx context.Context, orgID string, beforeID int64, limit int) ([]LedgerEntry, error)
	DailyCredits(ctx context.Context, orgID string, days int, now time.Time) ([]CreditDay, error)

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

	// Loops and their deliveries.
	CreateLoop(ctx context.Context, nl NewLoop) (*Loop, error)
	GetLoop(ctx context.Context, orgID, id string) (*Loop, error)
	ListLoops(ctx context.Context, orgID string) ([]*Loop, error)
	// UpdateLoop applies the patch in one transaction: a rotation (p.Rotate) included;
	// disabling the destination fails the Loop's pending deliveries not being sent.
	UpdateLoop(ctx context.Context, orgID, id string, p LoopPatch) (*Loop, error)
	DeleteLoop(ctx context.Context, orgID, id string) error
	CreateTestDelivery(ctx context.Context, orgID, loopID string) (*Delivery, error)
	ListDeliveries(ctx context.Context, orgID, loopID string, page, pageSize int) ([]*Delivery, int64, error)
	TaskDeliveries(ctx context.Context, orgID, taskID string) ([]*Delivery, error)
	GetDelivery(ctx context.Context, orgID, id string) (*Delivery, []byte, error)
	RetryDelivery(ctx context.Context, orgID, id string) (*Delivery, error)
	ClaimDeliveries(ctx context.Context, limit, perLoop int, inFlight map[string]int, lease time.Duration) ([]*Dispatch, error)
	RecordAttempts(ctx context.Context, done []Attempted) error
	// LoopTrouble counts the Loops that are failing (see Loop.Failing) and those whose
	// destination is disabled, across organizations, for /metrics.
	LoopTrouble(ctx context.Context) (failing, disabled int64, err error)

	// Watches: what they are, and the scheduler's claims on them. Settle applies
	// WatchSettled to the watch of a watch task in its own transaction.
	CreateWatch(ctx context.Context, nw NewWatch) (*Watch, error)
	CreateWatches(ctx context.Context, nws []NewWatch) ([]WatchResult, error)
	GetWatch(ctx context.Context, orgID, id string) (*Watch, error)
	ListWatches(ctx context.Context, orgID string, f WatchFilter) ([]*Watch, int64, error)
	UpdateWatch(ctx context.Context, orgID, id string, p WatchPatch) (*Watch, error)
	DeleteWatch(ctx context.Context, orgID, id string) error
	SetWatchCap(ctx context.Context, orgName string, cap *int64) error
	WatchSpend(ctx context.Context, orgID string, monthStart time.Time) (spent int64, cap *int64, err error)
	DueWatches(ctx context.Context, now time.Time, limit, perOrg int) ([]DueWatch, error)
	WatchScheduled(ctx context.Context, orgID, id, taskID string, ranAt, next time.Time) error
	DeferWatch(ctx context.Context, orgID, id string, next time.Time) error

	// Batches: uploaded lists, a task per row. CreateBatch writes the batch and its
	// rows, no task; the server makes each row's task (CreateTask with NewTask.Batch).
	CreateBatch(ctx context.Context, nb NewBatch) (b *Batch, replayed bool, err error)
	GetBatch(ctx context.Context, orgID, id string) (*Batch, error)
	ListBatches(ctx context.Context, orgID string, page, pageSize int) ([]*Batch, int64, error)
	// PendingBatchRows returns the rows still without a task, up to perBatch of each
	// of up to batches batches, oldest batch first, each batch's in row order.
	PendingBatchRows(ctx context.Context, batches, perBatch int) ([]PendingBatchRow, error)
	// FailBatchRow records why a row gets no task; the row is no longer pending.
	FailBatchRow(ctx context.Context, batchID string, row int, e *enrich.TaskError) error
	// BatchResults returns up to limit rows after afterRow, in row order, with their
	// tasks and results.
	BatchResults(ctx context.Context, orgID, id string, afterRow, limit int) ([]BatchResult, error)

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
	ReleaseMemory(ctx context.Context) error
	SpaceUsage(ctx context.Context) (*Space, error)
	WriteStats() (transactions, commits int64)

	// For the benchmarks' ceiling: WriteAlone runs fn in a write transaction of its
	// own, begun at once and committed alone, never with others (SQLite's group commit).
	WriteAlone(ctx context.Context, fn func(Tx) error) error
}
