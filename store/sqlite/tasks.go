package sqlite

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

// CreateTask creates, charges and either settles or queues a task, in one transaction:
// an idempotent replay returns the original task and charges nothing; a task that
// fails inside the request (nt.Fail) is created failed and refunded; a stored record
// younger than the freshness window settles the task at once; otherwise the task is
// queued, unless the organization's backlog is full. A task naming a Loop must name an
// enabled Loop of the organization that takes its object type; one settled here sends
// its event like any other. A refusal (400, 402, 409, 422, 429) creates and charges
// nothing.
func (db *DB) CreateTask(ctx context.Context, nt NewTask) (*Enqueued, error) {
	hit := db.answerAhead(ctx, nt)
	var out *Enqueued
	err := db.inTx(ctx, func(tx *Tx) error {
		now := db.now()
		if nt.IdempotencyKey != "" {
			replay, err := findIdempotent(ctx, tx, nt)
			if err != nil || replay != nil {
				out = &Enqueued{Task: replay, Replayed: true}
				return err
			}
		}
		t := &Task{
			ID: uuid.Must(uuid.NewV7()).String(), OrgID: nt.OrgID, ObjectType: nt.Input.Lookup.ObjectType(),
			Operation: store.TaskOperation, Status: StatusQueued, Lookup: nt.Input.Lookup, Input: nt.RawInput, Target: nt.Input.Target,
			CreditsCharged: nt.Input.Lookup.Cost(), LoopID: nt.LoopID, WatchID: nt.WatchID, CreatedAt: now, ExpiresAt: now.Add(nt.TTL),
		}
		if nt.IdempotencyKey != "" {
			t.IdempotencyKey = &nt.IdempotencyKey
		}
		if nt.LoopID != nil {
			if err := checkLoopForRun(ctx, tx, nt.OrgID, *nt.LoopID, t.ObjectType); err != nil {
				return err
			}
		}
		var rec *record
		if nt.Fail == nil {
			var err error
			if rec, err = findRecord(ctx, tx, store.OriginStore, store.RecordKey(nt.Input.Lookup, nt.Input.Target)); err != nil {
				return err
			}
		}
		if rec != nil && nt.Input.Lookup == enrich.LookupEmail {
			if ok, err := stillEmployed(ctx, tx, rec, nt.Input.Target, now, nt.Freshness); err != nil || !ok {
				rec = nil // the workers resolve the address afresh
				if err != nil {
					return err
				}
			}
		}
		if nt.Fail != nil {
			t.Status, t.FinishedAt, t.Error = StatusFailed, &now, nt.Fail
		} else if rec != nil && now.Sub(rec.lastEnriched) < nt.Freshness {
			if t.Data = hit.answer(rec); t.Data == nil {
				var err error
				if t.Data, err = answerFrom(rec, nt.Input); err != nil {
					return err
				}
			}
			t.Status, t.FinishedAt = StatusSucceeded, &now
		} else {
			if err := checkBacklog(ctx, tx, nt.OrgID, nt.MaxBacklog); err != nil {
				return err
			}
			t.QueuedAt = &now
		}
		if err := charge(ctx, tx, nt.OrgID, t.ID, t.CreditsCharged, now); err != nil {
			return err
		}
		if err := insertTask(ctx, tx, t); err != nil {
			return err
		}
		if nt.Batch != nil {
			if err := linkBatchRow(ctx, tx, nt.Batch, t.ID); err != nil {
				return err
			}
		}
		if t.Status == StatusFailed {
			if err := refund(ctx, tx, t.ID, now); err != nil {
				return err
			}
		}
		if t.Status == StatusQueued {
			if err := joinQueue(ctx, tx, t.OrgID); err != nil {
				return err
			}
		} else if err := deliverSettled(ctx, tx, t.ID, t.LoopID, now); err != nil {
			return err
		}
		if nt.IdempotencyKey != "" {
			var endpoint *string
			if nt.Endpoint != "" {
				endpoint = &nt.Endpoint
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO idempotency_keys (org_id, key, endpoint, body_hash, task_id, created_at)
				VALUES (?, ?, ?, ?, ?, ?)`, nt.OrgID, nt.IdempotencyKey, endpoint, store.BodyHash(nt.BodyHash), t.ID, ms(now)); err != nil {
				return err
			}
		}
		out = &Enqueued{Task: t}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// storedAnswer is a store hit's result worked out from the record as the reader pool
// saw it before the transaction: decoding the record and encoding the result took an
// eighth of the single writer's time for each hit, and need not hold it up. The
// transaction reads the record again and uses the answer only if it is the same
// record with the same bytes.
type storedAnswer struct {
	rec    *record
	result []byte
}

// answerAhead works out a store hit's result before the transaction, or returns nil
// when the input is not a plain store hit (an email lookup also checks employment
// inside the transaction, and a refused or failed task has no result). It is only a
// head start: whatever fails here, the transaction reads and decides again, and
// reports its own errors.
func (db *DB) answerAhead(ctx context.Context, nt NewTask) *storedAnswer {
	if nt.Fail != nil || nt.Input.Lookup == enrich.LookupEmail {
		return nil
	}
	rec, err := findRecord(ctx, db.read, store.OriginStore, store.RecordKey(nt.Input.Lookup, nt.Input.Target))
	if err != nil || rec == nil || db.now().Sub(rec.lastEnriched) >= nt.Freshness {
		return nil
	}
	result, err := answerFrom(rec, nt.Input)
	if err != nil {
		return nil
	}
	return &storedAnswer{rec: rec, result: result}
}

// answer is the result worked out ahead, if rec, read inside the transaction, is the
// record it was worked out from.
func (a *storedAnswer) answer(rec *record) []byte {
	if a == nil || a.rec.id != rec.id || a.rec.redirect != rec.redirect || !bytes.Equal(a.rec.data, rec.data) {
		return nil
	}
	return a.result
}

func answerFrom(rec *record, in enrich.Input) ([]byte, error) {
	res, err := rec.result(in)
	if err != nil {
		return nil, err
	}
	return store.ResultJSON(res)
}

// stillEmployed reports whether the person an address is on record for holds a
// current position at the company behind its domain (as the store has it, or named
// after the domain): only then may the address be answered inside the request.
func stillEmployed(ctx context.Context, tx *Tx, person *record, address string, now time.Time, freshness time.Duration) (bool, error) {
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

func findIdempotent(ctx context.Context, tx *Tx, nt NewTask) (*Task, error) {
	var endpoint sql.NullString
	var hash []byte
	var taskID string
	err := tx.QueryRowContext(ctx, `SELECT endpoint, body_hash, task_id FROM idempotency_keys WHERE org_id = ? AND key = ?`,
		nt.OrgID, nt.IdempotencyKey).Scan(&endpoint, &hash, &taskID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// The hash, which covers the endpoint, decides. A key stored before endpoints were
	// kept has none.
	if !bytes.Equal(hash, store.BodyHash(nt.BodyHash)) {
		return nil, store.IdempotencyKeyReused(endpoint.String, nt.Endpoint)
	}
	return scanTask(tx.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id = ?`, taskID))
}

func checkBacklog(ctx context.Context, tx *Tx, orgID string, limit int64) error {
	if limit <= 0 {
		return nil
	}
	queued, err := taskCount(ctx, tx, orgID, StatusQueued)
	if err != nil {
		return err
	}
	if queued >= limit {
		return store.QueueFull(queued)
	}
	return nil
}

func insertTask(ctx context.Context, tx *Tx, t *Task) error {
	var taskErr []byte
	if t.Error != nil {
		var err error
		if taskErr, err = json.Marshal(t.Error); err != nil {
			return err
		}
	}
	result, err := resultID(ctx, tx, t.Data)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO tasks (id, org_id, object_type, status, lookup, input, target,
		credits_charged, loop_id, watch_id, idempotency_key, created_at, queued_at, finished_at, expires_at, result_id, error)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		t.ID, t.OrgID, t.ObjectType, t.Status, t.Lookup, string(t.Input), t.Target, t.CreditsCharged,
		t.LoopID, t.WatchID, t.IdempotencyKey, ms(t.CreatedAt), nullMS(t.QueuedAt), nullMS(t.FinishedAt), ms(t.ExpiresAt), result, nullText(taskErr))
	return err
}

func nullMS(t *time.Time) any {
	if t == nil {
		return nil
	}
	return ms(*t)
}

const getTaskQuery = `SELECT ` + taskColumns + ` FROM tasks WHERE id = ? AND org_id = ?`

// GetTask returns one of the organization's tasks; another organization's task is
// not found, the same as one that does not exist.
func (db *DB) GetTask(ctx context.Context, orgID, id string) (*Task, error) {
	t, err := scanTask(db.read.QueryRowContext(ctx, getTaskQuery, id, orgID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.TaskNotFound()
	}
	return t, err
}

const (
	listTasksQuery = `SELECT ` + taskColumns + ` FROM tasks WHERE org_id = ?
		ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`
	listTasksByStatusQuery = `SELECT ` + taskColumns + ` FROM tasks WHERE org_id = ? AND status = ?
		ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`
)

// ListTasks returns a page of the organization's tasks, newest first, and how many
// tasks match the filter in all. status "" lists every status.
func (db *DB) ListTasks(ctx context.Context, orgID, status string, page, pageSize int) ([]*Task, int64, error) {
	var tasks []*Task
	var total int64
	err := db.inReadTx(ctx, func(tx *Tx) error {
		query, args := listTasksQuery, []any{orgID}
		if status != "" {
			query, args = listTasksByStatusQuery, append(args, status)
		}
		var err error
		if total, err = taskCount(ctx, tx, orgID, status); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, query, append(args, pageSize, page*pageSize)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			t, err := scanTask(rows)
			if err != nil {
				return err
			}
			tasks = append(tasks, t)
		}
		return rows.Err()
	})
	return tasks, total, err
}

// CancelTask cancels a queued or running task and refunds it; a late result is then
// discarded. A settled task cannot be canceled (409 task_settled).
func (db *DB) CancelTask(ctx context.Context, orgID, id string) (*Task, error) {
	var t *Task
	err := db.inTx(ctx, func(tx *Tx) error {
		var err error
		t, err = scanTask(tx.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id = ? AND org_id = ?`, id, orgID))
		if errors.Is(err, sql.ErrNoRows) {
			return store.TaskNotFound()
		}
		if err != nil {
			return err
		}
		if t.Settled() {
			return store.TaskSettled(t.Status)
		}
		now := db.now()
		if _, err := tx.ExecContext(ctx, `UPDATE tasks SET status = 'canceled', finished_at = ?, lease_token = NULL, lease_until = NULL
			WHERE id = ?`, ms(now), id); err != nil {
			return err
		}
		t.Status, t.FinishedAt = StatusCanceled, &now
		return refund(ctx, tx, id, now)
	})
	return t, err
}

// CountTasks counts the organization's tasks in one status.
func (db *DB) CountTasks(ctx context.Context, orgID, status string) (int64, error) {
	return taskCount(ctx, db.read, orgID, status)
}

// taskCount reads the organization's count of tasks in a status ("" for all) from
// task_counts, which triggers keep: the same cost at a thousand tasks as at a million.
func taskCount(ctx context.Context, q querier, orgID, status string) (int64, error) {
	var n int64
	if status == "" {
		err := q.QueryRowContext(ctx, `SELECT coalesce(sum(n), 0) FROM task_counts WHERE org_id = ?`, orgID).Scan(&n)
		return n, err
	}
	err := q.QueryRowContext(ctx, `SELECT coalesce((SELECT n FROM task_counts WHERE org_id = ? AND status = ?), 0)`, orgID, status).Scan(&n)
	return n, err
}

// FindTasks returns a page of the organization's tasks matching the filter, newest
// first, and the cursor of the next page (nil when this page is the last). Each filter
// picks the index it walks, the most selective first (Loop, status, type, none); the
// query names it, so a schema that could no longer serve it fails loudly instead of
// scanning the table.
func (db *DB) FindTasks(ctx context.Context, orgID string, f TaskFilter) ([]*Task, *TaskCursor, error) {
	limit := f.Limit
	switch {
	case limit <= 0:
		limit = DefaultTaskPage
	case limit > MaxTaskPage:
		limit = MaxTaskPage
	}
	if f.Status != "" && !store.IsStatus(f.Status) {
		return nil, nil, enrich.Errorf(enrich.KindInvalid, "status %q is not one of queued, running, succeeded, failed, canceled", f.Status)
	}
	if f.ObjectType != "" && f.ObjectType != enrich.ObjectCompany && f.ObjectType != enrich.ObjectPerson {
		return nil, nil, enrich.Errorf(enrich.KindInvalid, "type %q is neither company nor person", f.ObjectType)
	}
	if len(f.LoopID) > 100 {
		return []*Task{}, nil, nil // no Loop has such an id
	}
	query, args := findTasksQuery(orgID, f, limit)
	rows, err := db.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	tasks := []*Task{}
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, nil, err
		}
		tasks = append(tasks, t)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	if len(tasks) <= limit {
		return tasks, nil, nil
	}
	tasks = tasks[:limit]
	last := tasks[limit-1]
	return tasks, &TaskCursor{CreatedAt: last.CreatedAt, ID: last.ID}, nil
}

// findTasksQuery is the statement FindTasks runs for a filter already checked, and
// its arguments.
func findTasksQuery(orgID string, f TaskFilter, limit int) (string, []any) {
	index := "tasks_org_created"
	switch {
	case f.LoopID != "":
		index = "tasks_org_loop_created"
	case f.Status != "":
		index = "tasks_org_status_created"
	case f.ObjectType != "":
		index = "tasks_org_type_created"
	}
	var q strings.Builder
	q.WriteString(`SELECT ` + taskColumns + ` FROM tasks INDEXED BY ` + index + ` WHERE org_id = ?`)
	args := []any{orgID}
	// Equality first, in the index's column order; the other filters are checked on the
	// rows the index walk reaches.
	for _, eq := range []struct{ column, value string }{{"loop_id", f.LoopID}, {"status", f.Status}, {"object_type", f.ObjectType}} {
		if eq.value != "" {
			q.WriteString(` AND ` + eq.column + ` = ?`)
			args = append(args, eq.value)
		}
	}
	if !f.From.IsZero() {
		q.WriteString(` AND created_at >= ?`)
		args = append(args, ms(f.From))
	}
	// One upper bound, the tighter: given two, SQLite bounds the index walk by one and
	// checks the other row by row, and a deep page would walk every row above it.
	if f.Before != nil && (f.To.IsZero() || ms(f.Before.CreatedAt) < ms(f.To)) {
		q.WriteString(` AND (created_at, id) < (?, ?)`)
		args = append(args, ms(f.Before.CreatedAt), f.Before.ID)
	} else if !f.To.IsZero() {
		q.WriteString(` AND created_at < ?`)
		args = append(args, ms(f.To))
	}
	q.WriteString(` ORDER BY created_at DESC, id DESC LIMIT ?`)
	args = append(args, limit+1) // one more tells whether a next page exists
	return q.String(), args
}
