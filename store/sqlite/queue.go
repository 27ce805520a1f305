package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"enrichd/enrich"
	"enrichd/store"
)

// claimQuery hands out the oldest queued task of one organization: FIFO within it.
const claimQuery = `
UPDATE tasks
SET status = 'running', started_at = :now, lease_token = :token, lease_until = :lease_until,
    attempts = attempts + 1
WHERE id = (
    SELECT id FROM tasks WHERE org_id = :org AND status = 'queued'
    ORDER BY created_at, id LIMIT 1)
RETURNING id, org_id, lookup, target, input, expires_at, coalesce(queued_at, created_at), watch_id`

// ClaimTask takes the next queued task, if any, under a lease of the given length.
// Organizations take turns (round-robin), so one with a few tasks is served between
// the tasks of another's bulk upload. It returns nil when nothing is queued.
func (db *DB) ClaimTask(ctx context.Context, lease time.Duration) (*Claim, error) {
	var tok [16]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil, err
	}
	c := &Claim{Token: hex.EncodeToString(tok[:])}
	var claimed bool
	err := db.inTx(ctx, func(tx *Tx) error {
		now := db.now()
		for {
			var org string
			err := tx.QueryRowContext(ctx, `SELECT org_id FROM queue_turns ORDER BY seq LIMIT 1`).Scan(&org)
			if errors.Is(err, sql.ErrNoRows) {
				return nil
			}
			if err != nil {
				return err
			}
			var input string
			var expires, queued int64
			err = tx.QueryRowContext(ctx, claimQuery, sql.Named("now", ms(now)), sql.Named("token", c.Token),
				sql.Named("lease_until", ms(now.Add(lease))), sql.Named("org", org)).
				Scan(&c.TaskID, &c.OrgID, &c.Input.Lookup, &c.Input.Target, &input, &expires, &queued, &c.WatchID)
			if errors.Is(err, sql.ErrNoRows) {
				// Its queued tasks were canceled or expired since it got in line.
				if _, err := tx.ExecContext(ctx, `DELETE FROM queue_turns WHERE org_id = ?`, org); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return err
			}
			c.ExpiresAt, c.QueuedAt, claimed = fromMS(expires), fromMS(queued), true
			// The hints are the only thing read from the input as sent. An input that
			// cannot be read (a row written by hand, or by another version) must not stop
			// the queue: the task runs without hints.
			if json.Unmarshal([]byte(input), &c.Input.Hints) != nil {
				c.Input.Hints = enrich.Hints{}
			}
			_, err = tx.ExecContext(ctx, `UPDATE queue_turns SET seq = (SELECT max(seq) + 1 FROM queue_turns) WHERE org_id = ?`, org)
			return err
		}
	})
	if err != nil || !claimed {
		return nil, err
	}
	return c, nil
}

// joinQueue gives the organization a turn in the queue if it has none.
func joinQueue(ctx context.Context, tx *Tx, orgID string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO queue_turns (org_id, seq)
		VALUES (?, (SELECT coalesce(max(seq), 0) + 1 FROM queue_turns)) ON CONFLICT (org_id) DO NOTHING`, orgID)
	return err
}

// ExtendLease keeps a claim alive while its work runs. It reports false when the claim
// is no longer the task's (canceled, expired, or claimed again after the lease ran out):
// the worker should then stop.
func (db *DB) ExtendLease(ctx context.Context, c *Claim, lease time.Duration) (bool, error) {
	var ok bool
	err := db.inTx(ctx, func(tx *Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE tasks SET lease_until = ? WHERE id = ? AND lease_token = ? AND status = 'running'`,
			ms(db.now().Add(lease)), c.TaskID, c.Token)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		ok = n == 1
		return err
	})
	return ok, err
}

// Settle finishes a claimed task in one transaction: the task's status and result, the
// refund of a failure, the record for the store, the webhook delivery of a task that
// has a Loop, and for a watch's task what it changes on the watch and sends to the
// watch's Loop (store.WatchSettled). It reports false, and changes nothing, when the
// claim is no longer the task's.
func (db *DB) Settle(ctx context.Context, c *Claim, out Outcome) (bool, error) {
	var settled bool
	err := db.inTx(ctx, func(tx *Tx) error {
		now := db.now()
		// Owning the claim, the task's Loop and its watch, in one read.
		var loopID, watchID *string
		err := tx.QueryRowContext(ctx, `SELECT loop_id, watch_id FROM tasks WHERE id = ? AND lease_token = ? AND status = 'running'`,
			c.TaskID, c.Token).Scan(&loopID, &watchID)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		settled = true
		if out.Gathered != nil {
			if err := keepGathering(ctx, tx, out.Gathered, now.Add(-out.KeepGathered)); err != nil {
				return err
			}
		}
		if out.Err != nil {
			taskErr, err := json.Marshal(out.Err)
			if err != nil {
				return err
			}
			if err := finishTask(ctx, tx, c.TaskID, StatusFailed, nil, taskErr, now); err != nil {
				return err
			}
			if err := refund(ctx, tx, c.TaskID, now); err != nil {
				return err
			}
			if watchID != nil {
				if err := settleWatch(ctx, tx, c.TaskID, *watchID, false, now); err != nil {
					return err
				}
			}
			return deliverSettled(ctx, tx, c.TaskID, loopID, now)
		}
		res := *out.Result
		if out.Fetched {
			at := out.FetchedAt
			if at.IsZero() {
				at = now
			}
			var err error
			if res, err = storeFetched(ctx, tx, c.Input, res, !out.TieBroken, at, now); err != nil {
				return err
			}
		}
		if c.Input.Lookup == enrich.LookupEmail && !out.TieBroken {
			// The address is on record now: what was gathered for it is no longer read.
			if err := forgetGathering(ctx, tx, enrich.AddressKey(c.Input.Target)); err != nil {
				return err
			}
		}
		data, err := store.ResultJSON(res)
		if err != nil {
			return err
		}
		if err := finishTask(ctx, tx, c.TaskID, StatusSucceeded, data, nil, now); err != nil {
			return err
		}
		if watchID != nil {
			if err := settleWatch(ctx, tx, c.TaskID, *watchID, out.Fetched, now); err != nil {
				return err
			}
		}
		return deliverSettled(ctx, tx, c.TaskID, loopID, now)
	})
	return settled && err == nil, err
}

