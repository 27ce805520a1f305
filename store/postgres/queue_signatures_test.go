package postgres

import (
	"context"
	"time"

	"enrichd/store"
)

// queueOps are the operations of this package's task, queue, records and maintenance
// files, with the signatures *store.DB has: both types must satisfy it, so a signature
// that drifts from the SQLite store's fails to compile here.
type queueOps interface {
	PurgeSettled(ctx context.Context, cutoff time.Time, limit int) (store.Purged, error)
	SpaceUsage(ctx context.Context) (*store.Space, error)
	Backup(ctx context.Context, path string, overwrite bool) error
	Checkpoint(ctx context.Context) (bool, error)
	ReleaseMemory(ctx context.Context) error
	CeilingWrite(ctx context.Context, orgID string, grantID int64) (string, error)
	CeilingRead(ctx context.Context, id string) error
	SeedTasks(ctx context.Context, orgID string, n int) error
	SeedQueuedTasks(ctx context.Context, orgID string, n int) error
}

var (
	_ queueOps = (*store.DB)(nil)
	_ queueOps = (*DB)(nil)
)
