package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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

// ObjectMixed is the object type of a batch whose rows are of both kinds, or that
// looks up a person row's company too: its results have both kinds' columns.
const ObjectMixed = "mixed"

// MaxListedSkips is how many skipped rows a batch lists (the upload's answer and GET
// /v1/batches/{id}); counts.skipped counts them all.
const MaxListedSkips = 1000

// Batch is an uploaded list of inputs, each row enriched by a task of its own. Its
// JSON is the Batch of the API.
type Batch struct {
	ID string `json:"id"`
	// ObjectType is company, person, or mixed (ObjectMixed).
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
	// SkippedRows are the rows refused at the upload (?on_error=skip), the first
	// MaxListedSkips in row order: in the upload's answer and GetBatch, not in a list.
	SkippedRows []enrich.RowError `json:"skipped_rows,omitempty"`

	OrgID string `json:"-"`
}

// BatchCounts are a batch's lookups by status, a row's task each, and a person row's
// company task too when the batch asked for both: pending ones have no task yet; the
// others are their tasks' statuses. A lookup refused when its task was to be made
// (credits ran out meanwhile) counts as failed. Purged ones' tasks were deleted by
// retention. Skipped counts the rows refused at the upload, which have no lookup.
type BatchCounts struct {
	Pending   int64 `json:"pending"`
	Queued    int64 `json:"queued"`
	Running   int64 `json:"running"`
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
	Canceled  int64 `json:"canceled"`
	Purged    int64 `json:"purged,omitempty"`
	Skipped   int64 `json:"skipped,omitempty"`
}

