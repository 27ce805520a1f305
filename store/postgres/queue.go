package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/jackc/pgx/v5"
)

// The queue is SQLite's: queue_turns holds the organizations that have queued tasks,
// in the order of their next turn; a claim serves the lowest seq, FIFO within the
// organization, and sends it to the back of the line. With several claimers at once:
//   - a claimer locks the turn it serves (FOR UPDATE SKIP LOCKED): the others pass to
//     the next organization instead of waiting, and no two claim for the same one at a
//     time; its task is locked the same way, so no two claim the same task;
//   - a turn's new place comes from the sequence queue_turns_seq, not max(seq) + 1,
//     which two claimers would compute alike;
//   - a claimer drops a turn whose organization has nothing queued only while it holds
//     the organization's row (SKIP LOCKED again): everything that makes a task queued
//     (an enqueue, a requeue, a release) holds that row first, and joins the line after
//     it, so a turn is never dropped under a task about to be queued.

// Advisory locks of the sweeps, one at a time across replicas (pg_try_advisory_xact_lock).
// The keys from 0x10 up of db.go's lockBase are the queue's.
const (
	lockExpireTasks      = lockBase | 0x10
	lockRequeueAbandoned = lockBase | 0x11
	lockPurgeSettled     = lockBase | 0x12
)

// claimQuery hands out the oldest queued task of one organization: FIFO within it.
const claimQuery = `
UPDATE tasks
SET status = 'running', started_at = $1, lease_token = $2, lease_until = $3, attempts = attempts + 1
WHERE id = (
    SELECT id FROM tasks WHERE org_id = $4 AND status = 'queued'
    ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING id, org_id, lookup, target, input, expires_at, coalesce(queued_at, created_at), watch_id`

// ClaimTask takes the next queued task, if any, under a lease of the given length.
// Organizations take turns (round-robin). It returns nil when nothing is queued that
// another claimer is not already taking.
func (db *DB) ClaimTask(ctx context.Context, lease time.Duration) (*store.Claim, error) {
	var tok [16]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil, err
	}
	var c *store.Claim
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		c, err = db.claimTask(ctx, tx, lease, hex.EncodeToString(tok[:]))
		return err
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (db *DB) claimTask(ctx context.Context, tx pgx.Tx, lease time.Duration, token string) (*store.Claim, error) {
	now := db.now()
	c := &store.Claim{Token: token}
	// The turns this claim found nothing to take from: not read again by it. Not nil:
	// `<> ALL(NULL)` is never true.
	passed := []string{}
	waited := false
	for {
		var org string
		err := tx.QueryRow(ctx, `SELECT org_id FROM queue_turns WHERE org_id <> ALL($1)
			ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED`, passed).Scan(&org)
		if errors.Is(err, pgx.ErrNoRows) && len(passed) == 0 && !waited {
			// Every turn is held by other claimers. Their transactions are short (a
			// claim, a settle), and the organization may well have more queued tasks:
			// wait for the first turn rather than report an empty queue and sleep
			// until the next poll, which left one busy tenant's tasks to one claim at
			// a time. This transaction holds no turn yet, so it waits in no cycle.
			waited = true
			err = tx.QueryRow(ctx, `SELECT org_id FROM queue_turns ORDER BY seq LIMIT 1 FOR UPDATE`).Scan(&org)
		}
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		var input string
		var expires, queued int64
		err = tx.QueryRow(ctx, claimQuery, ms(now), c.Token, ms(now.Add(lease)), org).
			Scan(&c.TaskID, &c.OrgID, &c.Input.Lookup, &c.Input.Target, &input, &expires, &queued, &c.WatchID)
		if errors.Is(err, pgx.ErrNoRows) {
			if err := leaveQueue(ctx, tx, org); err != nil {
				return nil, err
			}
			passed = append(passed, org)
			continue
		}
		if err != nil {
			return nil, err
		}
		c.ExpiresAt, c.QueuedAt = fromMS(expires), fromMS(queued)
		// The hints are the only thing read from the input as sent; an input that cannot
		// be read must not stop the queue: the task runs without hints.
		if json.Unmarshal([]byte(input), &c.Input.Hints) != nil {
			c.Input.Hints = enrich.Hints{}
		}
		if _, err := tx.Exec(ctx, `UPDATE queue_turns SET seq = nextval('queue_turns_seq') WHERE org_id = $1`, org); err != nil {
			return nil, err
		}
		return c, nil
	}
}

// leaveQueue drops the organization's turn, which the caller holds, when it has no
// queued task: they were canceled or expired since it got in line. A queued task
// locked by another transaction (a cancel under way) keeps the turn, and so does an
// organization whose row another transaction holds: it may be queuing a task that this
// transaction cannot see yet.
func leaveQueue(ctx context.Context, tx pgx.Tx, orgID string) error {
	var id string
	err := tx.QueryRow(ctx, `SELECT id FROM orgs WHERE id = $1 FOR NO KEY UPDATE SKIP LOCKED`, orgID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `DELETE FROM queue_turns WHERE org_id = $1
		AND NOT EXISTS (SELECT 1 FROM tasks WHERE org_id = $1 AND status = 'queued')`, orgID)
	return err
}

