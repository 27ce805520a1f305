package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

const batchColumns = `id, org_id, object_type, name, columns, row_count, credits_estimate, idempotency_key, created_at`

func scanBatch(row pgx.Row) (*store.Batch, error) {
	var b store.Batch
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
		coalesce(sum(CASE WHEN t.status IN ('queued', 'running', 'succeeded') THEN t.credits_charged END), 0)::bigint
	FROM batch_rows r LEFT JOIN tasks t ON t.id = r.task_id WHERE r.batch_id = $1 GROUP BY st`

func batchCounts(ctx context.Context, q querier, b *store.Batch) error {
	rows, err := q.Query(ctx, batchCountsQuery, b.ID)
	if err != nil {
		return err
	}
	defer rows.Close()
	b.Counts, b.CreditsSpent = store.BatchCounts{}, 0
	for rows.Next() {
		var st string
		var n, spent int64
		if err := rows.Scan(&st, &n, &spent); err != nil {
			return err
		}
		b.Counts.Add(st, n)
		b.CreditsSpent += spent
	}
	b.Settle()
	return rows.Err()
}

// findBatchByKey is the organization's batch made with key, nil when there is none,
// or the refusal of a key first sent with another upload.
func findBatchByKey(ctx context.Context, tx pgx.Tx, nb store.NewBatch) (*store.Batch, error) {
	var id string
	var hash []byte
	err := tx.QueryRow(ctx, `SELECT id, body_hash FROM batches WHERE org_id = $1 AND idempotency_key = $2`,
		nb.OrgID, nb.IdempotencyKey).Scan(&id, &hash)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, err
	case !bytes.Equal(hash, store.BodyHash(nb.BodyHash)):
		return nil, store.BatchKeyReused()
	}
	b, err := scanBatch(tx.QueryRow(ctx, `SELECT `+batchColumns+` FROM batches WHERE id = $1`, id))
	if err != nil {
		return nil, err
	}
	return b, batchCounts(ctx, tx, b)
}

// CreateBatch writes a batch and its rows in one transaction, charging nothing, as
// the SQLite driver does. Two uploads with one Idempotency-Key at once: the second's
// INSERT waits for the first's transaction on the unique key, and then finds it.
func (db *DB) CreateBatch(ctx context.Context, nb store.NewBatch) (*store.Batch, bool, error) {
	if err := store.CheckNewBatch(nb); err != nil {
		return nil, false, err
	}
	columns, err := json.Marshal(nb.Columns)
	if err != nil {
		return nil, false, err
	}
	rowNumbers := make([]int32, len(nb.Rows))
	vals := make([]string, len(nb.Rows))
	requests := make([]string, len(nb.Rows))
	for i, r := range nb.Rows {
		v, err := json.Marshal(r.Values)
		if err != nil {
			return nil, false, err
		}
		rowNumbers[i], vals[i], requests[i] = int32(i+1), string(v), string(r.Request)
	}
	var out *store.Batch
	var replayed bool
	err = db.inTx(ctx, func(tx pgx.Tx) error {
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
		b := &store.Batch{ID: uuid.Must(uuid.NewV7()).String(), OrgID: nb.OrgID, ObjectType: nb.ObjectType, Name: nb.Name,
			Columns: nb.Columns, Rows: len(nb.Rows), CreditsEstimate: nb.CreditsEstimate, CreatedAt: now}
		var key *string
		var hash []byte
		if nb.IdempotencyKey != "" {
			b.IdempotencyKey, key, hash = &nb.IdempotencyKey, &nb.IdempotencyKey, store.BodyHash(nb.BodyHash)
		}
		tag, err := tx.Exec(ctx, `INSERT INTO batches (id, org_id, object_type, name, columns, row_count, credits_estimate,
			idempotency_key, body_hash, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
			ON CONFLICT (org_id, idempotency_key) DO NOTHING`,
			b.ID, b.OrgID, b.ObjectType, b.Name, string(columns), b.Rows, b.CreditsEstimate, key, hash, ms(now))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 { // another upload with this key committed meanwhile
			b, err := findBatchByKey(ctx, tx, nb)
			if err == nil && b == nil {
				err = fmt.Errorf("batch key %q: taken and not found", nb.IdempotencyKey)
			}
			out, replayed = b, err == nil
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO batch_rows (batch_id, row_number, vals, request)
			SELECT $1, r, v, q FROM unnest($2::int[], $3::text[], $4::text[]) AS u(r, v, q)`,
			b.ID, rowNumbers, vals, requests); err != nil {
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

// GetBatch returns one of the organization's batches with its counts; another
// organization's is not found.
func (db *DB) GetBatch(ctx context.Context, orgID, id string) (*store.Batch, error) {
	var b *store.Batch
	err := db.readTx(ctx, func(tx pgx.Tx) error {
		var err error
		b, err = scanBatch(tx.QueryRow(ctx, `SELECT `+batchColumns+` FROM batches WHERE id = $1 AND org_id = $2`, id, orgID))
		if errors.Is(err, pgx.ErrNoRows) {
			return store.BatchNotFound()
		}
		if err != nil {
			return err
		}
		return batchCounts(ctx, tx, b)
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

const listBatchesQuery = `SELECT ` + batchColumns + ` FROM batches WHERE org_id = $1
	ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3`

// ListBatches returns a page of the organization's batches, newest first, with their
// counts, and how many it has, from one snapshot.
func (db *DB) ListBatches(ctx context.Context, orgID string, page, pageSize int) ([]*store.Batch, int64, error) {
	page, size := store.BatchPage(page, pageSize)
	var batches []*store.Batch
	var total int64
	err := db.readTx(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM batches WHERE org_id = $1`, orgID).Scan(&total); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, listBatchesQuery, orgID, size, page*size)
		if err != nil {
			return err
		}
		batches, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.Batch, error) { return scanBatch(r) })
		if err != nil {
			return err
		}
		for _, b := range batches {
			if err := batchCounts(ctx, tx, b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	if batches == nil {
		batches = []*store.Batch{}
	}
	return batches, total, nil
}

const (
	nextPendingBatchQuery = `SELECT batch_id FROM batch_rows WHERE task_id IS NULL AND error IS NULL AND batch_id > $1
		ORDER BY batch_id LIMIT 1`
	pendingRowsQuery = `SELECT row_number, request FROM batch_rows WHERE batch_id = $1 AND task_id IS NULL AND error IS NULL
		ORDER BY row_number LIMIT $2`
)

// PendingBatchRows: see store.Driver. Batch ids are UUIDv7, so their order is the
// order the batches were made in.
func (db *DB) PendingBatchRows(ctx context.Context, batches, perBatch int) ([]store.PendingBatchRow, error) {
	var out []store.PendingBatchRow
	err := db.readTx(ctx, func(tx pgx.Tx) error {
		out = nil
		after := ""
		for range batches {
			var id string
			err := tx.QueryRow(ctx, nextPendingBatchQuery, after).Scan(&id)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			if err != nil {
				return err
			}
			after = id
			var orgID, objectType string
			if err := tx.QueryRow(ctx, `SELECT org_id, object_type FROM batches WHERE id = $1`, id).Scan(&orgID, &objectType); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, pendingRowsQuery, id, perBatch)
			if err != nil {
				return err
			}
			for rows.Next() {
				p := store.PendingBatchRow{BatchID: id, OrgID: orgID, ObjectType: objectType}
				var req string
				if err := rows.Scan(&p.Row, &req); err != nil {
					rows.Close()
					return err
				}
				p.Request = json.RawMessage(req)
				out = append(out, p)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// FailBatchRow: see store.Driver. A row that has its task already keeps it.
func (db *DB) FailBatchRow(ctx context.Context, batchID string, row int, e *enrich.TaskError) error {
	raw, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return db.inTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE batch_rows SET error = $1 WHERE batch_id = $2 AND row_number = $3 AND task_id IS NULL`,
			string(raw), batchID, row)
		return err
	})
}

// linkBatchRow links the row a task was made for to the task, inside the task's
// transaction. The row comes after the task's other locks: nothing takes a batch row
// and then a task, an organization or a grant.
func linkBatchRow(ctx context.Context, tx pgx.Tx, ref *store.BatchRowRef, taskID string) error {
	_, err := tx.Exec(ctx, `UPDATE batch_rows SET task_id = $1 WHERE batch_id = $2 AND row_number = $3 AND task_id IS NULL`,
		taskID, ref.BatchID, ref.Row)
	return err
}

const batchRowsQuery = `SELECT row_number, vals, task_id, error FROM batch_rows WHERE batch_id = $1 AND row_number > $2
	ORDER BY row_number LIMIT $3`

// BatchResults: see store.Driver. Another organization's batch is not found.
func (db *DB) BatchResults(ctx context.Context, orgID, id string, afterRow, limit int) ([]store.BatchResult, error) {
	limit = min(max(limit, 1), 1000)
	var out []store.BatchResult
	err := db.readTx(ctx, func(tx pgx.Tx) error {
		out = nil
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM batches WHERE id = $1 AND org_id = $2`, id, orgID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.BatchNotFound()
		}
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, batchRowsQuery, id, afterRow, limit)
		if err != nil {
			return err
		}
		var ids []string
		at := map[string]int{}
		for rows.Next() {
			var r store.BatchResult
			var vals string
			var taskID, rowErr *string
			if err := rows.Scan(&r.Row, &vals, &taskID, &rowErr); err != nil {
				rows.Close()
				return err
			}
			if err := json.Unmarshal([]byte(vals), &r.Values); err != nil {
				rows.Close()
				return fmt.Errorf("batch %s row %d: values: %w", id, r.Row, err)
			}
			if rowErr != nil {
				r.Error = &enrich.TaskError{}
				if err := json.Unmarshal([]byte(*rowErr), r.Error); err != nil {
					rows.Close()
					return fmt.Errorf("batch %s row %d: error: %w", id, r.Row, err)
				}
			}
			if taskID != nil {
				ids = append(ids, *taskID)
				at[*taskID] = len(out)
				r.Purged = true // until its task is found
			}
			out = append(out, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		trows, err := tx.Query(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id = ANY($1)`, ids)
		if err != nil {
			return err
		}
		defer trows.Close()
		for trows.Next() {
			t, err := scanTask(trows)
			if err != nil {
				return err
			}
			i := at[t.ID]
			out[i].Task, out[i].Purged = t, false
		}
		return trows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
