package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"enrichd/enrich"

	"github.com/google/uuid"
)

// What `enrichd bench` needs of the store beside the service's own operations: rows
// made in bulk, and the ceiling, the least work the database must do for the API's hot
// paths, measured beside the real service.

// CeilingWrite does, in one transaction of its own (Driver.WriteAlone: not committed
// with others), the minimal raw work of creating a charged task with an idempotency
// key: a task row, a ledger row and an idempotency row. It returns the task's id.
// grantID must be a grant of the organization.
func (db *DB) CeilingWrite(ctx context.Context, orgID string, grantID int64) (string, error) {
	id := uuid.Must(uuid.NewV7()).String()
	err := db.WriteAlone(context.WithoutCancel(ctx), func(tx Tx) error {
		now := ms(db.now())
		// A task is written with the hash of whom it is about, as every task is.
		if _, err := tx.Exec(ctx, `INSERT INTO tasks (id, org_id, object_type, status, lookup, input, target,
			credits_charged, created_at, queued_at, expires_at, subject_hash) VALUES (?, ?, 'company', 'queued', 'domain', '{}', ?, 1, ?, ?, ?, ?)`,
			id, orgID, id+".example", now, now, now+600_000, db.seedHash(id+".example")); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO credit_ledger (org_id, kind, amount, grant_id, task_id, created_at)
			VALUES (?, 'charge', 1, ?, ?, ?)`, orgID, grantID, id, now); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO idempotency_keys (org_id, key, body_hash, task_id, created_at)
			VALUES (?, ?, '', ?, ?)`, orgID, id, id, now)
		return err
	})
	return id, err
}

// CeilingRead reads one task row by id, outside a transaction.
func (db *DB) CeilingRead(ctx context.Context, id string) error {
	var status string
	return db.Reader().QueryRow(ctx, `SELECT status FROM tasks WHERE id = ?`, id).Scan(&status)
}

// SeedTasks fills the organization's task list with n settled tasks, created one
// millisecond apart before now: how `enrichd bench` shows that reads stay as fast on a
// large database as on an empty one.
func (db *DB) SeedTasks(ctx context.Context, orgID string, n int) error {
	start := db.now().Add(-time.Duration(n) * time.Millisecond)
	return db.seed(ctx, n, func(tx Tx, from, to int) error {
		result, err := keepResult(ctx, tx, []byte(`{"name":"Seeded","enrichment_status":"enriched"}`), noSubject, false)
		if err != nil {
			return err
		}
		args := make([]any, 0, (to-from)*10)
		for i := from; i < to; i++ {
			at, domain := ms(start.Add(time.Duration(i)*time.Millisecond)), fmt.Sprintf("seed-%d.com", i)
			args = append(args, uuid.Must(uuid.NewV7()).String(), orgID, domain, at, at, at, at, at+600_000, result, db.seedHash(domain))
		}
		return insertRows(ctx, tx, `INSERT INTO tasks (id, org_id, object_type, status, lookup, input, target,
			credits_charged, created_at, queued_at, started_at, finished_at, expires_at, result_id, subject_hash)`,
			`(?, ?, 'company', 'succeeded', 'domain', '{}', ?, 1, ?, ?, ?, ?, ?, ?, ?)`, 10, args)
	})
}

// SeedQueuedTasks queues n tasks for the organization, created one millisecond apart
// before now and expiring a day later, and gives the organization its turn in the
// queue as an enqueue does: the backlog a bulk upload leaves, for measuring whether a
// claim costs the same behind it as behind a short one. The tasks are not charged.
func (db *DB) SeedQueuedTasks(ctx context.Context, orgID string, n int) error {
	now := db.now()
	start := now.Add(-time.Duration(n) * time.Millisecond)
	return db.seed(ctx, n, func(tx Tx, from, to int) error {
		if err := tx.LockOrgs(ctx, orgID); err != nil {
			return err
		}
		if err := db.joinQueue(ctx, tx, orgID); err != nil {
			return err
		}
		args := make([]any, 0, (to-from)*8)
		for i := from; i < to; i++ {
			at, domain := ms(start.Add(time.Duration(i)*time.Millisecond)), fmt.Sprintf("queued-%d.com", i)
			args = append(args, uuid.Must(uuid.NewV7()).String(), orgID, `{"domain":"`+domain+`"}`, domain, at, at, ms(now.Add(24*time.Hour)),
				db.seedHash(domain))
		}
		if err := insertRows(ctx, tx, `INSERT INTO tasks (id, org_id, object_type, status, lookup, input, target,
			credits_charged, created_at, queued_at, expires_at, subject_hash)`, `(?, ?, 'company', 'queued', 'domain', ?, ?, 1, ?, ?, ?, ?)`, 8, args); err != nil {
			return err
		}
		return tx.NotifyQueued(ctx)
	})
}