// joinQueue gives the organization a turn in the queue if it has none. The caller
// holds the organization's row (lockOrg), so no claimer is dropping its turn.
func joinQueue(ctx context.Context, tx pgx.Tx, orgID string) error {
	_, err := tx.Exec(ctx, `INSERT INTO queue_turns (org_id, seq) VALUES ($1, nextval('queue_turns_seq'))
		ON CONFLICT (org_id) DO NOTHING`, orgID)
	return err
}

// ExtendLease keeps a claim alive while its work runs. It reports false when the claim
// is no longer the task's (canceled, expired, or claimed again after the lease ran out).
func (db *DB) ExtendLease(ctx context.Context, c *store.Claim, lease time.Duration) (bool, error) {
	var ok bool
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE tasks SET lease_until = $1 WHERE id = $2 AND lease_token = $3 AND status = 'running'`,
			ms(db.now().Add(lease)), c.TaskID, c.Token)
		ok = err == nil && tag.RowsAffected() == 1
		return err
	})
	return ok, err
}

// Settle finishes a claimed task in one transaction: the task's status and result, the
// refund of a failure, the record for the store, the webhook delivery of a task that
// has a Loop, and for a watch's task its watch's baseline and events (settleWatch,
// which takes the watch's row last). It reports false, and changes nothing, when the
// claim is no longer the task's. The task's row is locked first, so a cancel, an
// expiry or a requeue of it at the same moment either waits for this and finds it
// settled, or settles it first and this finds the claim gone: the task settles, and
// is refunded, once.
func (db *DB) Settle(ctx context.Context, c *store.Claim, out store.Outcome) (bool, error) {
	var settled bool
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		settled = false
		now := db.now()
		var loopID, watchID *string
		err := tx.QueryRow(ctx, `SELECT loop_id, watch_id FROM tasks WHERE id = $1 AND lease_token = $2 AND status = 'running' FOR UPDATE`,
			c.TaskID, c.Token).Scan(&loopID, &watchID)
		if errors.Is(err, pgx.ErrNoRows) {
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
			if err := finishTask(ctx, tx, c.TaskID, store.StatusFailed, nil, taskErr, now); err != nil {
				return err
			}
			if err := refundCredits(ctx, tx, c.TaskID, now); err != nil {
				return err
			}
			if err := deliverSettled(ctx, tx, c.TaskID, loopID, now); err != nil {
				return err
			}
			return settleWatchTask(ctx, tx, watchID, c.TaskID, false, now)
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
		if err := finishTask(ctx, tx, c.TaskID, store.StatusSucceeded, data, nil, now); err != nil {
			return err
		}
		if err := deliverSettled(ctx, tx, c.TaskID, loopID, now); err != nil {
			return err
		}
		return settleWatchTask(ctx, tx, watchID, c.TaskID, out.Fetched, now)
	})
	return settled && err == nil, err
}

func finishTask(ctx context.Context, tx pgx.Tx, id, status string, data, taskErr []byte, now time.Time) error {
	result, err := resultID(ctx, tx, data)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE tasks SET status = $1, result_id = $2, error = $3, finished_at = $4,
		lease_token = NULL, lease_until = NULL WHERE id = $5`, status, result, nullText(taskErr), ms(now), id)
	return err
}

func nullText(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// expireBatch is the most tasks one transaction of ExpireTasks fails.
const expireBatch = 500

// ExpireTasks fails, as timed_out, and refunds the unsettled tasks past their
// expires_at; those with a Loop send task.failed. It returns the tasks it expired.
// One replica sweeps at a time: while another holds the sweep's lock, this one does
// nothing and returns none.
func (db *DB) ExpireTasks(ctx context.Context) ([]store.ExpiredTask, error) {
	var all []store.ExpiredTask
	for {
		batch, err := db.expireTasks(ctx)
		all = append(all, batch...)
		if err != nil || len(batch) < expireBatch {
			return all, err
		}
	}
}

func (db *DB) expireTasks(ctx context.Context) ([]store.ExpiredTask, error) {
	var expired []store.ExpiredTask
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		expired = nil
		if ok, err := db.tryAdvisoryXactLock(ctx, tx, lockExpireTasks); err != nil || !ok {
			return err
		}
		now := db.now()
		var err error
		expired, err = failTasks(ctx, tx, now, store.TimedOut, `status IN ('queued', 'running') AND expires_at <= $3
			ORDER BY expires_at LIMIT $4`, ms(now), expireBatch)
		return err
	})
	if err != nil {
		return nil, err
	}
	return expired, nil
}

