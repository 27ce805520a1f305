package postgres

import (
	"context"
	"errors"
	"slices"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

const deliveryColumns = `id, loop_id, org_id, event, task_id, status, attempts, next_attempt_at, last_attempt_at,
	last_status_code, last_error, created_at`

func scanDelivery(row pgx.Row, extra ...any) (*store.Delivery, error) {
	var d store.Delivery
	var next, last *int64
	var created int64
	dest := append([]any{&d.ID, &d.LoopID, &d.OrgID, &d.Event, &d.TaskID, &d.Status, &d.Attempts, &next, &last,
		&d.LastStatusCode, &d.LastError, &created}, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	d.NextAttemptAt, d.LastAttemptAt, d.CreatedAt = fromNullMS(next), fromNullMS(last), fromMS(created)
	return &d, nil
}

func scanDeliveries(rows pgx.Rows) ([]*store.Delivery, error) {
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.Delivery, error) { return scanDelivery(r) })
	if out == nil && err == nil {
		out = []*store.Delivery{}
	}
	return out, err
}

// insertDelivery writes a pending delivery, due at once; or, when the Loop's
// destination is disabled, a failed one that says why (retried once it is enabled).
func insertDelivery(ctx context.Context, tx pgx.Tx, loopID, orgID, event string, taskID *string, payload []byte, now time.Time) (*store.Delivery, error) {
	d := &store.Delivery{ID: uuid.Must(uuid.NewV7()).String(), LoopID: loopID, OrgID: orgID, Event: event, TaskID: taskID, CreatedAt: now}
	before, after := store.NotSentErrorParts()
	var next, last *int64
	err := tx.QueryRow(ctx, `INSERT INTO deliveries (id, loop_id, org_id, event, task_id, payload, status, next_attempt_at,
			last_error, last_attempt_at, created_at)
		SELECT $1, id, $2, $3, $4, $5, CASE WHEN destination_disabled_at IS NULL THEN 'pending' ELSE 'failed' END,
			CASE WHEN destination_disabled_at IS NULL THEN $6::bigint END,
			CASE WHEN destination_disabled_at IS NOT NULL THEN $7::text || destination_disabled_reason || $8::text END,
			CASE WHEN destination_disabled_at IS NOT NULL THEN $6::bigint END, $6
		FROM loops WHERE id = $9
		RETURNING status, next_attempt_at, last_error, last_attempt_at`,
		d.ID, orgID, event, taskID, string(payload), ms(now), before, after, loopID).
		Scan(&d.Status, &next, &d.LastError, &last)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.LoopNotFound()
	}
	d.NextAttemptAt, d.LastAttemptAt = fromNullMS(next), fromNullMS(last)
	return d, err
}