// Add counts n rows of status (a task status, "pending", "purged" or "skipped").
func (c *BatchCounts) Add(status string, n int64) {
	switch status {
	case "pending":
		c.Pending += n
	case "skipped":
		c.Skipped += n
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

// NewBatch is a batch to create, every row already checked. ObjectType is company,
// person or ObjectMixed.
type NewBatch struct {
	OrgID, ObjectType, Name string
	Columns                 []string
	Rows                    []NewBatchRow
	CreditsEstimate         int64
	IdempotencyKey          string // "" when none was sent
	BodyHash                string // what the key is bound to
}

// NewBatchRow is one row: its values as uploaded, one per column, and the request its
// task is made from (the enrichment endpoint's fields). In a mixed batch Kind says
// what the row is (company or person), and a person row may have CompanyRequest, its
// company's. A row with Skipped (why it was refused) has no request and no task.
type NewBatchRow struct {
	Values         []string
	Request        json.RawMessage
	Kind           string
	CompanyRequest json.RawMessage
	Line           int // the line of the file the row starts on
	Skipped        string
	// Subject is whom the row's input names (enrich.InputSubject), as the row's task
	// will be about; SubjectOK false for a company's page or a skipped row.
	Subject   enrich.Subject
	SubjectOK bool
}

// PendingBatchRow is a row whose task is still to be made: the row's own, or its
// company's (Company).
type PendingBatchRow struct {
	BatchID, OrgID, ObjectType string
	Row                        int // from 1
	Request                    json.RawMessage
	Company                    bool
}

// BatchPart is one lookup of a batch row with its task as it is now: nil before the
// task is made, and after retention deleted it (Purged). Error is why it got no task.
type BatchPart struct {
	Task   *Task
	Error  *enrich.TaskError
	Purged bool
}

// BatchResult is one row of a batch: its own lookup, of Kind (company or person), and
// in a batch that asked for both a person row's company (Company). A Skipped row was
// refused at the upload: Error says why, and it has no lookup.
type BatchResult struct {
	Row    int
	Line   int // 0 for a row kept before lines were
	Values []string
	Kind   string
	BatchPart
	Skipped bool
	Company *BatchPart
}

// BatchRowRef names the batch row a task is made for: the task's creation links it,
// in the same transaction. Company: the task is the row's company's.
type BatchRowRef struct {
	BatchID string
	Row     int
	Company bool
}

// BatchFailure is a lookup of a batch that failed, or a row skipped at the upload:
// its row and line, what it looked up (Kind, "" for a skipped row), its task if it
// had one, and why.
type BatchFailure struct {
	Row, Line     int
	Kind          string
	Skipped       bool
	TaskID        string
	Code, Message string
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
	case nb.ObjectType != enrich.ObjectCompany && nb.ObjectType != enrich.ObjectPerson && nb.ObjectType != ObjectMixed:
		return fmt.Errorf("batch object type %q", nb.ObjectType)
	}
	for i, r := range nb.Rows {
		switch {
		case r.Skipped != "":
			if r.Request != nil || r.CompanyRequest != nil || r.Kind != "" {
				return fmt.Errorf("batch row %d: skipped, with a request", i+1)
			}
		case r.Request == nil:
			return fmt.Errorf("batch row %d: no request", i+1)
		case nb.ObjectType == ObjectMixed && r.Kind != enrich.ObjectCompany && r.Kind != enrich.ObjectPerson:
			return fmt.Errorf("batch row %d: kind %q in a mixed batch", i+1, r.Kind)
		case nb.ObjectType != ObjectMixed && (r.Kind != "" || r.CompanyRequest != nil):
			return fmt.Errorf("batch row %d: a kind or a company in a batch of %s", i+1, nb.ObjectType)
		case r.CompanyRequest != nil && r.Kind != enrich.ObjectPerson:
			return fmt.Errorf("batch row %d: a company beside a %s", i+1, r.Kind)
		}
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

// CompanyRowIdempotencyKey is the Idempotency-Key of the task of a person row's
// company, as RowIdempotencyKey is of the row's own.
func CompanyRowIdempotencyKey(batchID string, row int) string {
	return fmt.Sprintf("batch:%s:%d:company", batchID, row)
}

// Settled counts the lookups whose outcome is final (their tasks settled, or deleted
// by retention since, or refused), and the skipped rows.
func (b *Batch) Settled() int64 {
	return b.Counts.Succeeded + b.Counts.Failed + b.Counts.Canceled + b.Counts.Purged + b.Counts.Skipped
}

// Total counts the lookups and the skipped rows: what Settled comes to when the batch
// is done.
func (b *Batch) Total() int64 {
	return b.Settled() + b.Counts.Pending + b.Counts.Queued + b.Counts.Running
}

const batchColumns = `id, org_id, object_type, name, columns, row_count, credits_estimate, idempotency_key, created_at, mixed`

func scanBatch(row Row) (*Batch, error) {
	var b Batch
	var columns string
	var created int64
	var mixed int
	if err := row.Scan(&b.ID, &b.OrgID, &b.ObjectType, &b.Name, &columns, &b.Rows, &b.CreditsEstimate, &b.IdempotencyKey, &created, &mixed); err != nil {
		return nil, err
	}
	if mixed == 1 {
		b.ObjectType = ObjectMixed
	}
	if err := json.Unmarshal([]byte(columns), &b.Columns); err != nil {
		return nil, fmt.Errorf("batch %s: columns: %w", b.ID, err)
	}
	b.CreatedAt = fromMS(created)
	return &b, nil
}

// batchCountsQuery counts a batch's rows by status through their tasks, and sums what
// those tasks hold: a failed or canceled task was refunded. batchCompanyCountsQuery
// counts the person rows' companies so, in a mixed batch.
const (
	batchCountsQuery = `SELECT CASE WHEN r.task_id IS NULL THEN (CASE WHEN r.error IS NULL THEN 'pending' WHEN r.skipped = 1 THEN 'skipped' ELSE 'failed' END)
		ELSE coalesce(t.status, 'purged') END AS st, count(*),
		CAST(coalesce(sum(CASE WHEN t.status IN ('queued', 'running', 'succeeded') THEN t.credits_charged END), 0) AS BIGINT)
	FROM batch_rows r LEFT JOIN tasks t ON t.id = r.task_id WHERE r.batch_id = ? GROUP BY st`
	batchCompanyCountsQuery = `SELECT CASE WHEN r.company_task_id IS NULL THEN (CASE WHEN r.company_error IS NULL THEN 'pending' ELSE 'failed' END)
		ELSE coalesce(t.status, 'purged') END AS st, count(*),
		CAST(coalesce(sum(CASE WHEN t.status IN ('queued', 'running', 'succeeded') THEN t.credits_charged END), 0) AS BIGINT)
	FROM batch_rows r LEFT JOIN tasks t ON t.id = r.company_task_id WHERE r.batch_id = ? AND r.company_request IS NOT NULL GROUP BY st`
)

func batchCounts(ctx context.Context, q Executor, b *Batch) error {
	b.Counts, b.CreditsSpent = BatchCounts{}, 0
	queries := []string{batchCountsQuery}
	if b.ObjectType == ObjectMixed {
		queries = append(queries, batchCompanyCountsQuery)
	}
	for _, query := range queries {
		rows, err := q.Query(ctx, query, b.ID)
		_, err = collect(rows, err, func(r Row) (struct{}, error) {
			var st string
			var n, spent int64
			err := r.Scan(&st, &n, &spent)
			b.Counts.Add(st, n)
			b.CreditsSpent += spent
			return struct{}{}, err
		})
		if err != nil {
			return err
		}
	}
	b.Settle()
	return nil
}

const skippedRowsQuery = `SELECT row_number, coalesce(line, 0), error FROM batch_rows WHERE batch_id = ? AND skipped = 1
	ORDER BY row_number LIMIT ?`

// skippedRows lists the batch's skipped rows, the first MaxListedSkips.
func skippedRows(ctx context.Context, q Executor, b *Batch) error {
	b.SkippedRows = nil
	if b.Counts.Skipped == 0 {
		return nil
	}
	rows, err := q.Query(ctx, skippedRowsQuery, b.ID, MaxListedSkips)
	b.SkippedRows, err = collect(rows, err, func(r Row) (enrich.RowError, error) {
		var re enrich.RowError
		var raw string
		if err := r.Scan(&re.Row, &re.Line, &raw); err != nil {
			return re, err
		}
		var e enrich.TaskError
		if err := json.Unmarshal([]byte(raw), &e); err != nil {
			return re, fmt.Errorf("batch %s row %d: error: %w", b.ID, re.Row, err)
		}
		re.Message = e.Message
		return re, nil
	})
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
	if err := batchCounts(ctx, tx, b); err != nil {
		return nil, err
	}
	return b, skippedRows(ctx, tx, b)
}

// CreateBatch writes a batch and its rows in one transaction, charging nothing: the
// rows' tasks are made one by one after it. A batch whose Idempotency-Key the
// organization used before is that batch again, or refused when the upload differs.
// A balance below the batch's estimate refuses it, since its rows would fail for
// want of credits. Two uploads with one key at once (PostgreSQL): the second's INSERT
// waits for the first's transaction on the unique key, and then finds it.
func (db *DB) CreateBatch(ctx context.Context, by By, nb NewBatch) (*Batch, bool, error) {
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
	var lookups, skipped int64
	var skips []enrich.RowError
	for i, r := range nb.Rows {
		v, err := json.Marshal(r.Values)
		if err != nil {
			return nil, false, err
		}
		vals[i], hashes[i] = string(v), hashOf(h, r.Subject, r.SubjectOK)
		switch {
		case r.Skipped != "":
			skipped++
			if len(skips) < MaxListedSkips {
				skips = append(skips, enrich.RowError{Row: i + 1, Line: r.Line, Message: r.Skipped})
			}
		case r.CompanyRequest != nil:
			lookups += 2
		default:
			lookups++
		}
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
		objectType, mixed := nb.ObjectType, 0
		if objectType == ObjectMixed {
			objectType, mixed = enrich.ObjectPerson, 1
		}
		n, err := tx.Exec(ctx, `INSERT INTO batches (id, org_id, object_type, mixed, name, columns, row_count, credits_estimate,
			idempotency_key, body_hash, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (org_id, idempotency_key) DO NOTHING`,
			b.ID, b.OrgID, objectType, mixed, b.Name, string(columns), b.Rows, b.CreditsEstimate, key, hash, ms(now))
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
		b.Counts.Pending, b.Counts.Skipped, b.SkippedRows = lookups, skipped, skips
		b.Settle()
		out = b
		// The upload itself: each row's lookup is recorded as its task is made.
		return db.appendAudit(ctx, tx, by, NewAuditEntry{OrgID: b.OrgID, Action: AuditBatchCreated, BatchID: &b.ID,
			Credits: b.CreditsEstimate, Detail: map[string]any{"name": b.Name, "rows": b.Rows, "lookups": lookups, "skipped": skipped}})
	})
	if err != nil {
		return nil, false, err
	}
	return out, replayed, nil
}

// batchRowsPerInsert is the most rows one INSERT of insertBatchRows writes: 9 x 256
// parameters are well within every engine's bound.
const batchRowsPerInsert = 256

// insertBatchRows writes a batch's rows, vals their values as the column keeps them
// and hashes the hashes of their subjects,
// in INSERTs of many rows: of batchRowsPerInsert, then of the powers of two that make
// up the rest, so that the statements are few and each engine keeps them prepared. A
// batch of one kind without a skipped row, the most common, sets only the columns it
// has: nearly half the parameters to bind.
func insertBatchRows(ctx context.Context, tx Tx, batchID string, rows []NewBatchRow, vals []string, hashes [][]byte) error {
	wide := slices.ContainsFunc(rows, func(r NewBatchRow) bool { return r.Kind != "" || r.Skipped != "" || r.CompanyRequest != nil })
	columns, width := `batch_id, row_number, vals, request, line, subject_hash`, 6
	if wide {
		columns, width = `batch_id, row_number, vals, request, line, subject_hash, kind, skipped, error, company_request`, 10
	}
	row := "(" + strings.Repeat("?, ", width-1) + "?)"
	for done := 0; done < len(rows); {
		n := batchRowsPerInsert
		for n > len(rows)-done {
			n /= 2
		}
		args := make([]any, 0, width*n)
		for i := done; i < done+n; i++ {
			r := rows[i]
			var line any
			if r.Line > 0 {
				line = r.Line
			}
			if !wide {
				args = append(args, batchID, i+1, vals[i], string(r.Request), line, hashes[i])
				continue
			}
			var kind, rowErr, company any
			request, skipped := string(r.Request), 0
			if r.Kind != "" {
				kind = r.Kind
			}
			if r.CompanyRequest != nil {
				company = string(r.CompanyRequest)
			}
			if r.Skipped != "" {
				raw, err := json.Marshal(enrich.TaskError{Code: enrich.CodeInvalidInput, Message: r.Skipped})
				if err != nil {
					return err
				}
				request, skipped, rowErr = "", 1, string(raw)
			}
			args = append(args, batchID, i+1, vals[i], request, line, hashes[i], kind, skipped, rowErr, company)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO batch_rows (`+columns+`) VALUES `+row+strings.Repeat(", "+row, n-1), args...); err != nil {
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
		if err := batchCounts(ctx, q, b); err != nil {
			return err
		}
		return skippedRows(ctx, q, b)
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
// a task, and its rows; on batch_rows_company_pending, the same of person rows'
// companies.
const (
	nextPendingBatchQuery = `SELECT batch_id FROM batch_rows WHERE task_id IS NULL AND error IS NULL AND batch_id > ?
		ORDER BY batch_id LIMIT 1`
	pendingRowsQuery = `SELECT row_number, request, kind FROM batch_rows WHERE batch_id = ? AND task_id IS NULL AND error IS NULL
		ORDER BY row_number LIMIT ?`
	nextPendingCompanyQuery = `SELECT batch_id FROM batch_rows
		WHERE company_request IS NOT NULL AND company_task_id IS NULL AND company_error IS NULL AND batch_id > ?
		ORDER BY batch_id LIMIT 1`
	pendingCompaniesQuery = `SELECT row_number, company_request FROM batch_rows
		WHERE batch_id = ? AND company_request IS NOT NULL AND company_task_id IS NULL AND company_error IS NULL
		ORDER BY row_number LIMIT ?`
)

// PendingBatchRows returns the lookups still without a task, up to perBatch of each
// of up to batches batches, oldest batch first, each batch's in row order (a row's
// own before its company's). Batch ids are UUIDv7, so their order is the order the
// batches were made in.
func (db *DB) PendingBatchRows(ctx context.Context, batches, perBatch int) ([]PendingBatchRow, error) {
	var out []PendingBatchRow
	err := db.Read(ctx, func(q Executor) error {
		out = nil
		after, afterCompany := "", ""
		next := func(query, after string) (string, error) {
			var id string
			err := q.QueryRow(ctx, query, after).Scan(&id)
			if errors.Is(err, ErrNoRows) {
				return "", nil
			}
			return id, err
		}
		var rowsNext, companyNext string
		var err error
		for range batches {
			// The next batch is the lower of the next with a row pending and the next
			// with a company pending; each is read again only once passed.
			if rowsNext <= after {
				if rowsNext, err = next(nextPendingBatchQuery, after); err != nil {
					return err
				}
			}
			if companyNext <= afterCompany {
				if companyNext, err = next(nextPendingCompanyQuery, afterCompany); err != nil {
					return err
				}
			}
			id := rowsNext
			if id == "" || companyNext != "" && companyNext < id {
				id = companyNext
			}
			if id == "" {
				return nil
			}
			after, afterCompany = id, id
			var orgID, objectType string
			var mixed int
			if err := q.QueryRow(ctx, `SELECT org_id, object_type, mixed FROM batches WHERE id = ?`, id).Scan(&orgID, &objectType, &mixed); err != nil {
				return err
			}
			rows, err := q.Query(ctx, pendingRowsQuery, id, perBatch)
			pending, err := collect(rows, err, func(r Row) (PendingBatchRow, error) {
				p := PendingBatchRow{BatchID: id, OrgID: orgID, ObjectType: objectType}
				var req string
				var kind *string
				err := r.Scan(&p.Row, &req, &kind)
				p.Request = json.RawMessage(req)
				if kind != nil {
					p.ObjectType = *kind
				}
				return p, err
			})
			if err != nil {
				return err
			}
			if mixed == 1 {
				rows, err := q.Query(ctx, pendingCompaniesQuery, id, perBatch)
				companies, err := collect(rows, err, func(r Row) (PendingBatchRow, error) {
					p := PendingBatchRow{BatchID: id, OrgID: orgID, ObjectType: enrich.ObjectCompany, Company: true}
					var req string
					err := r.Scan(&p.Row, &req)
					p.Request = json.RawMessage(req)
					return p, err
				})
				if err != nil {
					return err
				}
				pending = mergePending(pending, companies, perBatch)
			}
			out = append(out, pending...)
		}
		return nil
	})
	return out, err
}

// mergePending is a batch's pending rows and companies in row order, a row's own
// first, at most n of them.
func mergePending(rows, companies []PendingBatchRow, n int) []PendingBatchRow {
	out := make([]PendingBatchRow, 0, min(n, len(rows)+len(companies)))
	for len(out) < n && (len(rows) > 0 || len(companies) > 0) {
		if len(companies) == 0 || len(rows) > 0 && rows[0].Row <= companies[0].Row {
			out, rows = append(out, rows[0]), rows[1:]
		} else {
			out, companies = append(out, companies[0]), companies[1:]
		}
	}
	return out
}

// FailBatchRow records why a row gets no task; the row is no longer pending. A row
// that has its task already keeps it.
func (db *DB) FailBatchRow(ctx context.Context, batchID string, row int, e *enrich.TaskError) error {
	return db.failBatchPart(ctx, BatchRowRef{BatchID: batchID, Row: row}, e)
}

// FailBatchCompany records why a person row's company gets no task, as FailBatchRow
// does for the row's own.
func (db *DB) FailBatchCompany(ctx context.Context, batchID string, row int, e *enrich.TaskError) error {
	return db.failBatchPart(ctx, BatchRowRef{BatchID: batchID, Row: row, Company: true}, e)
}

func (db *DB) failBatchPart(ctx context.Context, ref BatchRowRef, e *enrich.TaskError) error {
	raw, err := json.Marshal(e)
	if err != nil {
		return err
	}
	query := `UPDATE batch_rows SET error = ? WHERE batch_id = ? AND row_number = ? AND task_id IS NULL`
	if ref.Company {
		query = `UPDATE batch_rows SET company_error = ? WHERE batch_id = ? AND row_number = ? AND company_task_id IS NULL
			AND company_request IS NOT NULL`
	}
	return db.Write(ctx, func(tx Tx) error {
		_, err := tx.Exec(ctx, query, string(raw), ref.BatchID, ref.Row)
		return err
	})
}

// linkBatchRow links the row a task was made for to the task, inside the task's
// transaction. The row comes after the task's other locks (PostgreSQL): nothing takes
// a batch row and then a task, an organization or a grant.
func linkBatchRow(ctx context.Context, tx Tx, ref *BatchRowRef, taskID string) error {
	query := `UPDATE batch_rows SET task_id = ? WHERE batch_id = ? AND row_number = ? AND task_id IS NULL`
	if ref.Company {
		query = `UPDATE batch_rows SET company_task_id = ? WHERE batch_id = ? AND row_number = ? AND company_task_id IS NULL
			AND company_request IS NOT NULL`
	}
	return tx.ExecLater(ctx, query, taskID, ref.BatchID, ref.Row)
}

const batchRowsQuery = `SELECT r.row_number, r.vals, r.task_id, r.error, coalesce(r.kind, b.object_type), coalesce(r.line, 0), r.skipped,
		CASE WHEN r.company_request IS NULL THEN 0 ELSE 1 END, r.company_task_id, r.company_error
	FROM batch_rows r JOIN batches b ON b.id = r.batch_id WHERE r.batch_id = ? AND r.row_number > ?
	ORDER BY r.row_number LIMIT ?`

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
		type partAt struct {
			row     int // in out
			company bool
		}
		var ids []string
		at := map[string]partAt{}
		rows, err := q.Query(ctx, batchRowsQuery, id, afterRow, limit)
		n := 0
		out, err = collect(rows, err, func(row Row) (BatchResult, error) {
			var r BatchResult
			i := n
			n++
			var vals string
			var taskID, rowErr, companyTaskID, companyErr *string
			var skipped, hasCompany int
			if err := row.Scan(&r.Row, &vals, &taskID, &rowErr, &r.Kind, &r.Line, &skipped, &hasCompany, &companyTaskID, &companyErr); err != nil {
				return r, err
			}
			if err := json.Unmarshal([]byte(vals), &r.Values); err != nil {
				return r, fmt.Errorf("batch %s row %d: values: %w", id, r.Row, err)
			}
			if r.Skipped = skipped == 1; r.Skipped {
				r.Kind = ""
			}
			if hasCompany == 1 {
				r.Company = &BatchPart{}
			}
			for _, p := range []struct {
				part          *BatchPart
				taskID, error *string
				company       bool
			}{{&r.BatchPart, taskID, rowErr, false}, {r.Company, companyTaskID, companyErr, true}} {
				if p.part == nil {
					continue
				}
				if p.error != nil {
					p.part.Error = &enrich.TaskError{}
					if err := json.Unmarshal([]byte(*p.error), p.part.Error); err != nil {
						return r, fmt.Errorf("batch %s row %d: error: %w", id, r.Row, err)
					}
				}
				if p.taskID != nil {
					at[*p.taskID] = partAt{i, p.company}
					ids = append(ids, *p.taskID)
					p.part.Purged = true // until its task is found
				}
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
			a := at[t.ID]
			part := &out[a.row].BatchPart
			if a.company {
				part = out[a.row].Company
			}
			part.Task, part.Purged = t, false
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

const batchFailuresQuery = `SELECT r.row_number, coalesce(r.line, 0), coalesce(r.kind, b.object_type), r.skipped,
		r.task_id, CASE WHEN r.task_id IS NULL THEN r.error WHEN t.status = 'failed' THEN t.error END,
		r.company_task_id, CASE WHEN r.company_task_id IS NULL THEN r.company_error WHEN c.status = 'failed' THEN c.error END
	FROM batch_rows r JOIN batches b ON b.id = r.batch_id
		LEFT JOIN tasks t ON t.id = r.task_id LEFT JOIN tasks c ON c.id = r.company_task_id
	WHERE r.batch_id = ? AND (r.error IS NOT NULL OR t.status = 'failed' OR r.company_error IS NOT NULL OR c.status = 'failed')
	ORDER BY r.row_number LIMIT ?`

// BatchFailures lists up to limit of the batch's failed lookups and skipped rows, in
// row order (a row's own before its company's): what went wrong with each. Another
// organization's batch is not found.
func (db *DB) BatchFailures(ctx context.Context, orgID, id string, limit int) ([]BatchFailure, error) {
	limit = min(max(limit, 1), 1000)
	var out []BatchFailure
	err := db.Read(ctx, func(q Executor) error {
		var one int
		err := q.QueryRow(ctx, `SELECT 1 FROM batches WHERE id = ? AND org_id = ?`, id, orgID).Scan(&one)
		if errors.Is(err, ErrNoRows) {
			return BatchNotFound()
		}
		if err != nil {
			return err
		}
		out = nil
		rows, err := q.Query(ctx, batchFailuresQuery, id, limit)
		_, err = collect(rows, err, func(row Row) (struct{}, error) {
			var f BatchFailure
			var skipped int
			var taskID, rowErr, companyTaskID, companyErr *string
			if err := row.Scan(&f.Row, &f.Line, &f.Kind, &skipped, &taskID, &rowErr, &companyTaskID, &companyErr); err != nil {
				return struct{}{}, err
			}
			if f.Skipped = skipped == 1; f.Skipped {
				f.Kind = ""
			}
			for _, p := range []struct {
				kind          string
				taskID, error *string
			}{{f.Kind, taskID, rowErr}, {enrich.ObjectCompany, companyTaskID, companyErr}} {
				if p.error == nil || len(out) >= limit {
					continue
				}
				var e enrich.TaskError
				if err := json.Unmarshal([]byte(*p.error), &e); err != nil {
					return struct{}{}, fmt.Errorf("batch %s row %d: error: %w", id, f.Row, err)
				}
				g := f
				g.Kind, g.Code, g.Message = p.kind, e.Code, e.Message
				if p.taskID != nil {
					g.TaskID = *p.taskID
				}
				out = append(out, g)
			}
			return struct{}{}, nil
		})
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
	"ListBatches":        {listBatchesQuery, []any{"o", 25, 25}},
	"BatchResults":       {batchRowsQuery, []any{"b", 500, 500}},
	"BatchFailures":      {batchFailuresQuery, []any{"b", 100}},
	"batchCounts":        {batchCountsQuery, []any{"b"}},
	"batchCompanyCounts": {batchCompanyCountsQuery, []any{"b"}},
	"skippedRows":        {skippedRowsQuery, []any{"b", 1000}},
	"nextPendingBatch":   {nextPendingBatchQuery, []any{"a"}},
	"pendingRows":        {pendingRowsQuery, []any{"b", 200}},
	"nextPendingCompany": {nextPendingCompanyQuery, []any{"a"}},
	"pendingCompanies":   {pendingCompaniesQuery, []any{"b", 200}},
}
