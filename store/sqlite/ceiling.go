package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// CeilingWrite does, in one write transaction, the minimal raw work of creating a
// charged task with an idempotency key: a task row, a ledger row and an idempotency
// row. It returns the task's id. grantID must be a grant of the organization.
func (db *DB) CeilingWrite(ctx context.Context, orgID string, grantID int64) (string, error) {
	id := uuid.Must(uuid.NewV7()).String()
	// Straight to a transaction of its own: the ceiling is one transaction per task,
	// without the group commit the service's writes get.
	err := db.runTx(context.WithoutCancel(ctx), func(tx *Tx) error {
		now := ms(db.now())
		if _, err := tx.ExecContext(ctx, `INSERT INTO tasks (id, org_id, object_type, status, lookup, input, target,
			credits_charged, created_at, queued_at, expires_at) VALUES (?, ?, 'company', 'queued', 'domain', '{}', ?, 1, ?, ?, ?)`,
			id, orgID, id+".example", now, now, now+600_000); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO credit_ledger (org_id, kind, amount, grant_id, task_id, created_at)
			VALUES (?, 'charge', 1, ?, ?, ?)`, orgID, grantID, id, now); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO idempotency_keys (org_id, key, body_hash, task_id, created_at)
			VALUES (?, ?, '', ?, ?)`, orgID, id, id, now)
		return err
	})
	// Prepared from the second on, as the writer prepares the service's statements.
	db.writes.preparePending(ctx)
	return id, err
}

// CeilingRead reads one task row by id through the reader pool.
func (db *DB) CeilingRead(ctx context.Context, id string) error {
	var status string
	return db.read.QueryRowContext(ctx, `SELECT status FROM tasks WHERE id = ?`, id).Scan(&status)
}

// SeedTasks fills the organization's task list with n settled tasks, created one
// millisecond apart before now, in transactions of a few thousand rows: how `enrichd
// bench` shows that reads stay as fast on a large database as on an empty one.
func (db *DB) SeedTasks(ctx context.Context, orgID string, n int) error {
	const batch = 5000
	start := db.now().Add(-time.Duration(n) * time.Millisecond)
	for done := 0; done < n; done += batch {
		err := db.inTx(ctx, func(tx *Tx) error {
			result, err := keepResult(ctx, tx, []byte(`{"name":"Seeded","enrichment_status":"enriched"}`))
			if err != nil {
				return err
			}
			for i := done; i < min(done+batch, n); i++ {
				at := start.Add(time.Duration(i) * time.Millisecond)
				id, err := uuid.NewV7()
				if err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO tasks (id, org_id, object_type, status, lookup, input, target,
					credits_charged, created_at, queued_at, started_at, finished_at, expires_at, result_id)
					VALUES (?, ?, 'company', 'succeeded', 'domain', '{}', ?, 1, ?, ?, ?, ?, ?, ?)`,
					id.String(), orgID, fmt.Sprintf("seed-%d.com", i), ms(at), ms(at), ms(at), ms(at), ms(at.Add(10*time.Minute)), result); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// SeedQueuedTasks queues n tasks for the organization, created one millisecond apart
// before now and expiring a day later, in transactions of a few thousand rows, and
// gives the organization its turn in the queue as an enqueue does: the backlog a bulk
// upload leaves, for measuring whether a claim costs the same behind it as behind a
// short one. The tasks are not charged.
func (db *DB) SeedQueuedTasks(ctx context.Context, orgID string, n int) error {
	const batch = 5000
	now := db.now()
	start := now.Add(-time.Duration(n) * time.Millisecond)
	for done := 0; done < n; done += batch {
		err := db.inTx(ctx, func(tx *Tx) error {
			for i := done; i < min(done+batch, n); i++ {
				at := start.Add(time.Duration(i) * time.Millisecond)
				id, err := uuid.NewV7()
				if err != nil {
					return err
				}
				domain := fmt.Sprintf("queued-%d.com", i)
				if _, err := tx.ExecContext(ctx, `INSERT INTO tasks (id, org_id, object_type, status, lookup, input, target,
					credits_charged, created_at, queued_at, expires_at) VALUES (?, ?, 'company', 'queued', 'domain', ?, ?, 1, ?, ?, ?)`,
					id.String(), orgID, `{"domain":"`+domain+`"}`, domain, ms(at), ms(at), ms(now.Add(24*time.Hour))); err != nil {
					return err
				}
			}
			return joinQueue(ctx, tx, orgID)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// SeedLedger fills the organization's ledger with n charges of one credit taken from
// grantID, spread evenly over span before now, one in ten refunded a second later,
// each naming a task of its own: the ledger a busy month leaves, for measuring the
// pages that read it. The grant gives up what was charged and not refunded, so grants
// and ledger still agree.
func (db *DB) SeedLedger(ctx context.Context, orgID string, grantID int64, n int, span time.Duration) error {
	const batch = 5000
	now := db.now()
	step := span / time.Duration(max(n, 1))
	for done := 0; done < n; done += batch {
		err := db.inTx(ctx, func(tx *Tx) error {
			spent := int64(0)
			for i := done; i < min(done+batch, n); i++ {
				at := now.Add(-span + time.Duration(i)*step)
				taskID := uuid.Must(uuid.NewV7()).String()
				if err := appendLedger(ctx, tx, orgID, LedgerCharge, 1, grantID, &taskID, at); err != nil {
					return err
				}
				spent++
				if i%10 == 9 {
					if err := appendLedger(ctx, tx, orgID, LedgerRefund, 1, grantID, &taskID, at.Add(time.Second)); err != nil {
						return err
					}
					spent--
				}
			}
			_, err := tx.ExecContext(ctx, `UPDATE credit_grants SET remaining = remaining - ? WHERE id = ? AND org_id = ?`,
				spent, grantID, orgID)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// SeedDeliveries gives the organization's Loop n delivered task.succeeded events,
// created one millisecond apart before now, each acknowledged on its first attempt:
// the history of a Loop that many tasks ran through, for measuring the pages that
// list it.
func (db *DB) SeedDeliveries(ctx context.Context, orgID, loopID string, n int) error {
	const batch = 5000
	start := db.now().Add(-time.Duration(n) * time.Millisecond)
	for done := 0; done < n; done += batch {
		err := db.inTx(ctx, func(tx *Tx) error {
			if _, err := findLoop(ctx, tx, orgID, loopID); err != nil {
				return err
			}
			for i := done; i < min(done+batch, n); i++ {
				at := ms(start.Add(time.Duration(i) * time.Millisecond))
				id, taskID := uuid.Must(uuid.NewV7()).String(), uuid.Must(uuid.NewV7()).String()
				payload := fmt.Sprintf(`{"event":"task.succeeded","task":{"id":%q,"object_type":"company","status":"succeeded"},`+
					`"data":{"name":"Seeded","domain":"seed-%d.com","enrichment_status":"enriched"},"error":null}`, taskID, i)
				if _, err := tx.ExecContext(ctx, `INSERT INTO deliveries (id, loop_id, org_id, event, task_id, payload, status,
					attempts, last_attempt_at, last_status_code, created_at) VALUES (?, ?, ?, 'task.succeeded', ?, ?, 'succeeded', 1, ?, 204, ?)`,
					id, loopID, orgID, taskID, payload, at, at); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