// deliverTaskEvent queues the task.succeeded or task.failed event of t, a task that has
// just settled, read in the transaction that settled it, so that no crash can lose
// the event. A task without a Loop, or whose Loop was deleted, sends nothing; a
// canceled one neither. (pgqueue's deliverSettled reads the task and calls this.)
//
// The Loop's row is read FOR KEY SHARE, which a DeleteLoop at the same moment waits
// for: the delivery is then deleted with the Loop, never left pointing at nothing.
func deliverTaskEvent(ctx context.Context, tx pgx.Tx, t *store.Task, now time.Time) error {
	if t.LoopID == nil || (t.Status != store.StatusSucceeded && t.Status != store.StatusFailed) {
		return nil
	}
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM loops WHERE id = $1 FOR KEY SHARE)`, *t.LoopID).Scan(&exists); err != nil || !exists {
		return err
	}
	event, payload, err := store.SettledEvent(t)
	if err != nil || event == "" {
		return err
	}
	_, err = insertDelivery(ctx, tx, *t.LoopID, t.OrgID, event, &t.ID, payload, now)
	return err
}

// CreateTestDelivery queues a `test` event to the Loop: body {event: "test", task:
// null, data: null, error: null}. A disabled Loop can still be tested.
func (db *DB) CreateTestDelivery(ctx context.Context, orgID, loopID string) (*store.Delivery, error) {
	var d *store.Delivery
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := findLoop(ctx, tx, orgID, loopID); err != nil {
			return err
		}
		payload, err := store.TestEventPayload()
		if err != nil {
			return err
		}
		d, err = insertDelivery(ctx, tx, loopID, orgID, store.EventTest, nil, payload, db.now())
		return err
	})
	return d, err
}

// ListDeliveries returns a page of a Loop's deliveries, newest first, and how many it
// has in all, from one snapshot.
func (db *DB) ListDeliveries(ctx context.Context, orgID, loopID string, page, pageSize int) ([]*store.Delivery, int64, error) {
	deliveries := []*store.Delivery{}
	var total int64
	err := db.readTx(ctx, func(tx pgx.Tx) error {
		if _, err := findLoop(ctx, tx, orgID, loopID); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE loop_id = $1`, loopID).Scan(&total); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT `+deliveryColumns+` FROM deliveries WHERE loop_id = $1
			ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3`, loopID, pageSize, page*pageSize)
		if err != nil {
			return err
		}
		deliveries, err = scanDeliveries(rows)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	return deliveries, total, nil
}

// maxTaskDeliveries bounds a task's page: a task sends one event when it settles,
// and a retry sends it again under the same id.
const maxTaskDeliveries = 100

// TaskDeliveries returns the deliveries of one of the organization's tasks, newest
// first. Another organization's task is not found.
func (db *DB) TaskDeliveries(ctx context.Context, orgID, taskID string) ([]*store.Delivery, error) {
	deliveries := []*store.Delivery{}
	err := db.readTx(ctx, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM tasks WHERE id = $1 AND org_id = $2)`, taskID, orgID).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return store.TaskNotFound()
		}
		rows, err := tx.Query(ctx, `SELECT `+deliveryColumns+` FROM deliveries WHERE task_id = $1 AND org_id = $2
			ORDER BY created_at DESC, id DESC LIMIT $3`, taskID, orgID, maxTaskDeliveries)
		if err != nil {
			return err
		}
		deliveries, err = scanDeliveries(rows)
		return err
	})
	if err != nil {
		return nil, err
	}
	return deliveries, nil
}

// GetDelivery returns one of the organization's deliveries and its payload: the exact
// bytes every attempt sends. Another organization's delivery is not found.
func (db *DB) GetDelivery(ctx context.Context, orgID, id string) (*store.Delivery, []byte, error) {
	var payload string
	d, err := scanDelivery(db.pool.QueryRow(ctx, `SELECT `+deliveryColumns+`, payload FROM deliveries WHERE id = $1 AND org_id = $2`, id, orgID), &payload)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, store.DeliveryNotFound()
	}
	if err != nil {
		return nil, nil, db.readChecked(err)
	}
	return d, []byte(payload), nil
}

// RetryDelivery makes a failed or pending delivery due now, with the same id: a
// failed one gets one more attempt, a pending one has its next attempt now instead of
// later on the schedule. A pending one being attempted right now is left to that
// attempt. A delivery that succeeded cannot be retried (409 delivery_not_failed). The
// row is locked, so an attempt recorded at the same moment is either seen or waits.
func (db *DB) RetryDelivery(ctx context.Context, orgID, id string) (*store.Delivery, error) {
	var d *store.Delivery
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		d, err = scanDelivery(tx.QueryRow(ctx, `SELECT `+deliveryColumns+` FROM deliveries WHERE id = $1 AND org_id = $2 FOR UPDATE`, id, orgID))
		if errors.Is(err, pgx.ErrNoRows) {
			return store.DeliveryNotFound()
		}
		if err != nil {
			return err
		}
		if d.Status == store.DeliverySucceeded {
			return &enrich.Error{Kind: enrich.KindConflict, Code: "delivery_not_failed",
				Message: "the delivery already succeeded (its receiver acknowledged it); there is nothing to retry"}
		}
		var reason *string
		if err := tx.QueryRow(ctx, `SELECT destination_disabled_reason FROM loops WHERE id = $1`, d.LoopID).Scan(&reason); err != nil {
			return err
		}
		if reason != nil {
			return store.DestinationDisabled(*reason)
		}
		now := db.now()
		if d.Status == store.DeliveryPending && d.NextAttemptAt != nil && !d.NextAttemptAt.After(now) {
			return nil // already due, or being attempted: that attempt is the retry
		}
		d.Status, d.NextAttemptAt = store.DeliveryPending, &now
		_, err = tx.Exec(ctx, `UPDATE deliveries SET status = 'pending', next_attempt_at = $1, lease_until = NULL WHERE id = $2`, ms(now), id)
		return err
	})
	return d, err
}

// claimWindow is how many due deliveries a claim looks at per delivery it may hand
// out, as the SQLite store's window: enough to pass over Loops that have their share.
const claimWindow = 4

