package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The ceiling is the least work the database must do for the API's hot paths, for
// `enrichd bench` to measure beside the real service (store.DB.CeilingWrite).

// CeilingWrite does, in one transaction, the minimal raw work of creating a charged
// task with an idempotency key: a task row, a ledger row and an idempotency row. It
// returns the task's id. grantID must be a grant of the organization.
func (db *DB) CeilingWrite(ctx context.Context, orgID string, grantID int64) (string, error) {
	id := uuid.Must(uuid.NewV7()).String()
	err := db.inTx(context.WithoutCancel(ctx), func(tx pgx.Tx) error {
		now := ms(db.now())
		if _, err := tx.Exec(ctx, `INSERT INTO tasks (id, org_id, object_type, status, lookup, input, target,
			credits_charged, created_at, queued_at, expires_at) VALUES ($1, $2, 'company', 'queued', 'domain', '{}', $3, 1, $4, $4, $5)`,
			id, orgID, id+".example", now, now+600_000); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO credit_ledger (org_id, kind, amount, grant_id, task_id, created_at)
			VALUES ($1, 'charge', 1, $2, $3, $4)`, orgID, grantID, id, now); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO idempotency_keys (org_id, key, body_hash, task_id, created_at)
			VALUES ($1, $2, '', $2, $3)`, orgID, id, now)
		return err
	})
	return id, err
}

// CeilingRead reads one task row by id.
func (db *DB) CeilingRead(ctx context.Context, id string) error {
	var status string
	return db.pool.QueryRow(ctx, `SELECT status FROM tasks WHERE id = $1`, id).Scan(&status)
}

// seedBatch is how many rows a seeding transaction writes, in one statement.
const seedBatch = 5000

// SeedTasks fills the organization's task list with n settled tasks, created one
// millisecond apart before now: how `enrichd bench` shows that reads stay as fast on a
// large database as on an empty one.
func (db *DB) SeedTasks(ctx context.Context, orgID string, n int) error {
	start := db.now().Add(-time.Duration(n) * time.Millisecond)
	for done := 0; done < n; done += seedBatch {
		ids, targets, ats := seedRows(start, done, min(done+seedBatch, n), "seed-%d.com")
		err := db.inTx(ctx, func(tx pgx.Tx) error {
			result, err := keepResult(ctx, tx, []byte(`{"name":"Seeded","enrichment_status":"enriched"}`))
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `INSERT INTO tasks (id, org_id, object_type, status, lookup, input, target,
				credits_charged, created_at, queued_at, started_at, finished_at, expires_at, result_id)
				SELECT id, $1, 'company', 'succeeded', 'domain', '{}', target, 1, at, at, at, at, at + 600000, $2
				FROM unnest($3::text[], $4::text[], $5::bigint[]) AS s(id, target, at)`, orgID, result, ids, targets, ats)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// SeedQueuedTasks queues n tasks for the organization, created one millisecond apart
// before now and expiring a day later, and gives the organization its turn in the
// queue as an enqueue does. The tasks are not charged.
func (db *DB) SeedQueuedTasks(ctx context.Context, orgID string, n int) error {
	now := db.now()
	start := now.Add(-time.Duration(n) * time.Millisecond)
	for done := 0; done < n; done += seedBatch {
		ids, targets, ats := seedRows(start, done, min(done+seedBatch, n), "queued-%d.com")
		err := db.inTx(ctx, func(tx pgx.Tx) error {
			if err := lockOrg(ctx, tx, orgID); err != nil {
				return err
			}
			if err := joinQueue(ctx, tx, orgID); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO tasks (id, org_id, object_type, status, lookup, input, target,
				credits_charged, created_at, queued_at, expires_at)
				SELECT id, $1, 'company', 'queued', 'domain', '{"domain":"' || target || '"}', target, 1, at, at, $2
				FROM unnest($3::text[], $4::text[], $5::bigint[]) AS s(id, target, at)`,
				orgID, ms(now.Add(24*time.Hour)), ids, targets, ats); err != nil {
				return err
			}
			return notifyTasks(ctx, tx)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// seedRows are the ids, targets and creation times of seeded rows from to to.
func seedRows(start time.Time, from, to int, target string) (ids, targets []string, ats []int64) {
	for i := from; i < to; i++ {
		ids = append(ids, uuid.Must(uuid.NewV7()).String())
		targets = append(targets, fmt.Sprintf(target, i))
		ats = append(ats, ms(start.Add(time.Duration(i)*time.Millisecond)))
	}
	return ids, targets, ats
}
