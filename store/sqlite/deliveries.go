package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/google/uuid"
)

const deliveryColumns = `id, loop_id, org_id, event, task_id, status, attempts, next_attempt_at, last_attempt_at,
	last_status_code, last_error, created_at`

func scanDelivery(row scanner) (*Delivery, error) {
	var d Delivery
	var next, last sql.NullInt64
	var created int64
	if err := row.Scan(&d.ID, &d.LoopID, &d.OrgID, &d.Event, &d.TaskID, &d.Status, &d.Attempts, &next, &last,
		&d.LastStatusCode, &d.LastError, &created); err != nil {
		return nil, err
	}
	d.NextAttemptAt, d.LastAttemptAt, d.CreatedAt = fromNullMS(next), fromNullMS(last), fromMS(created)
	return &d, nil
}

// scanDeliveries reads the deliveries selected as deliveryColumns, and closes the rows.
func scanDeliveries(rows *sql.Rows) ([]*Delivery, error) {
	defer rows.Close()
	out := []*Delivery{}
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// insertDelivery writes a pending delivery, due at once; or, when the Loop's
// destination is disabled, a failed one that says why (retried once it is enabled).
func insertDelivery(ctx context.Context, tx *Tx, loopID, orgID, event string, taskID *string, payload []byte, now time.Time) (*Delivery, error) {
	d := &Delivery{ID: uuid.Must(uuid.NewV7()).String(), LoopID: loopID, OrgID: orgID, Event: event, TaskID: taskID, CreatedAt: now}
	before, after := store.NotSentErrorParts()
	var next, last sql.NullInt64
	err := tx.QueryRowContext(ctx, `INSERT INTO deliveries (id, loop_id, org_id, event, task_id, payload, status, next_attempt_at,
			last_error, last_attempt_at, created_at)
		SELECT ?, id, ?, ?, ?, ?, CASE WHEN destination_disabled_at IS NULL THEN 'pending' ELSE 'failed' END,
			CASE WHEN destination_disabled_at IS NULL THEN ? END,
			CASE WHEN destination_disabled_at IS NOT NULL THEN ? || destination_disabled_reason || ? END,
			CASE WHEN destination_disabled_at IS NOT NULL THEN ? END, ?
		FROM loops WHERE id = ?
		RETURNING status, next_attempt_at, last_error, last_attempt_at`,
		d.ID, orgID, event, taskID, string(payload), ms(now), before, after, ms(now), ms(now), loopID).
		Scan(&d.Status, &next, &d.LastError, &last)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.LoopNotFound()
	}
	d.NextAttemptAt, d.LastAttemptAt = fromNullMS(next), fromNullMS(last)
	return d, err
}

