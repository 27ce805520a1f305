package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"enrichd/enrich"
	"enrichd/store"
)

const taskColumns = `id, org_id, object_type, status, lookup, input, target, credits_charged,
	loop_id, watch_id, idempotency_key, created_at, queued_at, started_at, finished_at, expires_at, ` + resultColumn + `, error`

type scanner interface{ Scan(dest ...any) error }

func scanTask(row scanner) (*Task, error) {
	var t Task
	var input, result, taskErr sql.NullString
	var created, expires int64
	var queued, started, finished sql.NullInt64
	if err := row.Scan(&t.ID, &t.OrgID, &t.ObjectType, &t.Status, &t.Lookup, &input, &t.Target,
		&t.CreditsCharged, &t.LoopID, &t.WatchID, &t.IdempotencyKey, &created, &queued, &started, &finished, &expires,
		&result, &taskErr); err != nil {
		return nil, err
	}
	t.Operation = store.TaskOperation
	t.Input = json.RawMessage(input.String)
	t.CreatedAt, t.ExpiresAt = fromMS(created), fromMS(expires)
	t.QueuedAt, t.StartedAt, t.FinishedAt = fromNullMS(queued), fromNullMS(started), fromNullMS(finished)
	if result.Valid {
		t.Data = json.RawMessage(result.String)
	}
	if taskErr.Valid {
		t.Error = &enrich.TaskError{}
		if err := json.Unmarshal([]byte(taskErr.String), t.Error); err != nil {
			return nil, fmt.Errorf("task %s: error column: %w", t.ID, err)
		}
	}
	return &t, nil
}

func nullMS(t *time.Time) any {
	if t == nil {
		return nil
	}
	return ms(*t)
}

// SingleWriter is true: one writer runs every write transaction here.
func (db *DB) SingleWriter() bool { return true }

// IndexedBy names the index: a schema that could no longer serve the query makes it
// fail ("no query solution") instead of scanning the table.
func (db *DB) IndexedBy(table, index string) string { return table + ` INDEXED BY ` + index }

// LockOrgs locks nothing: the single writer orders the enqueues and the claims.
func (e txExec) LockOrgs(ctx context.Context, orgIDs ...string) error { return nil }

// NotifyQueued does nothing: the workers share the process, and the server wakes them.
func (e txExec) NotifyQueued(ctx context.Context) error { return nil }
