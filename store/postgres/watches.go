package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"enrichd/enrich"
	"enrichd/store"
	"enrichd/watch"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Watches and the lock order. A watch's row comes after its Loop's everywhere: Settle
// takes the task, the task's results, counts and grants (see CreateTask), then the
// watch's Loop FOR KEY SHARE, then the watch FOR UPDATE; a Loop's delete takes the
// Loop and then, by its cascade, the watch; a patch that moves a watch to another Loop
// takes that Loop before the watch. Nothing takes a watch and then a task, a grant or
// a Loop, so the watch rows close every chain of waits and cannot be part of a circle.
// The scheduler (DueWatches) takes watches only, skipping the locked ones.

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

// fieldsColumn is the watched fields as the column keeps them: NULL for every field.
func fieldsColumn(fields []string) (any, error) {
	if fields == nil {
		return nil, nil
	}
	b, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// lockWatchLoop reads the organization's Loop for a watch FOR KEY SHARE, so that the
// Loop cannot be deleted before the watch that names it commits (the delete waits and
// then takes the watch with it), and checks it takes the watch's object type.
// Another organization's Loop is not found, the same as one that does not exist.
func lockWatchLoop(ctx context.Context, tx pgx.Tx, orgID, loopID, objectType string) error {
	if len(loopID) > 100 {
		return store.LoopNotFound() // no Loop has such an id
	}
	var slug, loopType string
	err := tx.QueryRow(ctx, `SELECT slug, object_type FROM loops WHERE id = $1 AND org_id = $2 FOR KEY SHARE`,
		loopID, orgID).Scan(&slug, &loopType)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.LoopNotFound()
	}
	if err != nil {
		return err
	}
	if loopType != objectType {
		return store.WatchLoopMismatch(slug, loopType, objectType)
	}
	return nil
}