func finishTask(ctx context.Context, tx *Tx, id, status string, data, taskErr []byte, now time.Time) error {
	result, err := resultID(ctx, tx, data)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE tasks SET status = ?, result_id = ?, error = ?, finished_at = ?,
		lease_token = NULL, lease_until = NULL WHERE id = ?`, status, result, nullText(taskErr), ms(now), id)
	return err
}

func nullText(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// expireBatch is the most tasks one transaction of ExpireTasks fails: after an outage
// the expired backlog is failed a batch at a time, with other writes between them.
const expireBatch = 500

// ExpireTasks fails, as timed_out, and refunds the unsettled tasks past their
// expires_at; those with a Loop send task.failed. It returns the tasks it expired.
func (db *DB) ExpireTasks(ctx context.Context) ([]ExpiredTask, error) {
	var all []ExpiredTask
	for {
		batch, err := db.expireTasks(ctx)
		all = append(all, batch...)
		if err != nil || len(batch) < expireBatch {
			return all, err
		}
	}
}

func (db *DB) expireTasks(ctx context.Context) ([]ExpiredTask, error) {
	var expired []ExpiredTask
	err := db.inTx(ctx, func(tx *Tx) error {
		now := db.now()
		var err error
		expired, err = failTasks(ctx, tx, now, store.TimedOut,
			`id IN (SELECT id FROM tasks WHERE status IN ('queued', 'running') AND expires_at <= ? LIMIT ?)`, ms(now), expireBatch)
		return err
	})
	if err != nil {
		return nil, err
	}
	return expired, nil
}

// failTasks fails the unsettled tasks that match where with taskErr, refunds them and
// queues task.failed to their Loops, all in tx; it returns them.
func failTasks(ctx context.Context, tx *Tx, now time.Time, taskErr enrich.TaskError, where string, args ...any) ([]ExpiredTask, error) {
	body, err := json.Marshal(taskErr)
	if err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, `UPDATE tasks SET status = 'failed', error = ?, finished_at = ?, lease_token = NULL, lease_until = NULL
		WHERE `+where+` RETURNING id, object_type, credits_charged, loop_id`, append([]any{string(body), ms(now)}, args...)...)
	if err != nil {
		return nil, err
	}
	var failed []ExpiredTask
	for rows.Next() {
		var t ExpiredTask
		if err := rows.Scan(&t.ID, &t.ObjectType, &t.CreditsCharged, &t.LoopID); err != nil {
			rows.Close()
			return nil, err
		}
		failed = append(failed, t)
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return nil, err
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	for _, t := range failed {
		if err := refund(ctx, tx, t.ID, now); err != nil {
			return nil, err
		}
		if err := deliverSettled(ctx, tx, t.ID, t.LoopID, now); err != nil {
			return nil, err
		}
	}
	return failed, nil
}

// RequeueAbandoned puts back in the queue the running tasks whose lease ran out: their
// worker died (a crash, a restart) without settling them. Those claimed
// MaxTaskAttempts times already are failed instead, refunded, and send task.failed to
// their Loop, in the same transaction; they are returned.
func (db *DB) RequeueAbandoned(ctx context.Context) (requeued int, gaveUp []ExpiredTask, err error) {
	err = db.inTx(ctx, func(tx *Tx) error {
		now := db.now()
		var err error
		gaveUp, err = failTasks(ctx, tx, now, store.GaveUp,
			`status = 'running' AND lease_until < ? AND attempts >= ?`, ms(now), MaxTaskAttempts)
		if err != nil {
			return err
		}
		orgs, err := requeue(ctx, tx, "", `status = 'running' AND lease_until < ?`, ms(now))
		requeued = len(orgs)
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	return requeued, gaveUp, nil
}

// requeue puts the running tasks that match where back in the queue, and their
// organizations in line, setting set too; it returns one organization per task.
func requeue(ctx context.Context, tx *Tx, set, where string, args ...any) ([]string, error) {
	rows, err := tx.QueryContext(ctx, `UPDATE tasks SET status = 'queued', started_at = NULL, lease_token = NULL, lease_until = NULL`+set+`
		WHERE `+where+` RETURNING org_id`, args...)
	if err != nil {
		return nil, err
	}
	var orgs []string
	for rows.Next() {
		var org string
		if err := rows.Scan(&org); err != nil {
			rows.Close()
			return nil, err
		}
		orgs = append(orgs, org)
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return nil, err
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	for _, org := range orgs {
		if err := joinQueue(ctx, tx, org); err != nil {
			return nil, err
		}
	}
	return orgs, nil
}

// ReleaseTask puts a claimed task back in the queue untouched, for a worker that stops
// (a shutdown) before the task is done. The claim given back does not count as an
// attempt.
func (db *DB) ReleaseTask(ctx context.Context, c *Claim) error {
	return db.inTx(ctx, func(tx *Tx) error {
		_, err := requeue(ctx, tx, `, attempts = max(attempts - 1, 0)`, `id = ? AND lease_token = ? AND status = 'running'`, c.TaskID, c.Token)
		return err
	})
}
