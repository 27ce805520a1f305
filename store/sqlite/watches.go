package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"enrichd/enrich"
	"enrichd/store"
	"enrichd/watch"

	"github.com/google/uuid"
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

func fieldsColumn(fields []string) (any, error) {
	if fields == nil {
		return nil, nil
	}
	b, err := json.Marshal(fields)
	return string(b), err
}

func findWatch(ctx context.Context, q querier, orgID, id string) (*store.Watch, error) {
	w, err := scanWatch(q.QueryRowContext(ctx, `SELECT `+watchColumns+` FROM watches WHERE id = ? AND org_id = ?`, id, orgID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.WatchNotFound()
	}
	return w, err
}

// CreateWatch creates a watch for one of the organization's Loops, which must take the
// watch's object type. An enabled watch is first due at nw.FirstRunAt; a disabled one
// is not due until it is enabled.
func (db *DB) CreateWatch(ctx context.Context, nw store.NewWatch) (*store.Watch, error) {
	var w *store.Watch
	err := db.inTx(ctx, func(tx *Tx) error {
		var err error
		w, err = db.createWatch(ctx, tx, nw, db.now())
		return err
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// CreateWatches creates the watches of an import in one transaction; each row that
// is refused (a bad row, a duplicate, another organization's Loop) fails alone, with
// its own error, and the others are created.
func (db *DB) CreateWatches(ctx context.Context, nws []store.NewWatch) ([]store.WatchResult, error) {
	if len(nws) > store.MaxWatchImport {
		return nil, enrich.Errorf(enrich.KindInvalid, "watches: at most %d in one import, not %d", store.MaxWatchImport, len(nws))
	}
	var out []store.WatchResult
	err := db.inTx(ctx, func(tx *Tx) error {
		out = make([]store.WatchResult, len(nws))
		now := db.now()
		for i, nw := range nws {
			w, err := db.createWatch(ctx, tx, nw, now)
			var refused *enrich.Error
			if err != nil && !errors.As(err, &refused) {
				return err // the database failed: nothing of the import is kept
			}
			out[i] = store.WatchResult{Watch: w, Err: err}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// createWatch checks and writes one watch. Every refusal is decided before the
// INSERT, so that a refused row of an import has written nothing.
func (db *DB) createWatch(ctx context.Context, tx *Tx, nw store.NewWatch, now time.Time) (*store.Watch, error) {
	if err := store.CheckNewWatch(nw); err != nil {
		return nil, err
	}
	if err := checkWatchLoop(ctx, tx, nw.OrgID, nw.LoopID, nw.ObjectType); err != nil {
		return nil, err
	}
	if err := checkWatchUnique(ctx, tx, nw.OrgID, nw.LoopID, nw.Input.Lookup, nw.Input.Target, ""); err != nil {
		return nil, err
	}
	w := &store.Watch{ID: uuid.Must(uuid.NewV7()).String(), ObjectType: nw.ObjectType, Input: nw.RawInput, LoopID: nw.LoopID,
		EveryDays: nw.EveryDays, Fields: nw.Fields, NotifyUnchanged: nw.NotifyUnchanged, Enabled: nw.Enabled,
		CreatedAt: now, UpdatedAt: now, OrgID: nw.OrgID, Lookup: nw.Input.Lookup, Target: nw.Input.Target}
	if len(w.Input) == 0 {
		w.Input = json.RawMessage("{}")
	}
	if nw.Enabled {
		first := nw.FirstRunAt.UTC().Truncate(time.Millisecond)
		if nw.FirstRunAt.IsZero() {
			first = now
		}
		w.NextRunAt = &first
	}
	fields, err := fieldsColumn(w.Fields)
	if err != nil {
		return nil, err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO watches (id, org_id, object_type, lookup, target, input, loop_id, every_days,
		fields, notify_unchanged, enabled, not_found_streak, next_run_at, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?)`,
		w.ID, w.OrgID, w.ObjectType, w.Lookup, w.Target, string(w.Input), w.LoopID, w.EveryDays, fields,
		w.NotifyUnchanged, w.Enabled, nullMS(w.NextRunAt), ms(now), ms(now))
	if err != nil {
		return nil, err
	}
	return w, nil
}

// checkWatchLoop is what a watch's Loop must be: the organization's (another's is not
// found, as everywhere), and of the watch's object type. A disabled Loop may be
// watched for: its events wait in its deliveries like those of any task in flight.
func checkWatchLoop(ctx context.Context, tx *Tx, orgID, loopID, objectType string) error {
	if len(loopID) > 100 {
		return store.LoopNotFound() // no Loop has such an id
	}
	l, err := findLoop(ctx, tx, orgID, loopID)
	if err != nil {
		return err
	}
	if l.ObjectType != objectType {
		return store.WatchLoopMismatch(l.Slug, l.ObjectType, objectType)
	}
	return nil
}

// checkWatchUnique refuses a second watch of one input for one Loop (self, the watch
// being changed, excepted).
func checkWatchUnique(ctx context.Context, tx *Tx, orgID, loopID string, lookup enrich.Lookup, target, self string) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM watches WHERE org_id = ? AND loop_id = ? AND lookup = ? AND target = ? AND id != ?`,
		orgID, loopID, lookup, target, self).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return store.WatchExists()
	}
	return nil
}

// GetWatch returns one of the organization's watches; another organization's is not
// found.
func (db *DB) GetWatch(ctx context.Context, orgID, id string) (*store.Watch, error) {
	return findWatch(ctx, db.read, orgID, id)
}

const (
	listWatchesQuery = `SELECT ` + watchColumns + ` FROM watches INDEXED BY watches_org_created WHERE org_id = ?
		ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`
	listLoopWatchesQuery = `SELECT ` + watchColumns + ` FROM watches INDEXED BY watches_org_loop_created
		WHERE org_id = ? AND loop_id = ? ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`
	countWatchesQuery     = `SELECT count(*) FROM watches INDEXED BY watches_org_created WHERE org_id = ?`
	countLoopWatchesQuery = `SELECT count(*) FROM watches INDEXED BY watches_org_loop_created WHERE org_id = ? AND loop_id = ?`
)

// ListWatches returns a page of the organization's watches, newest first, and how
// many match the filter in all.
func (db *DB) ListWatches(ctx context.Context, orgID string, f store.WatchFilter) ([]*store.Watch, int64, error) {
	page, size := store.WatchPage(f)
	watches := []*store.Watch{}
	var total int64
	if len(f.LoopID) > 100 {
		return watches, 0, nil // no Loop has such an id
	}
	err := db.inReadTx(ctx, func(tx *Tx) error {
		count, list, args := countWatchesQuery, listWatchesQuery, []any{orgID}
		if f.LoopID != "" {
			count, list, args = countLoopWatchesQuery, listLoopWatchesQuery, append(args, f.LoopID)
		}
		if err := tx.QueryRowContext(ctx, count, args...).Scan(&total); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, list, append(args, size, page*size)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			w, err := scanWatch(rows)
			if err != nil {
				return err
			}
			watches = append(watches, w)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, 0, err
	}
	return watches, total, nil
}

// UpdateWatch changes what the patch sets. Enabling a watch clears why it paused and
// its not_found streak; disabling it, or a pause, leaves it without a next run. The
// caller plans the next run (p.NextRunAt) when it enables the watch or changes
// every_days; a watch that cannot run keeps none.
func (db *DB) UpdateWatch(ctx context.Context, orgID, id string, p store.WatchPatch) (*store.Watch, error) {
	if err := store.CheckWatchPatch(p); err != nil {
		return nil, err
	}
	var w *store.Watch
	err := db.inTx(ctx, func(tx *Tx) error {
		var err error
		if w, err = findWatch(ctx, tx, orgID, id); err != nil {
			return err
		}
		if p.LoopID != nil && *p.LoopID != w.LoopID {
			if err := checkWatchLoop(ctx, tx, orgID, *p.LoopID, w.ObjectType); err != nil {
				return err
			}
			if err := checkWatchUnique(ctx, tx, orgID, *p.LoopID, w.Lookup, w.Target, w.ID); err != nil {
				return err
			}
		}
		if p.Fields != nil {
			if err := store.CheckWatchFields(w.ObjectType, *p.Fields); err != nil {
				return err
			}
		}
		store.ApplyWatchPatch(w, p, db.now())
		fields, err := fieldsColumn(w.Fields)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE watches SET loop_id = ?, every_days = ?, fields = ?, notify_unchanged = ?, enabled = ?,
			paused_reason = ?, not_found_streak = ?, next_run_at = ?, updated_at = ? WHERE id = ?`,
			w.LoopID, w.EveryDays, fields, w.NotifyUnchanged, w.Enabled, w.PausedReason, w.NotFoundStreak,
			nullMS(w.NextRunAt), ms(w.UpdatedAt), w.ID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// DeleteWatch deletes one of the organization's watches; its tasks stay.
func (db *DB) DeleteWatch(ctx context.Context, orgID, id string) error {
	return db.inTx(ctx, func(tx *Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM watches WHERE id = ? AND org_id = ?`, id, orgID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err == nil {
				err = store.WatchNotFound()
			}
			return err
		}
		return nil
	})
}

// SetWatchCap sets the most credits the organization's watch tasks may be charged in
// a UTC month; nil removes the cap.
func (db *DB) SetWatchCap(ctx context.Context, orgName string, limit *int64) error {
	if err := store.CheckWatchCap(limit); err != nil {
		return err
	}
	return db.inTx(ctx, func(tx *Tx) error {
		org, err := findOrg(ctx, tx, orgName)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE orgs SET watch_monthly_cap = ? WHERE id = ?`, limit, org.ID)
		return err
	})
}

// watchSpendQuery sums the credits of the organization's watch tasks created since a
// time: failed and canceled tasks were refunded, and cost nothing.
const watchSpendQuery = `SELECT coalesce(sum(credits_charged), 0) FROM tasks INDEXED BY tasks_org_watch_created
	WHERE org_id = ? AND watch_id IS NOT NULL AND created_at >= ? AND status IN ('queued', 'running', 'succeeded')`

// WatchSpend returns what the organization's watch tasks created since monthStart
// were charged, less refunds, and its monthly cap (nil: none).
func (db *DB) WatchSpend(ctx context.Context, orgID string, monthStart time.Time) (spent int64, limit *int64, err error) {
	err = db.inReadTx(ctx, func(tx *Tx) error {
		var err error
		spent, limit, err = watchSpend(ctx, tx, orgID, monthStart)
		return err
	})
	return spent, limit, err
}

func watchSpend(ctx context.Context, q querier, orgID string, monthStart time.Time) (int64, *int64, error) {
	var spent int64
	if err := q.QueryRowContext(ctx, watchSpendQuery, orgID, ms(monthStart)).Scan(&spent); err != nil {
		return 0, nil, err
	}
	var limit *int64
	err := q.QueryRowContext(ctx, `SELECT watch_monthly_cap FROM orgs WHERE id = ?`, orgID).Scan(&limit)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, nil, err
	}
	return spent, limit, nil
}

// dueWatchesQuery picks the due watches, oldest due first, at most perOrg of each
// organization: one organization's thousand due watches do not hold up another's.
// It reads only the due index's range and the ids; the rows picked are read after.
const dueWatchesQuery = `SELECT id FROM (
		SELECT id, next_run_at, row_number() OVER (PARTITION BY org_id ORDER BY next_run_at, id) AS n
		FROM watches INDEXED BY watches_due
		WHERE enabled = 1 AND paused_reason IS NULL AND next_run_at <= ?)
	WHERE n <= ? ORDER BY next_run_at, id LIMIT ?`

// DueWatches claims the watches due at now, at most limit and perOrg of each
// organization: it moves their next run store.WatchRetry on in the same transaction,
// so that a crash or a refused enqueue retries later and no other scheduler takes
// them meanwhile. Each comes with its organization's watch spend this UTC month and
// its cap. The Watch returned keeps the next_run_at it was due at, which the
// scheduler plans the next run from (watch.NextRun).
func (db *DB) DueWatches(ctx context.Context, now time.Time, limit, perOrg int) ([]store.DueWatch, error) {
	if limit <= 0 || perOrg <= 0 {
		return nil, nil
	}
	var due []store.DueWatch
	err := db.inTx(ctx, func(tx *Tx) error {
		due = nil // a retried transaction starts again
		rows, err := tx.QueryContext(ctx, dueWatchesQuery, ms(now), perOrg, limit)
		if err != nil {
			return err
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		if err := rows.Err(); err != nil {
			rows.Close()
			return err
		}
		if err := rows.Close(); err != nil {
			return err
		}
		type spend struct {
			spent int64
			limit *int64
		}
		spends := map[string]spend{}
		retry := ms(now.Add(store.WatchRetry))
		for _, id := range ids {
			w, err := scanWatch(tx.QueryRowContext(ctx, `SELECT `+watchColumns+` FROM watches WHERE id = ?`, id))
			if err != nil {
				return err
			}
			// A watch claimed before and never recorded (its process stopped, or its
			// check was refused) keeps the due time of that first claim: the check's
			// key names it, and the next run is planned from it.
			var claimedDue int64
			if err := tx.QueryRowContext(ctx, `UPDATE watches SET claimed_due_at = coalesce(claimed_due_at, next_run_at), next_run_at = ?
				WHERE id = ? RETURNING claimed_due_at`, retry, id).Scan(&claimedDue); err != nil {
				return err
			}
			dueAt := fromMS(claimedDue)
			w.NextRunAt = &dueAt
			s, ok := spends[w.OrgID]
			if !ok {
				if s.spent, s.limit, err = watchSpend(ctx, tx, w.OrgID, watch.MonthStart(now)); err != nil {
					return err
				}
				spends[w.OrgID] = s
			}
			due = append(due, store.DueWatch{Watch: w, MonthSpend: s.spent, MonthlyCap: s.limit})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return due, nil
}

// WatchScheduled records the task a watch's run enqueued, when, and when the watch is
// next due. A watch disabled or paused meanwhile keeps no next run.
func (db *DB) WatchScheduled(ctx context.Context, orgID, id, taskID string, ranAt, next time.Time) error {
	return db.updateWatchRun(ctx, orgID, id, `last_run_at = ?, last_task_id = ?, `, []any{ms(ranAt), taskID}, next)
}

// DeferWatch moves a watch's next run to next and changes nothing else: where a watch
// held by its organization's monthly cap waits.
func (db *DB) DeferWatch(ctx context.Context, orgID, id string, next time.Time) error {
	return db.updateWatchRun(ctx, orgID, id, ``, nil, next)
}

func (db *DB) updateWatchRun(ctx context.Context, orgID, id, set string, args []any, next time.Time) error {
	return db.inTx(ctx, func(tx *Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE watches SET `+set+` claimed_due_at = NULL,
			next_run_at = CASE WHEN enabled = 1 AND paused_reason IS NULL THEN ? ELSE next_run_at END
			WHERE id = ? AND org_id = ?`, append(args, ms(next), id, orgID)...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err == nil {
				err = store.WatchNotFound()
			}
			return err
		}
		return nil
	})
}

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