// SeedLedger fills the organization's ledger with n charges of one credit taken from
// grantID, spread evenly over span before now, one in ten refunded a second later,
// each naming a task of its own: the ledger a busy month leaves, for measuring the
// pages that read it. The grant gives up what was charged and not refunded, so grants
// and ledger still agree.
func (db *DB) SeedLedger(ctx context.Context, orgID string, grantID int64, n int, span time.Duration) error {
	now := db.now()
	step := span / time.Duration(max(n, 1))
	return db.seed(ctx, n, func(tx Tx, from, to int) error {
		spent := int64(0)
		args := make([]any, 0, (to-from)*6)
		for i := from; i < to; i++ {
			at := now.Add(-span + time.Duration(i)*step)
			taskID := uuid.Must(uuid.NewV7()).String()
			args = append(args, orgID, LedgerCharge, grantID, taskID, ms(at))
			spent++
			if i%10 == 9 {
				args = append(args, orgID, LedgerRefund, grantID, taskID, ms(at.Add(time.Second)))
				spent--
			}
		}
		if err := insertRows(ctx, tx, `INSERT INTO credit_ledger (org_id, kind, amount, grant_id, task_id, created_at)`,
			`(?, ?, 1, ?, ?, ?)`, 5, args); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE credit_grants SET remaining = remaining - ? WHERE id = ? AND org_id = ?`, spent, grantID, orgID)
		return err
	})
}

// SeedDeliveries gives the organization's Loop n delivered task.succeeded events,
// created one millisecond apart before now, each acknowledged on its first attempt:
// the history of a Loop that many tasks ran through, for measuring the pages that
// list it.
func (db *DB) SeedDeliveries(ctx context.Context, orgID, loopID string, n int) error {
	start := db.now().Add(-time.Duration(n) * time.Millisecond)
	return db.seed(ctx, n, func(tx Tx, from, to int) error {
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM loops WHERE id = ? AND org_id = ?`, loopID, orgID).Scan(&one)
		if errors.Is(err, ErrNoRows) {
			return LoopNotFound()
		} else if err != nil {
			return err
		}
		args := make([]any, 0, (to-from)*8)
		for i := from; i < to; i++ {
			at, domain := ms(start.Add(time.Duration(i)*time.Millisecond)), fmt.Sprintf("seed-%d.com", i)
			id, taskID := uuid.Must(uuid.NewV7()).String(), uuid.Must(uuid.NewV7()).String()
			payload := fmt.Sprintf(`{"event":"task.succeeded","task":{"id":%q,"object_type":"company","status":"succeeded"},`+
				`"data":{"name":"Seeded","domain":%q,"enrichment_status":"enriched"},"error":null}`, taskID, domain)
			args = append(args, id, loopID, orgID, taskID, payload, at, at, db.seedHash(domain))
		}
		return insertRows(ctx, tx, `INSERT INTO deliveries (id, loop_id, org_id, event, task_id, payload, status,
			attempts, last_attempt_at, last_status_code, created_at, subject_hash)`,
			`(?, ?, ?, 'task.succeeded', ?, ?, 'succeeded', 1, ?, 204, ?, ?)`, 8, args)
	})
}

// seedHash is the hash of a seeded company's domain, as its rows carry it; a
// database opened without the subject key seeds them as naming no subject.
func (db *DB) seedHash(domain string) []byte {
	if db.subjects == nil {
		return noSubject
	}
	return hashOf(db.subjects, enrich.Subject{Kind: enrich.SubjectDomain, Value: domain}, true)
}

// A seed writes seedBatch rows a transaction, seedStatement rows a statement: few round
// trips to PostgreSQL, and few parameters a statement for either engine's limit.
const (
	seedBatch     = 5000
	seedStatement = 500
)

// seed runs fill for the rows from to to of n, seedBatch at a time, each batch in a
// write transaction.
func (db *DB) seed(ctx context.Context, n int, fill func(tx Tx, from, to int) error) error {
	for from := 0; from < n; from += seedBatch {
		if err := db.Write(ctx, func(tx Tx) error { return fill(tx, from, min(from+seedBatch, n)) }); err != nil {
			return err
		}
	}
	return nil
}

// insertRows runs head (an INSERT up to its VALUES) for rows of the shape row, whose
// perRow placeholders take args in turn, seedStatement rows a statement.
func insertRows(ctx context.Context, tx Tx, head, row string, perRow int, args []any) error {
	for len(args) > 0 {
		k := min(len(args)/perRow, seedStatement)
		if _, err := tx.Exec(ctx, head+" VALUES "+strings.Repeat(row+", ", k-1)+row, args[:k*perRow]...); err != nil {
			return err
		}
		args = args[k*perRow:]
	}
	return nil
}
