package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/jackc/pgx/v5"
)

// resultColumn is the task's result, kept once in task_results (migration 8 of the
// SQLite schema, mirrored), put back in its place in a column list of tasks.
const resultColumn = `(SELECT data FROM task_results WHERE task_results.id = tasks.result_id)`

const taskColumns = `id, org_id, object_type, status, lookup, input, target, credits_charged,
	loop_id, watch_id, idempotency_key, created_at, queued_at, started_at, finished_at, expires_at, ` + resultColumn + `, error`

func scanTask(row pgx.Row) (*store.Task, error) {
	var t store.Task
	var input string
	var result, taskErr *string
	var created, expires int64
	var queued, started, finished *int64
	if err := row.Scan(&t.ID, &t.OrgID, &t.ObjectType, &t.Status, &t.Lookup, &input, &t.Target,
		&t.CreditsCharged, &t.LoopID, &t.WatchID, &t.IdempotencyKey, &created, &queued, &started, &finished, &expires,
		&result, &taskErr); err != nil {
		return nil, err
	}
	t.Operation = store.TaskOperation
	t.Input = json.RawMessage(input)
	t.CreatedAt, t.ExpiresAt = fromMS(created), fromMS(expires)
	t.QueuedAt, t.StartedAt, t.FinishedAt = fromNullMS(queued), fromNullMS(started), fromNullMS(finished)
	if result != nil {
		t.Data = json.RawMessage(*result)
	}
	if taskErr != nil {
		t.Error = &enrich.TaskError{}
		if err := json.Unmarshal([]byte(*taskErr), t.Error); err != nil {
			return nil, fmt.Errorf("task %s: error column: %w", t.ID, err)
		}
	}
	return &t, nil
}

// lockOrg locks the organization's row against the other enqueues of its tasks and
// against a claimer dropping its turn. FOR NO KEY UPDATE, not FOR UPDATE: rows that
// refer to the organization (a task, a ledger row) take FOR KEY SHARE on it, which
// FOR UPDATE would make wait.
func lockOrg(ctx context.Context, tx pgx.Tx, orgID string) error {
	var id string
	err := tx.QueryRow(ctx, `SELECT id FROM orgs WHERE id = $1 FOR NO KEY UPDATE`, orgID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("organization %s: not found", orgID)
	}
	return err
}

// SingleWriter is false: transactions run side by side, and a read ahead of one would
// be a round trip more.
func (db *DB) SingleWriter() bool { return false }

// IndexedBy is the table alone: PostgreSQL takes no index hints. Each filter of
// FindTasks leads with the equalities of the index made for it, which the planner
// then walks backwards; TestFindTasksPagesAndEachFilterWalksAnIndex checks that it does.
func (db *DB) IndexedBy(table, index string) string { return table }

// LockOrgs locks the organizations' rows in one order (see lockOrg).
func (e exec) LockOrgs(ctx context.Context, orgIDs ...string) error {
	if len(orgIDs) == 1 {
		return lockOrg(ctx, e.q.(pgx.Tx), orgIDs[0])
	}
	return lockOrgs(ctx, e.q.(pgx.Tx), orgIDs)
}

// NotifyQueued sends the NOTIFY of an enqueued task, delivered at commit.
func (e exec) NotifyQueued(ctx context.Context) error { return notifyTasks(ctx, e.q.(pgx.Tx)) }
