package postgres

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/google/uuid"
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

// CreateTask creates, charges and either settles or queues a task, in one transaction,
// as store.DB.CreateTask does on SQLite. With many writers, what the single writer made
// safe there is made safe here by locks:
//   - the Idempotency-Key is claimed first, by the primary key of idempotency_keys
//     (INSERT ... ON CONFLICT DO NOTHING): a second request with the same key waits for
//     the first's transaction, and once it commits finds the key taken and replays the
//     task it names, charging nothing;
//   - a task to be queued locks its organization's row first, so the backlog count it
//     checks cannot be passed by another enqueue of the same organization meanwhile,
//     and so a claimer does not drop the organization's turn under it (see ClaimTask);
//   - the charge is pgcore's chargeCredits, guarded on the grants' rows.
//
// Locks are taken in one order everywhere in this package (orgs, queue_turns, tasks,
// task_results, task_counts through the trigger, credit_grants) so that two
// transactions do not wait for each other in a circle; inTx retries the deadlock an
// order missed would give. The task is inserted before it is charged for that reason:
// a cancel or a refund takes task_counts before credit_grants too. A claimer, which
// holds a turn, never waits for an organization's row (it skips a locked one).
func (db *DB) CreateTask(ctx context.Context, nt store.NewTask) (*store.Enqueued, error) {
	var out *store.Enqueued
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = db.createTask(ctx, tx, nt)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (db *DB) createTask(ctx context.Context, tx pgx.Tx, nt store.NewTask) (*store.Enqueued, error) {
	now := db.now()
	t := &store.Task{
		ID: uuid.Must(uuid.NewV7()).String(), OrgID: nt.OrgID, ObjectType: nt.Input.Lookup.ObjectType(),
		Operation: store.TaskOperation, Status: store.StatusQueued, Lookup: nt.Input.Lookup, Input: nt.RawInput, Target: nt.Input.Target,
		CreditsCharged: nt.Input.Lookup.Cost(), LoopID: nt.LoopID, WatchID: nt.WatchID, CreatedAt: now, ExpiresAt: now.Add(nt.TTL),
	}
	if nt.IdempotencyKey != "" {
		t.IdempotencyKey = &nt.IdempotencyKey
		// A key taken by a task that retention deletes between the two statements is
		// free again: try to take it once more, as a new request would.
		for attempt := 1; ; attempt++ {
			claimed, err := claimIdempotencyKey(ctx, tx, nt, t.ID, now)
			if err != nil {
				return nil, err
			}
			if claimed {
				break
			}
			replay, err := findIdempotent(ctx, tx, nt)
			if errors.Is(err, errKeyGone) && attempt < 3 {
				continue
			}
			if err != nil {
				return nil, err
			}
			return &store.Enqueued{Task: replay, Replayed: true}, nil
		}
	}
	if nt.LoopID != nil {
		if err := checkLoopForRun(ctx, tx, nt.OrgID, *nt.LoopID, t.ObjectType); err != nil {
			return nil, err
		}
	}
	var rec *record
	if nt.Fail == nil {
		var err error
		if rec, err = findRecord(ctx, tx, store.OriginStore, store.RecordKey(nt.Input.Lookup, nt.Input.Target)); err != nil {
			return nil, err
		}
	}
	if rec != nil && nt.Input.Lookup == enrich.LookupEmail {
		if ok, err := stillEmployed(ctx, tx, rec, nt.Input.Target, now, nt.Freshness); err != nil || !ok {
			rec = nil // the workers resolve the address afresh
			if err != nil {
				return nil, err
			}
		}
	}
	switch {
	case nt.Fail != nil:
		t.Status, t.FinishedAt, t.Error = store.StatusFailed, &now, nt.Fail
	case rec != nil && now.Sub(rec.lastEnriched) < nt.Freshness:
		res, err := rec.result(nt.Input)
		if err != nil {
			return nil, err
		}
		if t.Data, err = store.ResultJSON(res); err != nil {
			return nil, err
		}
		t.Status, t.FinishedAt = store.StatusSucceeded, &now
	default:
		if err := lockOrg(ctx, tx, nt.OrgID); err != nil {
			return nil, err
		}
		if err := checkBacklog(ctx, tx, nt.OrgID, nt.MaxBacklog); err != nil {
			return nil, err
		}
		if err := joinQueue(ctx, tx, nt.OrgID); err != nil {
			return nil, err
		}
		t.QueuedAt = &now
	}
	if err := insertTask(ctx, tx, t); err != nil {
		return nil, err
	}
	if nt.Batch != nil {
		if err := linkBatchRow(ctx, tx, nt.Batch, t.ID); err != nil {
			return nil, err
		}
	}
	if err := chargeCredits(ctx, tx, nt.OrgID, t.ID, t.CreditsCharged, now); err != nil {
		return nil, err
	}
	switch t.Status {
	case store.StatusQueued:
		// Sent at commit, to the workers of every replica.
		if err := notifyTasks(ctx, tx); err != nil {
			return nil, err
		}
	case store.StatusFailed:
		if err := refundCredits(ctx, tx, t.ID, now); err != nil {
			return nil, err
		}
		fallthrough
	default:
		if err := deliverSettled(ctx, tx, t.ID, t.LoopID, now); err != nil {
			return nil, err
		}
	}
	return &store.Enqueued{Task: t}, nil
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

// claimIdempotencyKey binds the key to the task about to be created, and reports
// false when the key is already bound. The primary key (org_id, key) decides between
// two requests at once: the second's insert waits for the first's transaction and
// then does nothing; in READ COMMITTED the statements after it see the first's row.
func claimIdempotencyKey(ctx context.Context, tx pgx.Tx, nt store.NewTask, taskID string, now time.Time) (bool, error) {
	var endpoint *string
	if nt.Endpoint != "" {
		endpoint = &nt.Endpoint
	}
	tag, err := tx.Exec(ctx, `INSERT INTO idempotency_keys (org_id, key, endpoint, body_hash, task_id, created_at)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (org_id, key) DO NOTHING`,
		nt.OrgID, nt.IdempotencyKey, endpoint, store.BodyHash(nt.BodyHash), taskID, ms(now))
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// errKeyGone is an Idempotency-Key deleted with its task (retention) after the
// insert that found it taken.
var errKeyGone = errors.New("the idempotency key was deleted with its task")

// findIdempotent returns the task the key is bound to, or the 422 when the key was
// first used for another request.
func findIdempotent(ctx context.Context, tx pgx.Tx, nt store.NewTask) (*store.Task, error) {
	var endpoint sql.NullString
	var hash []byte
	var taskID string
	err := tx.QueryRow(ctx, `SELECT endpoint, body_hash, task_id FROM idempotency_keys WHERE org_id = $1 AND key = $2`,
		nt.OrgID, nt.IdempotencyKey).Scan(&endpoint, &hash, &taskID)
	if errors.Is(err, pgx.ErrNoRows) {
		// The key was there a statement ago; only its task's purge in between removes it.
		return nil, errKeyGone
	}
	if err != nil {
		return nil, fmt.Errorf("reading idempotency key: %w", err)
	}
	// The hash, which covers the endpoint, decides.
	if !bytes.Equal(hash, store.BodyHash(nt.BodyHash)) {
		return nil, store.IdempotencyKeyReused(endpoint.String, nt.Endpoint)
	}
	t, err := scanTask(tx.QueryRow(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id = $1`, taskID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.TaskNotFound()
	}
	return t, err
}

// stillEmployed: store.stillEmployed, reading through tx.
func stillEmployed(ctx context.Context, tx pgx.Tx, person *record, address string, now time.Time, freshness time.Duration) (bool, error) {
	_, domain, err := enrich.SplitAddress(address)
	if err != nil {
		return false, nil
	}
	var company *enrich.Company
	stored, err := findRecord(ctx, tx, store.OriginStore, store.RecordKey(enrich.LookupDomain, domain))
	if err != nil {
		return false, err
	}
	if stored != nil && now.Sub(stored.lastEnriched) < freshness {
		res, err := stored.result(enrich.Input{Lookup: enrich.LookupDomain, Target: domain})
		if err != nil {
			return false, err
		}
		company = res.Company
	}
	held, err := person.result(enrich.Input{Lookup: enrich.LookupPersonURL})
	if err != nil || held.Person == nil {
		return false, err
	}
	return enrich.EmployerAt(company, domain).CurrentPosition(held.Person) != nil, nil
}

func checkBacklog(ctx context.Context, tx pgx.Tx, orgID string, limit int64) error {
	if limit <= 0 {
		return nil
	}
	queued, err := taskCount(ctx, tx, orgID, store.StatusQueued)
	if err != nil {
		return err
	}
	if queued >= limit {
		return store.QueueFull(queued)
	}
	return nil
}

func insertTask(ctx context.Context, tx pgx.Tx, t *store.Task) error {
	var taskErr *string
	if t.Error != nil {
		b, err := json.Marshal(t.Error)
		if err != nil {
			return err
		}
		s := string(b)
		taskErr = &s
	}
	result, err := resultID(ctx, tx, t.Data)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO tasks (id, org_id, object_type, status, lookup, input, target,
		credits_charged, loop_id, watch_id, idempotency_key, created_at, queued_at, finished_at, expires_at, result_id, error)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`,
		t.ID, t.OrgID, t.ObjectType, t.Status, string(t.Lookup), string(t.Input), t.Target, t.CreditsCharged,
		t.LoopID, t.WatchID, t.IdempotencyKey, ms(t.CreatedAt), nullMS(t.QueuedAt), nullMS(t.FinishedAt), ms(t.ExpiresAt), result, taskErr)
	return err
}

const getTaskQuery = `SELECT ` + taskColumns + ` FROM tasks WHERE id = $1 AND org_id = $2`

// GetTask returns one of the organization's tasks; another organization's task is
// not found, the same as one that does not exist.
func (db *DB) GetTask(ctx context.Context, orgID, id string) (*store.Task, error) {
	t, err := scanTask(db.pool.QueryRow(ctx, getTaskQuery, id, orgID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.TaskNotFound()
	}
	return t, db.readChecked(err)
}

const (
	listTasksQuery = `SELECT ` + taskColumns + ` FROM tasks WHERE org_id = $1
		ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3`
	listTasksByStatusQuery = `SELECT ` + taskColumns + ` FROM tasks WHERE org_id = $1 AND status = $4
		ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3`
)

// ListTasks returns a page of the organization's tasks, newest first, and how many
// tasks match the filter in all, both from one snapshot. status "" lists every status.
func (db *DB) ListTasks(ctx context.Context, orgID, status string, page, pageSize int) ([]*store.Task, int64, error) {
	var tasks []*store.Task
	var total int64
	err := db.readTx(ctx, func(tx pgx.Tx) error {
		tasks = nil
		query, args := listTasksQuery, []any{orgID, pageSize, page * pageSize}
		if status != "" {
			query, args = listTasksByStatusQuery, append(args, status)
		}
		var err error
		if total, err = taskCount(ctx, tx, orgID, status); err != nil {
			return err
		}
		tasks, err = collectTasks(tx.Query(ctx, query, args...))
		return err
	})
	return tasks, total, err
}

// collectTasks reads every task of rows, selected as taskColumns, and closes them.
func collectTasks(rows pgx.Rows, err error) ([]*store.Task, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	tasks := []*store.Task{}
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		tasks = append(tasks, t)
	}
	return tasks, rows.Err()
}

// CancelTask cancels a queued or running task and refunds it; a late result is then
// discarded. A settled task cannot be canceled (409 task_settled). The task's row is
// locked first: a Settle, an expiry or another cancel of it waits, then finds it
// settled, so it is refunded once.
func (db *DB) CancelTask(ctx context.Context, orgID, id string) (*store.Task, error) {
	var t *store.Task
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		t, err = scanTask(tx.QueryRow(ctx, getTaskQuery+` FOR UPDATE`, id, orgID))
		if errors.Is(err, pgx.ErrNoRows) {
			return store.TaskNotFound()
		}
		if err != nil {
			return err
		}
		if t.Settled() {
			return store.TaskSettled(t.Status)
		}
		now := db.now()
		if _, err := tx.Exec(ctx, `UPDATE tasks SET status = 'canceled', finished_at = $1, lease_token = NULL, lease_until = NULL
			WHERE id = $2`, ms(now), id); err != nil {
			return err
		}
		t.Status, t.FinishedAt = store.StatusCanceled, &now
		return refundCredits(ctx, tx, id, now)
	})
	return t, err
}

// CountTasks counts the organization's tasks in one status.
func (db *DB) CountTasks(ctx context.Context, orgID, status string) (int64, error) {
	n, err := taskCount(ctx, db.pool, orgID, status)
	return n, db.readChecked(err)
}

// taskCount reads the organization's count of tasks in a status ("" for all) from
// task_counts, which triggers keep.
func taskCount(ctx context.Context, q querier, orgID, status string) (int64, error) {
	var n int64
	if status == "" {
		err := q.QueryRow(ctx, `SELECT coalesce(sum(n), 0)::bigint FROM task_counts WHERE org_id = $1`, orgID).Scan(&n)
		return n, err
	}
	err := q.QueryRow(ctx, `SELECT coalesce((SELECT n FROM task_counts WHERE org_id = $1 AND status = $2), 0)::bigint`, orgID, status).Scan(&n)
	return n, err
}

// FindTasks returns a page of the organization's tasks matching the filter, newest
// first, and the cursor of the next page (nil when this page is the last).
func (db *DB) FindTasks(ctx context.Context, orgID string, f store.TaskFilter) ([]*store.Task, *store.TaskCursor, error) {
	limit := f.Limit
	switch {
	case limit <= 0:
		limit = store.DefaultTaskPage
	case limit > store.MaxTaskPage:
		limit = store.MaxTaskPage
	}
	if f.Status != "" && !store.IsStatus(f.Status) {
		return nil, nil, enrich.Errorf(enrich.KindInvalid, "status %q is not one of queued, running, succeeded, failed, canceled", f.Status)
	}
	if f.ObjectType != "" && f.ObjectType != enrich.ObjectCompany && f.ObjectType != enrich.ObjectPerson {
		return nil, nil, enrich.Errorf(enrich.KindInvalid, "type %q is neither company nor person", f.ObjectType)
	}
	if len(f.LoopID) > 100 {
		return []*store.Task{}, nil, nil // no Loop has such an id
	}
	query, args := findTasksQuery(orgID, f, limit)
	tasks, err := collectTasks(db.pool.Query(ctx, query, args...))
	if err != nil {
		return nil, nil, db.readChecked(err)
	}
	if len(tasks) <= limit {
		return tasks, nil, nil
	}
	tasks = tasks[:limit]
	last := tasks[limit-1]
	return tasks, &store.TaskCursor{CreatedAt: last.CreatedAt, ID: last.ID}, nil
}

// findTasksQuery is the statement FindTasks runs for a filter already checked, and its
// arguments. PostgreSQL takes no index hints: each filter's equalities lead, in the
// order of the index made for it (tasks_org_loop_created, tasks_org_status_created,
// tasks_org_type_created, tasks_org_created), which the planner then walks backwards;
// TestFindTasksUsesIndexes checks that it does.
func findTasksQuery(orgID string, f store.TaskFilter, limit int) (string, []any) {
	var q strings.Builder
	q.WriteString(`SELECT ` + taskColumns + ` FROM tasks WHERE org_id = $1`)
	args := []any{orgID}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	for _, eq := range []struct{ column, value string }{{"loop_id", f.LoopID}, {"status", f.Status}, {"object_type", f.ObjectType}} {
		if eq.value != "" {
			q.WriteString(` AND ` + eq.column + ` = ` + arg(eq.value))
		}
	}
	if !f.From.IsZero() {
		q.WriteString(` AND created_at >= ` + arg(ms(f.From)))
	}
	// One upper bound, the tighter, as on SQLite.
	if f.Before != nil && (f.To.IsZero() || ms(f.Before.CreatedAt) < ms(f.To)) {
		q.WriteString(` AND (created_at, id) < (` + arg(ms(f.Before.CreatedAt)) + `, ` + arg(f.Before.ID) + `)`)
	} else if !f.To.IsZero() {
		q.WriteString(` AND created_at < ` + arg(ms(f.To)))
	}
	q.WriteString(` ORDER BY created_at DESC, id DESC LIMIT ` + arg(limit+1)) // one more tells whether a next page exists
	return q.String(), args
}