// deliverSettled queues the task.succeeded or task.failed event of a task that has just
// settled, in the transaction that settled it, so that no crash can lose it. A task
// without a Loop, or whose Loop was deleted, sends nothing; a canceled one neither.
// The caller passes the task's loop_id, which it has read anyway: most tasks have
// none, and then nothing more is read.
func deliverSettled(ctx context.Context, tx *Tx, taskID string, loopID *string, now time.Time) error {
	if loopID == nil {
		return nil
	}
	t, err := scanTask(tx.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id = ?`, taskID))
	if err != nil {
		return err
	}
	if t.LoopID == nil {
		return nil
	}
	var exists int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM loops WHERE id = ?`, *t.LoopID).Scan(&exists); err != nil || exists == 0 {
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
func (db *DB) CreateTestDelivery(ctx context.Context, orgID, loopID string) (*Delivery, error) {
	var d *Delivery
	err := db.inTx(ctx, func(tx *Tx) error {
		if _, err := findLoop(ctx, tx, orgID, loopID); err != nil {
			return err
		}
		payload, err := store.TestEventPayload()
		if err != nil {
			return err
		}
		d, err = insertDelivery(ctx, tx, loopID, orgID, EventTest, nil, payload, db.now())
		return err
	})
	return d, err
}

const listDeliveriesQuery = `SELECT ` + deliveryColumns + ` FROM deliveries WHERE loop_id = ?
	ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`

// ListDeliveries returns a page of a Loop's deliveries, newest first, and how many it
// has in all.
func (db *DB) ListDeliveries(ctx context.Context, orgID, loopID string, page, pageSize int) ([]*Delivery, int64, error) {
	deliveries := []*Delivery{}
	var total int64
	err := db.inReadTx(ctx, func(tx *Tx) error {
		if _, err := findLoop(ctx, tx, orgID, loopID); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM deliveries WHERE loop_id = ?`, loopID).Scan(&total); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, listDeliveriesQuery, loopID, pageSize, page*pageSize)
		if err != nil {
			return err
		}
		deliveries, err = scanDeliveries(rows)
		return err
	})
	return deliveries, total, err
}

// maxTaskDeliveries bounds a task's page: a task sends one event when it settles,
// and a retry sends it again under the same id.
const maxTaskDeliveries = 100

const taskDeliveriesQuery = `SELECT ` + deliveryColumns + ` FROM deliveries WHERE task_id = ? AND org_id = ?
	ORDER BY created_at DESC, id DESC LIMIT ?`

// TaskDeliveries returns the deliveries of one of the organization's tasks, newest
// first. Another organization's task is not found.
func (db *DB) TaskDeliveries(ctx context.Context, orgID, taskID string) ([]*Delivery, error) {
	deliveries := []*Delivery{}
	err := db.inReadTx(ctx, func(tx *Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM tasks WHERE id = ? AND org_id = ?`, taskID, orgID).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return store.TaskNotFound()
		}
		rows, err := tx.QueryContext(ctx, taskDeliveriesQuery, taskID, orgID, maxTaskDeliveries)
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
func (db *DB) GetDelivery(ctx context.Context, orgID, id string) (*Delivery, []byte, error) {
	var payload string
	var d Delivery
	var next, last sql.NullInt64
	var created int64
	err := db.read.QueryRowContext(ctx, `SELECT `+deliveryColumns+`, payload FROM deliveries WHERE id = ? AND org_id = ?`, id, orgID).
		Scan(&d.ID, &d.LoopID, &d.OrgID, &d.Event, &d.TaskID, &d.Status, &d.Attempts, &next, &last,
			&d.LastStatusCode, &d.LastError, &created, &payload)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, store.DeliveryNotFound()
	}
	if err != nil {
		return nil, nil, err
	}
	d.NextAttemptAt, d.LastAttemptAt, d.CreatedAt = fromNullMS(next), fromNullMS(last), fromMS(created)
	return &d, []byte(payload), nil
}

// RetryDelivery makes a failed or pending delivery due now, with the same id: a
// failed one gets one more attempt, a pending one has its next attempt now instead of
// later on the schedule (a receiver that was down need not wait hours). A pending one
// being attempted right now is left to that attempt. A delivery that succeeded cannot
// be retried (409 delivery_not_failed).
func (db *DB) RetryDelivery(ctx context.Context, orgID, id string) (*Delivery, error) {
	var d *Delivery
	err := db.inTx(ctx, func(tx *Tx) error {
		var err error
		d, err = scanDelivery(tx.QueryRowContext(ctx, `SELECT `+deliveryColumns+` FROM deliveries WHERE id = ? AND org_id = ?`, id, orgID))
		if errors.Is(err, sql.ErrNoRows) {
			return store.DeliveryNotFound()
		}
		if err != nil {
			return err
		}
		if d.Status == DeliverySucceeded {
			return &enrich.Error{Kind: enrich.KindConflict, Code: "delivery_not_failed",
				Message: "the delivery already succeeded (its receiver acknowledged it); there is nothing to retry"}
		}
		var reason sql.NullString
		if err := tx.QueryRowContext(ctx, `SELECT destination_disabled_reason FROM loops WHERE id = ?`, d.LoopID).Scan(&reason); err != nil {
			return err
		}
		if reason.Valid {
			return store.DestinationDisabled(reason.String)
		}
		now := db.now()
		if d.Status == DeliveryPending && d.NextAttemptAt != nil && !d.NextAttemptAt.After(now) {
			return nil // already due, or being attempted: that attempt is the retry
		}
		d.Status, d.NextAttemptAt = DeliveryPending, &now
		// A pending delivery is not leased here: its next attempt was later, and a
		// lease is taken only when an attempt is due.
		_, err = tx.ExecContext(ctx, `UPDATE deliveries SET status = 'pending', next_attempt_at = ?, lease_until = NULL WHERE id = ?`, ms(now), id)
		return err
	})
	return d, err
}

// ClaimDeliveries hands out up to limit due deliveries, oldest due first, under a lease
// of the given length, never more to one Loop than perLoop less what the sender already
// has in flight to it (inFlight, by Loop): a slow receiver holds up only its own.
//
// The statements are fixed text with plain parameters: an earlier single statement
// passed the Loops' counts as JSON to json_each, and SQLite compiled it anew on every
// run because its plan depended on that parameter, which cost the writer a tenth of
// its time under a mixed load. The Loops that have their share are left out by a
// fixed list of parameters instead, and a claim with nothing due does not take the
// writer.
func (db *DB) ClaimDeliveries(ctx context.Context, limit, perLoop int, inFlight map[string]int, lease time.Duration) ([]*Dispatch, error) {
	if limit <= 0 {
		return nil, nil
	}
	full := fullLoops(perLoop, inFlight)
	var due bool
	err := db.read.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 `+dueDeliveries+`)`, dueArgs(ms(db.now()), full)...).Scan(&due)
	if err != nil || !due {
		return nil, err
	}
	var out []*Dispatch
	err = db.inTx(ctx, func(tx *Tx) error {
		ids, err := pickDue(ctx, tx, ms(db.now()), limit, perLoop, inFlight, full)
		if err != nil {
			return err
		}
		leaseUntil := ms(db.now().Add(lease))
		for _, id := range ids {
			var d Dispatch
			var payload string
			err := tx.QueryRowContext(ctx, `UPDATE deliveries SET lease_until = ? WHERE id = ?
				RETURNING id, loop_id, event, payload, attempts + 1,
					(SELECT webhook_url FROM loops WHERE loops.id = deliveries.loop_id),
					(SELECT secret FROM loops WHERE loops.id = deliveries.loop_id),
					(SELECT CASE WHEN previous_secret_expires_at > ? THEN coalesce(previous_secret, '') ELSE '' END
						FROM loops WHERE loops.id = deliveries.loop_id),
					(SELECT coalesce(destination_disabled_reason, '') FROM loops WHERE loops.id = deliveries.loop_id)`,
				leaseUntil, id, ms(db.now())).
				Scan(&d.ID, &d.LoopID, &d.Event, &payload, &d.Attempt, &d.URL, &d.Secret, &d.PreviousSecret, &d.DisabledReason)
			if err != nil {
				return err
			}
			d.Payload, d.LeaseUntil = []byte(payload), leaseUntil
			out = append(out, &d)
		}
		return nil
	})
	if err != nil {
		return nil, err // nothing was leased: nothing may be sent
	}
	return out, nil
}

// skipLoops is how many Loops that have their share the due scan leaves out by
// itself: the sender's 64 deliveries in flight, at most 8 to one Loop, make at most 8
// such Loops. Past that many, the rest are skipped as the scan reads them.
const skipLoops = 16

// dueDeliveries is the FROM and WHERE of the deliveries a claim may take: pending,
// due, not leased, of a Loop that is not among the full ones; dueArgs gives its
// parameters.
var dueDeliveries = `FROM deliveries
	WHERE status = 'pending' AND next_attempt_at <= ? AND (lease_until IS NULL OR lease_until <= ?)
	  AND loop_id NOT IN (` + strings.TrimSuffix(strings.Repeat("?, ", skipLoops), ", ") + `)`

func dueArgs(now int64, full []any) []any {
	return append([]any{now, now}, full...)
}

// fullLoops lists the Loops that have their share in flight, as skipLoops parameters:
// the first skipLoops of them, then empty ids that match no Loop.
func fullLoops(perLoop int, inFlight map[string]int) []any {
	full := make([]any, 0, skipLoops)
	for loop, n := range inFlight {
		if n >= perLoop && len(full) < skipLoops {
			full = append(full, loop)
		}
	}
	for len(full) < skipLoops {
		full = append(full, "")
	}
	return full
}

// pickDue chooses the deliveries to claim from a window of the oldest due ones of
// Loops that do not have their share (four claims' worth, as SQLite walks the due
// index): in (next_attempt_at, id) order, each Loop up to its share.
func pickDue(ctx context.Context, tx *Tx, now int64, limit, perLoop int, inFlight map[string]int, full []any) ([]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, loop_id `+dueDeliveries+`
		ORDER BY next_attempt_at, id LIMIT ?`, append(dueArgs(now, full), 4*limit)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	taken := map[string]int{}
	var ids []string
	for rows.Next() && len(ids) < limit {
		var id, loop string
		if err := rows.Scan(&id, &loop); err != nil {
			return nil, err
		}
		if inFlight[loop]+taken[loop] < perLoop {
			taken[loop]++
			ids = append(ids, id)
		}
	}
	return ids, rows.Err()
}

// RecordAttempts writes the outcomes of attempts, in one transaction (see
// Attempt.Outcome), and what they say of each Loop's receiver (see recordHeard).
func (db *DB) RecordAttempts(ctx context.Context, done []Attempted) error {
	return db.inTx(ctx, func(tx *Tx) error {
		for _, a := range done {
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

func recordAttempt(ctx context.Context, tx *Tx, d *Dispatch, a *Attempt) error {
	if a == nil {
		_, err := tx.ExecContext(ctx, `UPDATE deliveries SET lease_until = NULL WHERE id = ? AND status = 'pending' AND lease_until = ?`,
			d.ID, d.LeaseUntil)
		return err
	}
	if a.NotSent {
		// As failPending fails the destination's other pending deliveries.
		_, err := tx.ExecContext(ctx, `UPDATE deliveries SET status = 'failed', next_attempt_at = NULL, lease_until = NULL,
			last_error = ?, last_attempt_at = coalesce(last_attempt_at, ?) WHERE id = ? AND status = 'pending' AND lease_until = ?`,
			a.Err, ms(a.At), d.ID, d.LeaseUntil)
		return err
	}
	status, nextAt := a.Outcome(d)
	next := sql.NullInt64{}
	if nextAt != nil {
		next = sql.NullInt64{Int64: ms(*nextAt), Valid: true}
	}
	var code, lastErr any
	if a.StatusCode != 0 {
		code = a.StatusCode
	}
	if a.Err != "" {
		lastErr = a.Err
	}
	_, err := tx.ExecContext(ctx, `UPDATE deliveries SET status = ?, attempts = ?, next_attempt_at = ?, lease_until = NULL,
		last_attempt_at = ?, last_status_code = ?, last_error = ? WHERE id = ? AND status = 'pending' AND lease_until = ?`,
		status, d.Attempt, next, ms(a.At), code, lastErr, d.ID, d.LeaseUntil)
	return err
}

// recordHeard keeps a Loop's failure streak and last error, and on a 410 Gone
// disables its destination. An attempt that failed while the destination was being
// disabled was rescheduled by recordAttempt: its Loop's pending deliveries are failed
// here. A batch all acknowledged writes only when a streak is to be cleared; one with
// a failure writes, whatever was acknowledged after it (see Heard.AllAcknowledged).
func recordHeard(ctx context.Context, tx *Tx, h store.Heard, now time.Time) error {
	if h.AllAcknowledged() {
		_, err := tx.ExecContext(ctx, `UPDATE loops SET delivery_failures = 0 WHERE id = ? AND delivery_failures <> 0`, h.LoopID)
		return err
	}
	var reason sql.NullString
	err := tx.QueryRowContext(ctx, `UPDATE loops SET delivery_failures = CASE WHEN ? THEN ? ELSE delivery_failures + ? END,
		last_delivery_error = ?, last_delivery_error_at = ? WHERE id = ? RETURNING destination_disabled_reason`,
		h.Acknowledged, h.Failures, h.Failures, h.LastError, ms(h.LastErrorAt), h.LoopID).Scan(&reason)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil // the Loop was deleted
	case err != nil:
		return err
	case h.Gone:
		return disableDestination(ctx, tx, h.LoopID, store.ReasonGone, now)
	case reason.Valid:
		return failPending(ctx, tx, h.LoopID, reason.String, now)
	}
	return nil
}
