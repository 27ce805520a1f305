package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"enrichd/enrich"

	"github.com/google/uuid"
)

// Batch bounds: the rows of one upload and its body's size.
const (
	MaxBatchRows  = 10000
	MaxBatchBytes = 5 << 20

	DefaultBatchPage = 20
	MaxBatchPage     = 100
)

// Batch statuses: running while a row has no task yet or its task is unsettled.
const (
	BatchRunning = "running"
	BatchDone    = "done"
)

// Batch is an uploaded list of inputs, each row enriched by a task of its own. Its
// JSON is the Batch of the API.
type Batch struct {
	ID         string   `json:"id"`
	ObjectType string   `json:"object_type"`
	Name       string   `json:"name"`
	Status     string   `json:"status"`
	Rows       int      `json:"rows"`
	Columns    []string `json:"columns"`
	// Counts are the rows by what became of them so far.
	Counts BatchCounts `json:"counts"`
	// CreditsEstimate is the most the batch costs: every row's charge, as if none
	// failed (a failed task is refunded).
	CreditsEstimate int64 `json:"credits_estimate"`
	// CreditsSpent is what its tasks hold now: charged and not refunded.
	CreditsSpent   int64     `json:"credits_spent"`
	IdempotencyKey *string   `json:"idempotency_key"`
	CreatedAt      time.Time `json:"created_at"`

	OrgID string `json:"-"`
}

// BatchCounts are a batch's rows by status: pending rows have no task yet; the others
// are their tasks' statuses. A row refused when its task was to be made (credits ran
// out meanwhile) counts as failed. Purged rows' tasks were deleted by retention.
type BatchCounts struct {
	Pending   int64 `json:"pending"`
	Queued    int64 `json:"queued"`
	Running   int64 `json:"running"`
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
	Canceled  int64 `json:"canceled"`
	Purged    int64 `json:"purged,omitempty"`
}

// Add counts n rows of status (a task status, "pending" or "purged").
func (c *BatchCounts) Add(status string, n int64) {
	switch status {
	case "pending":
		c.Pending += n
	case StatusQueued:
		c.Queued += n
	case StatusRunning:
		c.Running += n
	case StatusSucceeded:
		c.Succeeded += n
	case StatusFailed:
		c.Failed += n
	case StatusCanceled:
		c.Canceled += n
	default:
		c.Purged += n
	}
}

// Settle fills Status from the counts.
func (b *Batch) Settle() {
	b.Status = BatchDone
	if b.Counts.Pending+b.Counts.Queued+b.Counts.Running > 0 {
		b.Status = BatchRunning
	}
}

// NewBatch is a batch to create, every row already checked.
type NewBatch struct {
	OrgID, ObjectType, Name string
	Columns                 []string
	Rows                    []NewBatchRow
	CreditsEstimate         int64
	IdempotencyKey          string // "" when none was sent
	BodyHash                string // what the key is bound to
}

// NewBatchRow is one row: its values as uploaded, one per column, and the request its
// task is made from (the enrichment endpoint's fields).
type NewBatchRow struct {
	Values  []string
	Request json.RawMessage
	// Subject is whom the row's input names (enrich.InputSubject), as the row's task
	// will be about; ok false for a company's page.
	Subject   enrich.Subject
	SubjectOK bool
}

// PendingBatchRow is a row whose task is still to be made.
type PendingBatchRow struct {
	BatchID, OrgID, ObjectType string
	Row                        int // from 1
	Request                    json.RawMessage
}

// BatchResult is one row of a batch with its task as it is now: nil before the task
// is made, and after retention deleted it (Purged). Error is why a row got no task.
type BatchResult struct {
	Row    int
	Values []string
	Task   *Task
	Error  *enrich.TaskError
	Purged bool
}

// BatchRowRef names the batch row a task is made for: the task's creation links it,
// in the same transaction.
type BatchRowRef struct {
	BatchID string
	Row     int
}

// BatchPage is the page and page size asked for, within bounds.
func BatchPage(page, size int) (int, int) {
	page = max(page, 0)
	switch {
	case size <= 0:
		size = DefaultBatchPage
	case size > MaxBatchPage:
		size = MaxBatchPage
	}
	return page, size
}

