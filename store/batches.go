package store

import (
	"encoding/json"
	"fmt"
	"time"

	"enrichd/enrich"
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
