package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"enrichd/store"

	"github.com/google/uuid"
)

// The deliveries are package store's; insertDelivery and deliverSettled are left for
// this driver's queue, tasks and watches, and the claim's primitives are SQLite's.

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

// PickDueDeliveries chooses the deliveries to claim from a window of the oldest due
// ones of Loops that do not have their share (four claims' worth, as SQLite walks the
// due index): in (next_attempt_at, id) order, each Loop up to its share of what this
// sender has in flight. The single writer holds them; the statement's text is fixed
// (see store.DueDeliveries), so it is prepared once.
func (e txExec) PickDueDeliveries(ctx context.Context, now int64, limit, perLoop int, inFlight map[string]int) ([]string, error) {
	rows, err := e.tx.QueryContext(ctx, `SELECT id, loop_id `+store.DueDeliveries+`
		ORDER BY next_attempt_at, id LIMIT ?`, append(store.DueArgs(now, perLoop, inFlight), 4*limit)...)
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

// LeaseDeliveries leases each delivery by its own statement, of fixed text, prepared
// once: the Loop's columns are read by its primary key as each row is returned.
func (e txExec) LeaseDeliveries(ctx context.Context, ids []string, leaseUntil, now int64) ([]*Dispatch, error) {
	out := make([]*Dispatch, 0, len(ids))
	for _, id := range ids {
		var d Dispatch
		var payload string
		err := e.tx.QueryRowContext(ctx, `UPDATE deliveries SET lease_until = ? WHERE id = ?
			RETURNING id, loop_id, event, payload, attempts + 1,
				(SELECT webhook_url FROM loops WHERE loops.id = deliveries.loop_id),
				(SELECT secret FROM loops WHERE loops.id = deliveries.loop_id),
				(SELECT CASE WHEN previous_secret_expires_at > ? THEN coalesce(previous_secret, '') ELSE '' END
					FROM loops WHERE loops.id = deliveries.loop_id),
				(SELECT coalesce(destination_disabled_reason, '') FROM loops WHERE loops.id = deliveries.loop_id)`,
			leaseUntil, id, now).
			Scan(&d.ID, &d.LoopID, &d.Event, &payload, &d.Attempt, &d.URL, &d.Secret, &d.PreviousSecret, &d.DisabledReason)
		if err != nil {
			return nil, err
		}
		d.Payload, d.LeaseUntil = []byte(payload), leaseUntil
		out = append(out, &d)
	}
	return out, nil
}