// CheckNewBatch checks what a driver relies on before it writes a batch.
func CheckNewBatch(nb NewBatch) error {
	switch {
	case len(nb.Rows) == 0:
		return enrich.Errorf(enrich.KindInvalid, "a batch needs at least one row")
	case len(nb.Rows) > MaxBatchRows:
		return enrich.Errorf(enrich.KindInvalid, "a batch holds at most %d rows, not %d", MaxBatchRows, len(nb.Rows))
	case nb.ObjectType != enrich.ObjectCompany && nb.ObjectType != enrich.ObjectPerson:
		return fmt.Errorf("batch object type %q", nb.ObjectType)
	}
	return nil
}

// BatchNotFound is the answer for a batch that is not the organization's.
func BatchNotFound() error {
	return &enrich.Error{Kind: enrich.KindNotFound, Code: "not_found", Message: "batch not found"}
}

// BatchKeyReused refuses a batch whose Idempotency-Key first came with another upload.
func BatchKeyReused() error {
	return &enrich.Error{Kind: enrich.KindUnprocessable, Code: "idempotency_key_reused",
		Message: "this Idempotency-Key was first used on POST /v1/batches with another file or other parameters; send that file again to get the original batch back, or a new key for a new batch"}
}

// RowIdempotencyKey is the Idempotency-Key of the task of one row of a batch: a
// second attempt at the row (another replica, a restart) replays the task, free.
func RowIdempotencyKey(batchID string, row int) string {
	return fmt.Sprintf("batch:%s:%d", batchID, row)
}

// Settled counts the rows whose outcome is final: their tasks settled (or deleted by
// retention since), or the row refused.
func (b *Batch) Settled() int64 {
	return b.Counts.Succeeded + b.Counts.Failed + b.Counts.Canceled + b.Counts.Purged
}

const batchColumns = `id, org_id, object_type, name, columns, row_count, credits_estimate, idempotency_key, created_at`

func scanBatch(row Row) (*Batch, error) {
	var b Batch
	var columns string
	var created int64
	if err := row.Scan(&b.ID, &b.OrgID, &b.ObjectType, &b.Name, &columns, &b.Rows, &b.CreditsEstimate, &b.IdempotencyKey, &created); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(columns), &b.Columns); err != nil {
		return nil, fmt.Errorf("batch %s: columns: %w", b.ID, err)
	}
	b.CreatedAt = fromMS(created)
	return &b, nil
}

// batchCountsQuery counts a batch's rows by status through their tasks, and sums what
// those tasks hold: a failed or canceled task was refunded.
const batchCountsQuery = `SELECT CASE WHEN r.task_id IS NULL THEN (CASE WHEN r.error IS NULL THEN 'pending' ELSE 'failed' END)
		ELSE coalesce(t.status, 'purged') END AS st, count(*),
		CAST(coalesce(sum(CASE WHEN t.status IN ('queued', 'running', 'succeeded') THEN t.credits_charged END), 0) AS BIGINT)
	FROM batch_rows r LEFT JOIN tasks t ON t.id = r.task_id WHERE r.batch_id = ? GROUP BY st`

func batchCounts(ctx context.Context, q Executor, b *Batch) error {
	b.Counts, b.CreditsSpent = BatchCounts{}, 0
	rows, err := q.Query(ctx, batchCountsQuery, b.ID)
	_, err = collect(rows, err, func(r Row) (struct{}, error) {
		var st string
		var n, spent int64
		err := r.Scan(&st, &n, &spent)
		b.Counts.Add(st, n)
		b.CreditsSpent += spent
		return struct{}{}, err
	})
	b.Settle()
	return err
}