// failTasks fails the unsettled tasks that match where (a condition on tasks, with
// ORDER BY and LIMIT if wanted, whose arguments start at $3) with taskErr, refunds them
// and queues task.failed to their Loops, all in tx; it returns them. Tasks another
// transaction holds (one settling) are passed over: they are settling already.
func failTasks(ctx context.Context, tx pgx.Tx, now time.Time, taskErr enrich.TaskError, where string, args ...any) ([]store.ExpiredTask, error) {
	body, err := json.Marshal(taskErr)
	if err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, `UPDATE tasks SET status = 'failed', error = $1, finished_at = $2, lease_token = NULL, lease_until = NULL
		WHERE id IN (SELECT id FROM tasks WHERE `+where+` FOR UPDATE SKIP LOCKED) AND status IN ('queued', 'running')
		RETURNING id, object_type, credits_charged, loop_id`, append([]any{string(body), ms(now)}, args...)...)
	if err != nil {
		return nil, err
	}
	failed, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.ExpiredTask, error) {
		var t store.ExpiredTask
		err := row.Scan(&t.ID, &t.ObjectType, &t.CreditsCharged, &t.LoopID)
		return t, err
	})
	if err != nil {
		return nil, err
	}
	for _, t := range failed {
		if err := refundCredits(ctx, tx, t.ID, now); err != nil {
			return nil, err
		}
		if err := deliverSettled(ctx, tx, t.ID, t.LoopID, now); err != nil {
			return nil, err
		}
	}
	return failed, nil
}

// RequeueAbandoned puts back in the queue the running tasks whose lease ran out; those
// claimed store.MaxTaskAttempts times already are failed instead, refunded, and send
// task.failed to their Loop, in the same transaction; they are returned. One replica
// sweeps at a time: while another holds the sweep's lock, this one returns 0, nil.
func (db *DB) RequeueAbandoned(ctx context.Context) (requeued int, gaveUpOn []store.ExpiredTask, err error) {
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		requeued, gaveUpOn = 0, nil
		if ok, err := db.tryAdvisoryXactLock(ctx, tx, lockRequeueAbandoned); err != nil || !ok {
			return err
		}
		now := db.now()
		rows, err := tx.Query(ctx, `SELECT DISTINCT org_id FROM tasks WHERE status = 'running' AND lease_until < $1`, ms(now))
		if err != nil {
			return err
		}
		orgs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(orgs) == 0 {
			return err
		}
		// The organizations first, before the refunds below lock their grants: an
		// enqueue takes the organization and then the grants, and this must not hold
		// grants while it waits for an organization.
		if err := lockOrgs(ctx, tx, orgs); err != nil {
			return err
		}
		gaveUpOn, err = failTasks(ctx, tx, now, store.GaveUp,
			`status = 'running' AND lease_until < $3 AND attempts >= $4`, ms(now), store.MaxTaskAttempts)
		if err != nil {
			return err
		}
		requeued, err = requeue(ctx, tx, orgs, "", `status = 'running' AND lease_until < $2`, ms(now))
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	return requeued, gaveUpOn, nil
}

// requeue puts the running tasks of orgs that match where (arguments from $2) back in
// the queue, setting set too, and their organizations in line; it returns how many it
// put back. The organizations' rows are locked first, in one order, as an enqueue
// locks its own (see ClaimTask).
func requeue(ctx context.Context, tx pgx.Tx, orgs []string, set, where string, args ...any) (int, error) {
	if err := lockOrgs(ctx, tx, orgs); err != nil {
		return 0, err
	}
	rows, err := tx.Query(ctx, `UPDATE tasks SET status = 'queued', started_at = NULL, lease_token = NULL, lease_until = NULL`+set+`
		WHERE org_id = ANY($1) AND `+where+` RETURNING org_id`, append([]any{orgs}, args...)...)
	if err != nil {
		return 0, err
	}
	back, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(back) == 0 {
		return 0, err
	}
	joined := slices.Clone(back)
	slices.Sort(joined)
	for _, org := range slices.Compact(joined) {
		if err := joinQueue(ctx, tx, org); err != nil {
			return 0, err
		}
	}
	return len(back), notifyTasks(ctx, tx)
}

// lockOrgs is lockOrg for several organizations, locked in one order.
func lockOrgs(ctx context.Context, tx pgx.Tx, orgs []string) error {
	orgs = slices.Clone(orgs)
	slices.Sort(orgs)
	_, err := tx.Exec(ctx, `SELECT 1 FROM orgs WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE`, orgs)
	return err
}

// ReleaseTask puts a claimed task back in the queue untouched, for a worker that stops
// (a shutdown) before the task is done. The claim given back does not count as an
// attempt.
func (db *DB) ReleaseTask(ctx context.Context, c *store.Claim) error {
	return db.inTx(ctx, func(tx pgx.Tx) error {
		_, err := requeue(ctx, tx, []string{c.OrgID}, `, attempts = greatest(attempts - 1, 0)`,
			`id = $2 AND lease_token = $3 AND status = 'running'`, c.TaskID, c.Token)
		return err
	})
}

// deliverSettled queues the task.succeeded or task.failed event of a task that has just
// settled, in the transaction that settled it (deliverTaskEvent). The caller passes
// the task's loop_id, which it has read anyway: most tasks have none, and then nothing
// more is read.
func deliverSettled(ctx context.Context, tx pgx.Tx, taskID string, loopID *string, now time.Time) error {
	if loopID == nil {
		return nil
	}
	t, err := scanTask(tx.QueryRow(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id = $1`, taskID))
	if err != nil {
		return err
	}
	return deliverTaskEvent(ctx, tx, t, now)
}
