package postgres

import (
	"context"
	"io"
	"time"

	"enrichd/enrich"
	"enrichd/store"
)

// queueOps are the operations of this package's task, queue, records and maintenance
// files, with the signatures *store.DB has: both types must satisfy it, so a signature
// that drifts from the SQLite store's fails to compile here.
type queueOps interface {
	CreateTask(ctx context.Context, nt store.NewTask) (*store.Enqueued, error)
	GetTask(ctx context.Context, orgID, id string) (*store.Task, error)
	ListTasks(ctx context.Context, orgID, status string, page, pageSize int) ([]*store.Task, int64, error)
	CancelTask(ctx context.Context, orgID, id string) (*store.Task, error)
	CountTasks(ctx context.Context, orgID, status string) (int64, error)
	FindTasks(ctx context.Context, orgID string, f store.TaskFilter) ([]*store.Task, *store.TaskCursor, error)
	ClaimTask(ctx context.Context, lease time.Duration) (*store.Claim, error)
	ExtendLease(ctx context.Context, c *store.Claim, lease time.Duration) (bool, error)
	Settle(ctx context.Context, c *store.Claim, out store.Outcome) (bool, error)
	ExpireTasks(ctx context.Context) ([]store.ExpiredTask, error)
	RequeueAbandoned(ctx context.Context) (requeued int, gaveUp []store.ExpiredTask, err error)
	ReleaseTask(ctx context.Context, c *store.Claim) error
	Import(ctx context.Context, r io.Reader, norm enrich.Normalizer) (store.ImportStats, error)
	QueueDepth(ctx context.Context) (queued, running int64, err error)
	SpaceUsage(ctx context.Context) (*store.Space, error)
	Backup(ctx context.Context, path string, overwrite bool) error
	Checkpoint(ctx context.Context) (bool, error)
	ReleaseMemory(ctx context.Context) error
}

var (
	_ queueOps = (*store.DB)(nil)
	_ queueOps = (*DB)(nil)
)