// dueWhere is what makes a delivery claimable at $1: pending, due, not leased.
const dueWhere = `status = 'pending' AND next_attempt_at <= $1 AND (lease_until IS NULL OR lease_until <= $1)`

// ClaimDeliveries hands out up to limit due deliveries, oldest due first, under a lease
// of the given length, never more to one Loop than perLoop less what is in flight to
// it: a slow receiver holds up only its own.
//
// With several replicas sending, what is in flight to a Loop is counted in the
// database: its pending deliveries whose lease has not run out, whoever leased them.
// That count includes this sender's own, which it also passes in inFlight; the larger
// of the two is taken (inFlight is larger when this sender's own leases ran out during
// slow sends). Two claims must not both count the same Loop as empty: a claim locks
// the Loops it hands out deliveries of (FOR NO KEY UPDATE, which the inserts of new
// deliveries do not wait for) and skips those another claim holds (SKIP LOCKED), so it
// counts only what is committed and no one adds to it meanwhile. The deliveries
// themselves are taken FOR UPDATE SKIP LOCKED too, never waiting on a retry or a
// record of attempts that holds one.
func (db *DB) ClaimDeliveries(ctx context.Context, limit, perLoop int, inFlight map[string]int, lease time.Duration) ([]*store.Dispatch, error) {
	if limit <= 0 || perLoop <= 0 {
		return nil, nil
	}
	full := []string{}
	for loop, n := range inFlight {
		if n >= perLoop {
			full = append(full, loop)
		}
	}
	// Which Loops have something due, without a write transaction when none has.
	rows, err := db.pool.Query(ctx, `SELECT DISTINCT loop_id FROM (SELECT loop_id FROM deliveries
		WHERE `+dueWhere+` AND loop_id <> ALL($2) ORDER BY next_attempt_at, id LIMIT $3) due`, ms(db.now()), full, claimWindow*limit)
	if err != nil {
		return nil, db.readChecked(err)
	}
	candidates, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(candidates) == 0 {
		return nil, db.readChecked(err)
	}
	slices.Sort(candidates)
	var out []*store.Dispatch
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		out = nil
		now := ms(db.now())
		rows, err := tx.Query(ctx, `SELECT id FROM loops WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE SKIP LOCKED`, candidates)
		if err != nil {
			return err
		}
		loops, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(loops) == 0 {
			return err
		}
		share := map[string]int{}
		for _, l := range loops {
			share[l] = perLoop - inFlight[l]
		}
		rows, err = tx.Query(ctx, `SELECT loop_id, count(*) FROM deliveries
			WHERE loop_id = ANY($1) AND status = 'pending' AND lease_until > $2 GROUP BY loop_id`, loops, now)
		if err != nil {
			return err
		}
		var loop string
		var leased int
		if _, err := pgx.ForEachRow(rows, []any{&loop, &leased}, func() error {
			share[loop] = min(share[loop], perLoop-leased)
			return nil
		}); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT id, loop_id FROM deliveries WHERE `+dueWhere+` AND loop_id = ANY($2)
			ORDER BY next_attempt_at, id LIMIT $3 FOR UPDATE SKIP LOCKED`, now, loops, claimWindow*limit)
		if err != nil {
			return err
		}
		var id string
		var ids []string
		if _, err := pgx.ForEachRow(rows, []any{&id, &loop}, func() error {
			if len(ids) < limit && share[loop] > 0 {
				share[loop]--
				ids = append(ids, id)
			}
			return nil
		}); err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		rows, err = tx.Query(ctx, `UPDATE deliveries d SET lease_until = $1 FROM loops l
			WHERE d.id = ANY($2) AND l.id = d.loop_id
			RETURNING d.id, d.loop_id, d.event, d.payload, d.attempts + 1, l.webhook_url, l.secret,
				CASE WHEN l.previous_secret_expires_at > $3 THEN coalesce(l.previous_secret, '') ELSE '' END,
				coalesce(l.destination_disabled_reason, '')`, now+lease.Milliseconds(), ids, now)
		if err != nil {
			return err
		}
		byID := map[string]*store.Dispatch{}
		if _, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct{}, error) {
			var d store.Dispatch
			var payload string
			err := r.Scan(&d.ID, &d.LoopID, &d.Event, &payload, &d.Attempt, &d.URL, &d.Secret, &d.PreviousSecret, &d.DisabledReason)
			d.Payload, d.LeaseUntil = []byte(payload), now+lease.Milliseconds()
			byID[d.ID] = &d
			return struct{}{}, err
		}); err != nil {
			return err
		}
		for _, id := range ids {
			if d := byID[id]; d != nil {
				out = append(out, d)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err // nothing was leased: nothing may be sent
	}
	return out, nil
}

// RecordAttempts writes the outcomes of attempts, in one transaction (see
// Attempt.Outcome), and what they say of each Loop's receiver (see recordHeard).
// Deliveries are updated in id order, then Loops in id order, so two replicas
// recording the same deliveries (a lease that ran out mid-send) or the same Loops wait
// on each other rather than deadlock.
func (db *DB) RecordAttempts(ctx context.Context, done []store.Attempted) error {
	sorted := slices.Clone(done)
	slices.SortFunc(sorted, func(a, b store.Attempted) int {
		switch {
		case a.Dispatch.ID < b.Dispatch.ID:
			return -1
		case a.Dispatch.ID > b.Dispatch.ID:
			return 1
		}
		return 0
	})
	return db.inTx(ctx, func(tx pgx.Tx) error {
		for _, a := range sorted {
			if err := recordAttempt(ctx, tx, a.Dispatch, a.Attempt); err != nil {
				return err
			}
		}
		for _, h := range store.HeardFrom(done) {
			if err := recordHeard(ctx, tx, h, db.now()); err != nil {
				return err
			}
		}
		return nil
	})
}

func recordAttempt(ctx context.Context, tx pgx.Tx, d *store.Dispatch, a *store.Attempt) error {
	if a == nil {
		_, err := tx.Exec(ctx, `UPDATE deliveries SET lease_until = NULL WHERE id = $1 AND status = 'pending' AND lease_until = $2`,
			d.ID, d.LeaseUntil)
		return err
	}
	if a.NotSent {
		// As failPending fails the destination's other pending deliveries.
		_, err := tx.Exec(ctx, `UPDATE deliveries SET status = 'failed', next_attempt_at = NULL, lease_until = NULL,
			last_error = $1, last_attempt_at = coalesce(last_attempt_at, $2) WHERE id = $3 AND status = 'pending' AND lease_until = $4`,
			a.Err, ms(a.At), d.ID, d.LeaseUntil)
		return err
	}
	status, nextAt := a.Outcome(d)
	var next *int64
	if nextAt != nil {
		at := ms(*nextAt)
		next = &at
	}
	var code, lastErr any
	if a.StatusCode != 0 {
		code = a.StatusCode
	}
	if a.Err != "" {
		lastErr = a.Err
	}
	_, err := tx.Exec(ctx, `UPDATE deliveries SET status = $1, attempts = $2, next_attempt_at = $3, lease_until = NULL,
		last_attempt_at = $4, last_status_code = $5, last_error = $6 WHERE id = $7 AND status = 'pending' AND lease_until = $8`,
		status, d.Attempt, next, ms(a.At), code, lastErr, d.ID, d.LeaseUntil)
	return err
}

// recordHeard keeps a Loop's failure streak and last error, and on a 410 Gone
// disables its destination. An attempt that failed while the destination was being
// disabled was rescheduled by recordAttempt: its Loop's pending deliveries are failed
// here. A batch all acknowledged writes only when a streak is to be cleared; one with
// a failure writes, whatever was acknowledged after it (see Heard.AllAcknowledged).
func recordHeard(ctx context.Context, tx pgx.Tx, h store.Heard, now time.Time) error {
	if h.AllAcknowledged() {
		_, err := tx.Exec(ctx, `UPDATE loops SET delivery_failures = 0 WHERE id = $1 AND delivery_failures <> 0`, h.LoopID)
		return err
	}
	var reason *string
	err := tx.QueryRow(ctx, `UPDATE loops SET delivery_failures = CASE WHEN $1 THEN $2 ELSE delivery_failures + $2 END,
		last_delivery_error = $3, last_delivery_error_at = $4 WHERE id = $5 RETURNING destination_disabled_reason`,
		h.Acknowledged, h.Failures, h.LastError, ms(h.LastErrorAt), h.LoopID).Scan(&reason)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil // the Loop was deleted
	case err != nil:
		return err
	case h.Gone:
		return disableDestination(ctx, tx, h.LoopID, store.ReasonGone, now)
	case reason != nil:
		return failPending(ctx, tx, h.LoopID, *reason, now)
	}
	return nil
}
