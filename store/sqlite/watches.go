package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"enrichd/store"
)

const watchColumns = `id, org_id, object_type, lookup, target, input, loop_id, every_days, fields, notify_unchanged,
	enabled, paused_reason, not_found_streak, next_run_at, last_run_at, last_task_id, baseline, created_at, updated_at`

func scanWatch(row scanner) (*store.Watch, error) {
	var w store.Watch
	var input string
	var fields, baseline sql.NullString
	var next, last sql.NullInt64
	var created, updated int64
	if err := row.Scan(&w.ID, &w.OrgID, &w.ObjectType, &w.Lookup, &w.Target, &input, &w.LoopID, &w.EveryDays, &fields,
		&w.NotifyUnchanged, &w.Enabled, &w.PausedReason, &w.NotFoundStreak, &next, &last, &w.LastTaskID, &baseline,
		&created, &updated); err != nil {
		return nil, err
	}
	w.Input = json.RawMessage(input)
	if fields.Valid {
		if err := json.Unmarshal([]byte(fields.String), &w.Fields); err != nil {
			return nil, errors.New("watch " + w.ID + ": fields column: " + err.Error())
		}
		if w.Fields == nil {
			w.Fields = []string{}
		}
	}
	if baseline.Valid {
		w.Baseline = json.RawMessage(baseline.String)
	}
	w.NextRunAt, w.LastRunAt = fromNullMS(next), fromNullMS(last)
	w.CreatedAt, w.UpdatedAt = fromMS(created), fromMS(updated)
	return &w, nil
}

// LockDueWatches: the single writer makes one scheduler's claims at a time.
func (txExec) LockDueWatches(context.Context) (bool, error) { return true, nil }

// settleWatch applies store.WatchSettled to the watch of a watch task that has just
// settled, in the transaction that settled it, and queues the events it sends to the
// watch's Loop. A deleted watch is no longer there to tell: nothing is done.
func settleWatch(ctx context.Context, tx *Tx, taskID, watchID string, fetched bool, now time.Time) error {
	w, err := scanWatch(tx.QueryRowContext(ctx, `SELECT `+watchColumns+` FROM watches WHERE id = ?`, watchID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	t, err := scanTask(tx.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id = ?`, taskID))
	if err != nil {
		return err
	}
	u := store.WatchSettled(w, t, fetched)
	var baseline any
	if u.Baseline != nil {
		baseline = string(u.Baseline)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE watches SET baseline = coalesce(?, baseline), not_found_streak = ?,
		paused_reason = coalesce(?, paused_reason),
		next_run_at = CASE WHEN ? IS NULL THEN next_run_at ELSE NULL END,
		updated_at = CASE WHEN ? IS NULL THEN updated_at ELSE ? END WHERE id = ?`,
		baseline, u.NotFoundStreak, u.PausedReason, u.PausedReason, u.PausedReason, ms(now), w.ID); err != nil {
		return err
	}
	if len(u.Events) == 0 {
		return nil
	}
	var exists int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM loops WHERE id = ?`, w.LoopID).Scan(&exists); err != nil || exists == 0 {
		return err
	}
	for _, e := range u.Events {
		if _, err := insertDelivery(ctx, tx, w.LoopID, w.OrgID, e.Event, &t.ID, e.Payload, now); err != nil {
			return err
		}
	}
	return nil
}