// CreateWatch creates a watch for one of the organization's Loops, which must take the
// watch's object type. An enabled watch is first due at nw.FirstRunAt (now if unset);
// a disabled one is not due until it is enabled.
func (db *DB) CreateWatch(ctx context.Context, nw store.NewWatch) (*store.Watch, error) {
	var w *store.Watch
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		w, err = db.createWatch(ctx, tx, nw, db.now())
		return err
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// CreateWatches creates each watch it can in one transaction; a row that cannot be
// created (its Loop, a duplicate) fails alone, with its error in its result. Only a
// database error fails them all.
func (db *DB) CreateWatches(ctx context.Context, nws []store.NewWatch) ([]store.WatchResult, error) {
	if len(nws) > store.MaxWatchImport {
		return nil, enrich.Errorf(enrich.KindInvalid, "watches: at most %d in one import, not %d", store.MaxWatchImport, len(nws))
	}
	var out []store.WatchResult
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		out = make([]store.WatchResult, len(nws))
		now := db.now()
		for i, nw := range nws {
			w, err := db.createWatch(ctx, tx, nw, now)
			var e *enrich.Error
			switch {
			case errors.As(err, &e):
				// createWatch fails a row before it writes anything, so the
				// transaction goes on for the others.
				out[i].Err = err
			case err != nil:
				return err
			default:
				out[i].Watch = w
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// createWatch inserts a watch, or fails with an *enrich.Error before writing anything:
// the unique key is claimed with ON CONFLICT DO NOTHING, not by a violation that would
// abort the transaction (CreateWatches goes on after a duplicate). A second request
// for the same key at once waits for the first's transaction, then finds it taken.
func (db *DB) createWatch(ctx context.Context, tx pgx.Tx, nw store.NewWatch, now time.Time) (*store.Watch, error) {
	if err := store.CheckNewWatch(nw); err != nil {
		return nil, err
	}
	if err := lockWatchLoop(ctx, tx, nw.OrgID, nw.LoopID, nw.ObjectType); err != nil {
		return nil, err
	}
	w := &store.Watch{
		ID: uuid.Must(uuid.NewV7()).String(), OrgID: nw.OrgID, ObjectType: nw.ObjectType, Lookup: nw.Input.Lookup,
		Target: nw.Input.Target, Input: nw.RawInput, LoopID: nw.LoopID, EveryDays: nw.EveryDays, Fields: nw.Fields,
		NotifyUnchanged: nw.NotifyUnchanged, Enabled: nw.Enabled, CreatedAt: now, UpdatedAt: now,
	}
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
	tag, err := tx.Exec(ctx, `INSERT INTO watches (id, org_id, object_type, lookup, target, input, loop_id, every_days, fields,
		notify_unchanged, enabled, next_run_at, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
		ON CONFLICT (org_id, loop_id, lookup, target) DO NOTHING`,
		w.ID, w.OrgID, w.ObjectType, string(w.Lookup), w.Target, string(w.Input), w.LoopID, w.EveryDays, fields,
		b2i(w.NotifyUnchanged), b2i(w.Enabled), nullMS(w.NextRunAt), ms(now), ms(now))
	if err != nil {
		return nil, err
	}
	if tag.RowsAffected() == 0 {
		return nil, store.WatchExists()
	}
	return w, nil
}

func findWatch(ctx context.Context, q querier, orgID, id, lock string) (*store.Watch, error) {
	w, err := scanWatch(q.QueryRow(ctx, `SELECT `+watchColumns+` FROM watches WHERE id = $1 AND org_id = $2`+lock, id, orgID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.WatchNotFound()
	}
	return w, err
}

// GetWatch returns one of the organization's watches; another organization's is not
// found, the same as one that does not exist.
func (db *DB) GetWatch(ctx context.Context, orgID, id string) (*store.Watch, error) {
	w, err := findWatch(ctx, db.pool, orgID, id, "")
	return w, db.readChecked(err)
}

const (
	listWatchesQuery = `SELECT ` + watchColumns + ` FROM watches WHERE org_id = $1
		ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3`
	listLoopWatchesQuery = `SELECT ` + watchColumns + ` FROM watches WHERE org_id = $1 AND loop_id = $4
		ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3`
)

// ListWatches returns a page of the organization's watches, newest first, optionally
// of one Loop, and how many match in all, from one snapshot.
func (db *DB) ListWatches(ctx context.Context, orgID string, f store.WatchFilter) ([]*store.Watch, int64, error) {
	page, size := store.WatchPage(f)
	watches := []*store.Watch{}
	var total int64
	if len(f.LoopID) > 100 {
		return watches, 0, nil // no Loop has such an id
	}
	err := db.readTx(ctx, func(tx pgx.Tx) error {
		count, list, countArgs := `SELECT count(*) FROM watches WHERE org_id = $1`, listWatchesQuery, []any{orgID}
		if f.LoopID != "" {
			count, list = `SELECT count(*) FROM watches WHERE org_id = $1 AND loop_id = $2`, listLoopWatchesQuery
			countArgs = append(countArgs, f.LoopID)
		}
		args := append([]any{orgID, size, page * size}, countArgs[1:]...)
		if err := tx.QueryRow(ctx, count, countArgs...).Scan(&total); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, list, args...)
		if err != nil {
			return err
		}
		watches, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.Watch, error) { return scanWatch(r) })
		if watches == nil && err == nil {
			watches = []*store.Watch{}
		}
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	return watches, total, nil
}

// UpdateWatch changes what the patch sets (store.ApplyWatchPatch): enabling a watch
// clears why it paused and its not_found streak; a disabled or paused watch has no
// next run; the caller plans the next run when it enables the watch or changes
// every_days.
func (db *DB) UpdateWatch(ctx context.Context, orgID, id string, p store.WatchPatch) (*store.Watch, error) {
	if err := store.CheckWatchPatch(p); err != nil {
		return nil, err
	}
	var w *store.Watch
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		if p.LoopID != nil {
			// A new Loop is taken before the watch (the lock order above). The object
			// type never changes, so it is read without a lock.
			var objectType, loopID string
			err := tx.QueryRow(ctx, `SELECT object_type, loop_id FROM watches WHERE id = $1 AND org_id = $2`, id, orgID).Scan(&objectType, &loopID)
			if errors.Is(err, pgx.ErrNoRows) {
				return store.WatchNotFound()
			}
			if err != nil {
				return err
			}
			if *p.LoopID != loopID {
				if err := lockWatchLoop(ctx, tx, orgID, *p.LoopID, objectType); err != nil {
					return err
				}
			}
		}
		var err error
		if w, err = findWatch(ctx, tx, orgID, id, ` FOR UPDATE`); err != nil {
			return err
		}
		if p.LoopID != nil && *p.LoopID != w.LoopID {
			var taken bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM watches WHERE org_id = $1 AND loop_id = $2 AND lookup = $3 AND target = $4)`,
				orgID, *p.LoopID, string(w.Lookup), w.Target).Scan(&taken); err != nil {
				return err
			}
			if taken {
				return store.WatchExists()
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
		_, err = tx.Exec(ctx, `UPDATE watches SET loop_id = $1, every_days = $2, fields = $3, notify_unchanged = $4, enabled = $5,
			paused_reason = $6, not_found_streak = $7, next_run_at = $8, updated_at = $9 WHERE id = $10`,
			w.LoopID, w.EveryDays, fields, b2i(w.NotifyUnchanged), b2i(w.Enabled), w.PausedReason, w.NotFoundStreak,
			nullMS(w.NextRunAt), ms(w.UpdatedAt), id)
		if isUniqueViolation(err, "") {
			// Another watch of the same input moved to, or was created for, that Loop
			// since the check above.
			return store.WatchExists()
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// DeleteWatch deletes a watch; its tasks stay, with their watch_id.
func (db *DB) DeleteWatch(ctx context.Context, orgID, id string) error {
	return db.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM watches WHERE id = $1 AND org_id = $2`, id, orgID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return store.WatchNotFound()
		}
		return nil
	})
}

// SetWatchCap sets the most credits the organization's watch tasks may spend in a UTC
// month; nil takes the cap away.
func (db *DB) SetWatchCap(ctx context.Context, orgName string, limit *int64) error {
	if err := store.CheckWatchCap(limit); err != nil {
		return err
	}
	return db.inTx(ctx, func(tx pgx.Tx) error {
		org, err := findOrg(ctx, tx, orgName)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE orgs SET watch_monthly_cap = $1 WHERE id = $2`, limit, org.ID)
		return err
	})
}

// watchSpendQuery is what an organization's watch tasks created since $2 were charged,
// refunds deducted: a failed or canceled task gave its credits back. It reads the
// partial index tasks_org_watch_created, which holds watch tasks only.
const watchSpendQuery = `SELECT coalesce(sum(credits_charged), 0)::bigint FROM tasks
	WHERE org_id = $1 AND created_at >= $2 AND watch_id IS NOT NULL AND status IN ('queued', 'running', 'succeeded')`

// WatchSpend returns what the organization's watch tasks have spent since monthStart,
// and its monthly cap (nil: none).
func (db *DB) WatchSpend(ctx context.Context, orgID string, monthStart time.Time) (int64, *int64, error) {
	var spent int64
	var limit *int64
	err := db.readTx(ctx, func(tx pgx.Tx) error {
		var err error
		spent, limit, err = watchSpend(ctx, tx, orgID, monthStart)
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	return spent, limit, nil
}

func watchSpend(ctx context.Context, q querier, orgID string, monthStart time.Time) (int64, *int64, error) {
	var limit *int64
	err := q.QueryRow(ctx, `SELECT watch_monthly_cap FROM orgs WHERE id = $1`, orgID).Scan(&limit)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, nil, err
	}
	var spent int64
	if err := q.QueryRow(ctx, watchSpendQuery, orgID, ms(monthStart)).Scan(&spent); err != nil {
		return 0, nil, err
	}
	return spent, limit, nil
}

// dueWatchesQuery picks the due watches to claim: oldest due first, at most $2 of any
// one organization, at most $3 in all. It reads watches_due, which holds only the
// watches that can run.
const dueWatchesQuery = `
SELECT id FROM (
    SELECT id, next_run_at, row_number() OVER (PARTITION BY org_id ORDER BY next_run_at, id) AS nth
    FROM watches WHERE enabled = 1 AND paused_reason IS NULL AND next_run_at <= $1
) due WHERE nth <= $2 ORDER BY next_run_at, id LIMIT $3`

// DueWatches claims the watches due at now, oldest first, at most perOrg of one
// organization and limit in all: each is due again store.WatchRetry later, so if its
// task is never scheduled (a crash, a refused enqueue) it is retried then, and no
// other scheduler takes it meanwhile. One replica schedules at a time: while another
// holds the scheduler's advisory lock this returns nil. The watches are locked FOR
// UPDATE SKIP LOCKED too: one a Settle or a patch holds is left for the next round.
func (db *DB) DueWatches(ctx context.Context, now time.Time, limit, perOrg int) ([]store.DueWatch, error) {
	if limit <= 0 || perOrg <= 0 {
		return nil, nil
	}
	var due []store.DueWatch
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		due = nil
		if ok, err := db.tryAdvisoryXactLock(ctx, tx, lockDueWatches); err != nil || !ok {
			return err
		}
		rows, err := tx.Query(ctx, dueWatchesQuery, ms(now), perOrg, limit)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(ids) == 0 {
			return err
		}
		// Read as they were due (NextRun plans the next run from that), then claimed.
		rows, err = tx.Query(ctx, `SELECT `+watchColumns+` FROM watches
			WHERE id = ANY($1) AND enabled = 1 AND paused_reason IS NULL AND next_run_at <= $2
			FOR UPDATE SKIP LOCKED`, ids, ms(now))
		if err != nil {
			return err
		}
		claimed, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.Watch, error) { return scanWatch(r) })
		if err != nil || len(claimed) == 0 {
			return err
		}
		claimedIDs := make([]string, len(claimed))
		for i, w := range claimed {
			claimedIDs[i] = w.ID
		}
		// A watch claimed before and never recorded (its process stopped, or its check
		// was refused) keeps the due time of that first claim: the check's key names
		// it, and the next run is planned from it.
		rows, err = tx.Query(ctx, `UPDATE watches SET claimed_due_at = coalesce(claimed_due_at, next_run_at), next_run_at = $1
			WHERE id = ANY($2) RETURNING id, claimed_due_at`, ms(now.Add(store.WatchRetry)), claimedIDs)
		if err != nil {
			return err
		}
		dueAt := map[string]int64{}
		if _, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct{}, error) {
			var id string
			var due int64
			err := r.Scan(&id, &due)
			dueAt[id] = due
			return struct{}{}, err
		}); err != nil {
			return err
		}
		for _, w := range claimed {
			due := fromMS(dueAt[w.ID])
			w.NextRunAt = &due
		}
		// In the order they were picked.
		byID := make(map[string]*store.Watch, len(claimed))
		for _, w := range claimed {
			byID[w.ID] = w
		}
		type spend struct {
			spent int64
			limit *int64
		}
		spends := map[string]spend{}
		monthStart := watch.MonthStart(now)
		for _, id := range ids {
			w := byID[id]
			if w == nil {
				continue // locked by another transaction: next round
			}
			s, ok := spends[w.OrgID]
			if !ok {
				if s.spent, s.limit, err = watchSpend(ctx, tx, w.OrgID, monthStart); err != nil {
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

// WatchScheduled records the task the scheduler enqueued for a watch it claimed: when
// it ran, the task, and when the watch is due next. A watch disabled or paused
// meanwhile keeps no next run.
func (db *DB) WatchScheduled(ctx context.Context, orgID, id, taskID string, ranAt, next time.Time) error {
	return db.setWatchRun(ctx, `last_run_at = $4, last_task_id = $5,`, orgID, id, next, ms(ranAt), taskID)
}

// DeferWatch moves a claimed watch's next run to next and changes nothing else: its
// organization's monthly cap holds it until then.
func (db *DB) DeferWatch(ctx context.Context, orgID, id string, next time.Time) error {
	return db.setWatchRun(ctx, ``, orgID, id, next)
}

// setWatchRun sets next_run_at, and what set says (arguments from $4), on a watch.
func (db *DB) setWatchRun(ctx context.Context, set, orgID, id string, next time.Time, args ...any) error {
	return db.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE watches SET `+set+` claimed_due_at = NULL,
			next_run_at = CASE WHEN enabled = 1 AND paused_reason IS NULL THEN $3 ELSE next_run_at END
			WHERE id = $1 AND org_id = $2`, append([]any{id, orgID, ms(next)}, args...)...)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return store.WatchNotFound()
		}
		return nil
	})
}

// settleWatch applies a settled watch task to its watch (store.WatchSettled), in the
// transaction that settled the task, and queues the events it yields to the watch's
// Loop. A deleted watch is left alone; a watch whose Loop is gone (being deleted with
// it) sends nothing. Two tasks of one watch settling at once take its row in turn, the
// second reading the baseline the first kept.
//
// The Loop's row is taken before the watch's (the lock order above), so the watch's
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
