package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"enrichd/store"

	"github.com/jackc/pgx/v5"
)

// lockDueWatches is the scheduler's advisory lock: one replica claims due watches at
// a time (db.go's lockBase; 0x10 and up are the queue's).
const lockDueWatches = lockBase | 0x20

// lockWatchRound is held, on a connection of its own, for a whole scheduling round
// (HoldWatchScheduler): the round reads each organization's spend once and makes its
// tasks after DueWatches commits, so two replicas' rounds at once could each spend an
// organization's monthly cap.
const lockWatchRound = lockBase | 0x21

// HoldWatchScheduler makes this replica the one scheduling watches until release is
// called, or reports false when another replica is: its session's advisory lock is
// released with release, or with the connection should the process die.
func (db *DB) HoldWatchScheduler(ctx context.Context) (release func(), ok bool, err error) {
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return nil, false, db.readChecked(err)
	}
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, lockWatchRound).Scan(&ok); err != nil || !ok {
		conn.Release()
		return nil, false, db.readChecked(err)
	}
	return func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, lockWatchRound); err != nil {
			conn.Conn().Close(context.WithoutCancel(ctx)) // closing the session releases its locks
		}
		conn.Release()
	}, true, nil
}

const watchColumns = `id, org_id, object_type, lookup, target, input, loop_id, every_days, fields, notify_unchanged,
	enabled, paused_reason, not_found_streak, next_run_at, last_run_at, last_task_id, baseline, created_at, updated_at`

func scanWatch(row pgx.Row) (*store.Watch, error) {
	var w store.Watch
	var input string
	var fields, baseline *string
	var notifyUnchanged, enabled int
	var next, last *int64
	var created, updated int64
	if err := row.Scan(&w.ID, &w.OrgID, &w.ObjectType, &w.Lookup, &w.Target, &input, &w.LoopID, &w.EveryDays, &fields,
		&notifyUnchanged, &enabled, &w.PausedReason, &w.NotFoundStreak, &next, &last, &w.LastTaskID, &baseline,
		&created, &updated); err != nil {
		return nil, err
	}
	w.Input = json.RawMessage(input)
	if fields != nil {
		if err := json.Unmarshal([]byte(*fields), &w.Fields); err != nil {
			return nil, fmt.Errorf("watch %s: fields column: %w", w.ID, err)
		}
		if w.Fields == nil {
			w.Fields = []string{} // "[]" stays an empty list, not every field
		}
	}
	if baseline != nil {
		w.Baseline = json.RawMessage(*baseline)
	}
	w.NotifyUnchanged, w.Enabled = notifyUnchanged != 0, enabled != 0
	w.NextRunAt, w.LastRunAt = fromNullMS(next), fromNullMS(last)
	w.CreatedAt, w.UpdatedAt = fromMS(created), fromMS(updated)
	return &w, nil
}

// LockDueWatches takes the scheduler's advisory lock to the end of the transaction,
// or reports false while another replica holds it.
func (e exec) LockDueWatches(ctx context.Context) (bool, error) {
	var ok bool
	err := e.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(?)`, lockDueWatches).Scan(&ok)
	return ok, err
}

// settleWatch applies a settled watch task to its watch (store.WatchSettled), in the
// transaction that settled the task, and queues the events it yields to the watch's
// Loop. A deleted watch is left alone; a watch whose Loop is gone (being deleted with
// it) sends nothing. Two tasks of one watch settling at once take its row in turn, the
// second reading the baseline the first kept.
//
// The Loop's row is taken before the watch's (the lock order: see store/watches.go), so the watch's
// loop_id is read before the watch is locked. Should a patch move the watch to another
// Loop in between, that Loop is taken after the watch: out of order, but only against a
// delete of that very Loop at the same moment, a deadlock PostgreSQL detects and inTx
// answers by settling again.
func settleWatch(ctx context.Context, tx pgx.Tx, watchID, taskID string, fetched bool, now time.Time) error {
	var loopID string
	err := tx.QueryRow(ctx, `SELECT loop_id FROM watches WHERE id = $1`, watchID).Scan(&loopID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	loopExists, err := shareLoop(ctx, tx, loopID)
	if err != nil {
		return err
	}
	w, err := scanWatch(tx.QueryRow(ctx, `SELECT `+watchColumns+` FROM watches WHERE id = $1 FOR UPDATE`, watchID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	if w.LoopID != loopID {
		if loopExists, err = shareLoop(ctx, tx, w.LoopID); err != nil {
			return err
		}
	}
	t, err := scanTask(tx.QueryRow(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id = $1`, taskID))
	if err != nil {
		return err
	}
	return applyWatchUpdate(ctx, tx, w, t, store.WatchSettled(w, t, fetched), loopExists, now)
}

// settleWatchTask is settleWatch for a task that may have no watch.
func settleWatchTask(ctx context.Context, tx pgx.Tx, watchID *string, taskID string, fetched bool, now time.Time) error {
	if watchID == nil {
		return nil
	}
	return settleWatch(ctx, tx, *watchID, taskID, fetched, now)
}

// shareLoop reports whether the Loop exists, holding its row FOR KEY SHARE: a delete
// of it waits for this transaction, and then takes the deliveries queued here with it.
func shareLoop(ctx context.Context, tx pgx.Tx, loopID string) (bool, error) {
	var exists bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM loops WHERE id = $1 FOR KEY SHARE)`, loopID).Scan(&exists)
	return exists, err
}

func applyWatchUpdate(ctx context.Context, tx pgx.Tx, w *store.Watch, t *store.Task, u store.WatchUpdate, loopExists bool, now time.Time) error {
	set := `not_found_streak = $2`
	args := []any{w.ID, u.NotFoundStreak}
	if u.Baseline != nil {
		args = append(args, string(u.Baseline))
		set += fmt.Sprintf(`, baseline = $%d`, len(args))
	}
	if u.PausedReason != nil {
		// A paused watch is not due again until it is enabled, which plans its next run.
		args = append(args, *u.PausedReason, ms(now))
		set += fmt.Sprintf(`, paused_reason = $%d, next_run_at = NULL, updated_at = $%d`, len(args)-1, len(args))
	}
	if _, err := tx.Exec(ctx, `UPDATE watches SET `+set+` WHERE id = $1`, args...); err != nil {
		return err
	}
	if !loopExists {
		return nil
	}
	for _, e := range u.Events {
		if _, err := insertDelivery(ctx, tx, w.LoopID, w.OrgID, e.Event, &t.ID, e.Payload, now); err != nil {
			return err
		}
	}
	return nil
}