// findBatchByKey is the organization's batch made with nb's key, nil when there is
// none, or the refusal of a key first sent with another upload.
func findBatchByKey(ctx context.Context, tx Tx, nb NewBatch) (*Batch, error) {
	var id string
	var hash []byte
	err := tx.QueryRow(ctx, `SELECT id, body_hash FROM batches WHERE org_id = ? AND idempotency_key = ?`,
		nb.OrgID, nb.IdempotencyKey).Scan(&id, &hash)
	switch {
	case errors.Is(err, ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, err
	case !bytes.Equal(hash, BodyHash(nb.BodyHash)):
		return nil, BatchKeyReused()
	}
	b, err := scanBatch(tx.QueryRow(ctx, `SELECT `+batchColumns+` FROM batches WHERE id = ?`, id))
	if err != nil {
		return nil, err
	}
	return b, batchCounts(ctx, tx, b)
}

// CreateBatch writes a batch and its rows in one transaction, charging nothing: the
// rows' tasks are made one by one after it. A batch whose Idempotency-Key the
// organization used before is that batch again, or refused when the upload differs.
// A balance below the batch's estimate refuses it, since its rows would fail for
// want of credits. Two uploads with one key at once (PostgreSQL): the second's INSERT
// waits for the first's transaction on the unique key, and then finds it.
func (db *DB) CreateBatch(ctx context.Context, nb NewBatch) (*Batch, bool, error) {
	if err := CheckNewBatch(nb); err != nil {
		return nil, false, err
	}
	h, err := db.hasher()
	if err != nil {
		return nil, false, err
	}
	columns, err := json.Marshal(nb.Columns)
	if err != nil {
		return nil, false, err
	}
	// The values and the subjects' hashes are worked out before the transaction.
	vals, hashes := make([]string, len(nb.Rows)), make([][]byte, len(nb.Rows))
	for i, r := range nb.Rows {
		v, err := json.Marshal(r.Values)
		if err != nil {
			return nil, false, err
		}
		vals[i], hashes[i] = string(v), hashOf(h, r.Subject, r.SubjectOK)
	}
	var out *Batch
	var replayed bool
	err = db.Write(ctx, func(tx Tx) error {
		out, replayed = nil, false
		if nb.IdempotencyKey != "" {
			b, err := findBatchByKey(ctx, tx, nb)
			if err != nil || b != nil {
				out, replayed = b, b != nil
				return err
			}
		}
		bal, err := balance(ctx, tx, nb.OrgID)
		if err != nil {
			return err
		}
		if bal.Balance < nb.CreditsEstimate {
			return insufficientCredits(ctx, tx, nb.OrgID, nb.CreditsEstimate, bal.Balance)
		}
		now := db.now()
		b := &Batch{ID: uuid.Must(uuid.NewV7()).String(), OrgID: nb.OrgID, ObjectType: nb.ObjectType, Name: nb.Name,
			Columns: nb.Columns, Rows: len(nb.Rows), CreditsEstimate: nb.CreditsEstimate, CreatedAt: now}
		var key, hash any
		if nb.IdempotencyKey != "" {
			b.IdempotencyKey, key, hash = &nb.IdempotencyKey, nb.IdempotencyKey, BodyHash(nb.BodyHash)
		}
		n, err := tx.Exec(ctx, `INSERT INTO batches (id, org_id, object_type, name, columns, row_count, credits_estimate,
			idempotency_key, body_hash, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (org_id, idempotency_key) DO NOTHING`,
			b.ID, b.OrgID, b.ObjectType, b.Name, string(columns), b.Rows, b.CreditsEstimate, key, hash, ms(now))
		if err != nil {
			return err
		}
		if n == 0 { // another upload with this key committed meanwhile
			b, err := findBatchByKey(ctx, tx, nb)
			if err == nil && b == nil {
				err = fmt.Errorf("batch key %q: taken and not found", nb.IdempotencyKey)
			}
			out, replayed = b, err == nil
			return err
		}
		if err := insertBatchRows(ctx, tx, b.ID, nb.Rows, vals, hashes); err != nil {
			return err
		}
		b.Counts.Pending = int64(len(nb.Rows))
		b.Settle()
		out = b
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return out, replayed, nil
}

// batchRowsPerInsert is the most rows one INSERT of insertBatchRows writes: 4 x 256
// parameters are well within every engine's bound.
const batchRowsPerInsert = 256

// insertBatchRows writes a batch's rows, vals their values as the column keeps them
// and hashes the hashes of their subjects,
// in INSERTs of many rows: of batchRowsPerInsert, then of the powers of two that make
// up the rest, so that the statements are few and each engine keeps them prepared.
func insertBatchRows(ctx context.Context, tx Tx, batchID string, rows []NewBatchRow, vals []string, hashes [][]byte) error {
	for done := 0; done < len(rows); {
		n := batchRowsPerInsert
		for n > len(rows)-done {
			n /= 2
		}
		args := make([]any, 0, 5*n)
		for i := done; i < done+n; i++ {
			args = append(args, batchID, i+1, vals[i], string(rows[i].Request), hashes[i])
		}
		if _, err := tx.Exec(ctx, `INSERT INTO batch_rows (batch_id, row_number, vals, request, subject_hash) VALUES (?, ?, ?, ?, ?)`+
			strings.Repeat(", (?, ?, ?, ?, ?)", n-1), args...); err != nil {
			return err
		}
		done += n
	}
	return nil
}

// GetBatch returns one of the organization's batches with its counts; another
// organization's is not found.
func (db *DB) GetBatch(ctx context.Context, orgID, id string) (*Batch, error) {
	var b *Batch
	err := db.Read(ctx, func(q Executor) error {
		var err error
		b, err = scanBatch(q.QueryRow(ctx, `SELECT `+batchColumns+` FROM batches WHERE id = ? AND org_id = ?`, id, orgID))
		if errors.Is(err, ErrNoRows) {
			return BatchNotFound()
		}
		if err != nil {
			return err
		}
		return batchCounts(ctx, q, b)
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

const listBatchesQuery = `SELECT ` + batchColumns + ` FROM batches WHERE org_id = ?
	ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`

// ListBatches returns a page of the organization's batches, newest first, with their
// counts, and how many it has, from one snapshot.
func (db *DB) ListBatches(ctx context.Context, orgID string, page, pageSize int) ([]*Batch, int64, error) {
	page, size := BatchPage(page, pageSize)
	var batches []*Batch
	var total int64
	err := db.Read(ctx, func(q Executor) error {
		if err := q.QueryRow(ctx, `SELECT count(*) FROM batches WHERE org_id = ?`, orgID).Scan(&total); err != nil {
			return err
		}
		rows, err := q.Query(ctx, listBatchesQuery, orgID, size, page*size)
		if batches, err = collect(rows, err, scanBatch); err != nil {
			return err
		}
		for _, b := range batches {
			if err := batchCounts(ctx, q, b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	if batches == nil {
		batches = []*Batch{}
	}
	return batches, total, nil
}

// The feeder's reads, on batch_rows_pending: the next batch with a row still without
// a task, and its rows.
const (
	nextPendingBatchQuery = `SELECT batch_id FROM batch_rows WHERE task_id IS NULL AND error IS NULL AND batch_id > ?
		ORDER BY batch_id LIMIT 1`
	pendingRowsQuery = `SELECT row_number, request FROM batch_rows WHERE batch_id = ? AND task_id IS NULL AND error IS NULL
		ORDER BY row_number LIMIT ?`
)

// PendingBatchRows returns the rows still without a task, up to perBatch of each of
// up to batches batches, oldest batch first, each batch's in row order. Batch ids are
// UUIDv7, so their order is the order the batches were made in.
func (db *DB) PendingBatchRows(ctx context.Context, batches, perBatch int) ([]PendingBatchRow, error) {
	var out []PendingBatchRow
	err := db.Read(ctx, func(q Executor) error {
		out = nil
		after := ""
		for range batches {
			var id, orgID, objectType string
			err := q.QueryRow(ctx, nextPendingBatchQuery, after).Scan(&id)
			if errors.Is(err, ErrNoRows) {
				return nil
			}
			if err != nil {
				return err
			}
			after = id
			if err := q.QueryRow(ctx, `SELECT org_id, object_type FROM batches WHERE id = ?`, id).Scan(&orgID, &objectType); err != nil {
				return err
			}
			rows, err := q.Query(ctx, pendingRowsQuery, id, perBatch)
			pending, err := collect(rows, err, func(r Row) (PendingBatchRow, error) {
				p := PendingBatchRow{BatchID: id, OrgID: orgID, ObjectType: objectType}
				var req string
				err := r.Scan(&p.Row, &req)
				p.Request = json.RawMessage(req)
				return p, err
			})
			if err != nil {
				return err
			}
			out = append(out, pending...)
		}
		return nil
	})
	return out, err
}

// FailBatchRow records why a row gets no task; the row is no longer pending. A row
// that has its task already keeps it.
func (db *DB) FailBatchRow(ctx context.Context, batchID string, row int, e *enrich.TaskError) error {
	raw, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return db.Write(ctx, func(tx Tx) error {
		_, err := tx.Exec(ctx, `UPDATE batch_rows SET error = ? WHERE batch_id = ? AND row_number = ? AND task_id IS NULL`,
			string(raw), batchID, row)
		return err
	})
}

// linkBatchRow links the row a task was made for to the task, inside the task's
// transaction. The row comes after the task's other locks (PostgreSQL): nothing takes
// a batch row and then a task, an organization or a grant.
func linkBatchRow(ctx context.Context, tx Tx, ref *BatchRowRef, taskID string) error {
	_, err := tx.Exec(ctx, `UPDATE batch_rows SET task_id = ? WHERE batch_id = ? AND row_number = ? AND task_id IS NULL`,
		taskID, ref.BatchID, ref.Row)
	return err
}

const batchRowsQuery = `SELECT row_number, vals, task_id, error FROM batch_rows WHERE batch_id = ? AND row_number > ?
	ORDER BY row_number LIMIT ?`

// BatchResults returns up to limit rows after afterRow, in row order, with their tasks
// and results. Another organization's batch is not found.
func (db *DB) BatchResults(ctx context.Context, orgID, id string, afterRow, limit int) ([]BatchResult, error) {
	limit = min(max(limit, 1), 1000)
	var out []BatchResult
	err := db.Read(ctx, func(q Executor) error {
		var one int
		err := q.QueryRow(ctx, `SELECT 1 FROM batches WHERE id = ? AND org_id = ?`, id, orgID).Scan(&one)
		if errors.Is(err, ErrNoRows) {
			return BatchNotFound()
		}
		if err != nil {
			return err
		}
		var ids []string
		at := map[string]int{} // a task's row in out
		rows, err := q.Query(ctx, batchRowsQuery, id, afterRow, limit)
		n := 0
		out, err = collect(rows, err, func(row Row) (BatchResult, error) {
			var r BatchResult
			i := n
			n++
			var vals string
			var taskID, rowErr *string
			if err := row.Scan(&r.Row, &vals, &taskID, &rowErr); err != nil {
				return r, err
			}
			if err := json.Unmarshal([]byte(vals), &r.Values); err != nil {
				return r, fmt.Errorf("batch %s row %d: values: %w", id, r.Row, err)
			}
			if rowErr != nil {
				r.Error = &enrich.TaskError{}
				if err := json.Unmarshal([]byte(*rowErr), r.Error); err != nil {
					return r, fmt.Errorf("batch %s row %d: error: %w", id, r.Row, err)
				}
			}
			if taskID != nil {
				at[*taskID] = i
				ids = append(ids, *taskID)
				r.Purged = true // until its task is found
			}
			return r, nil
		})
		if err != nil || len(ids) == 0 {
			return err
		}
		in, args := inList(ids)
		rows, err = q.Query(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id IN `+in+``, args...)
		tasks, err := collect(rows, err, func(r Row) (*Task, error) { return scanTask(r) })
		for _, t := range tasks {
			i := at[t.ID]
			out[i].Task, out[i].Purged = t, false
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// BatchQueries are the batches' list, results, counts and feeder statements, by name,
// with arguments of the right types: each driver's tests check its engine's plan of
// them.
var BatchQueries = map[string]struct {
	Query string
	Args  []any
}{
	"ListBatches":      {listBatchesQuery, []any{"o", 25, 25}},
	"BatchResults":     {batchRowsQuery, []any{"b", 500, 500}},
	"batchCounts":      {batchCountsQuery, []any{"b"}},
	"nextPendingBatch": {nextPendingBatchQuery, []any{"a"}},
	"pendingRows":      {pendingRowsQuery, []any{"b", 200}},
}
