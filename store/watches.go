package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"enrichd/enrich"
	"enrichd/watch"

	"github.com/google/uuid"
)

// Watch keeps one company or person fresh on a schedule: every EveryDays a task asks
// the source afresh, and what changed since the last result kept (Baseline) goes to
// the watch's Loop. Its JSON is the Watch of the API.
type Watch struct {
	ID              string          `json:"id"`
	ObjectType      string          `json:"object_type"`
	Input           json.RawMessage `json:"input"`
	LoopID          string          `json:"loop_id"`
	EveryDays       int             `json:"every_days"`
	Fields          []string        `json:"fields"` // nil: every field
	NotifyUnchanged bool            `json:"notify_unchanged"`
	Enabled         bool            `json:"enabled"`
	NextRunAt       *time.Time      `json:"next_run_at"`
	LastRunAt       *time.Time      `json:"last_run_at"`
	LastTaskID      *string         `json:"last_task_id"`
	PausedReason    *string         `json:"paused_reason"`
	CreatedAt       time.Time       `json:"created_at"`
	UpdatedAt       time.Time       `json:"updated_at"`

	OrgID          string          `json:"-"`
	Lookup         enrich.Lookup   `json:"-"`
	Target         string          `json:"-"`
	NotFoundStreak int             `json:"-"`
	Baseline       json.RawMessage `json:"-"` // the last result kept, what the next is compared with
	// SubjectHash is the hash of whom the input names, AnswerHash of whom the baseline
	// is about where that differs (see subjects.go).
	SubjectHash []byte `json:"-"`
	AnswerHash  []byte `json:"-"`
}

// NewWatch is a request to create a watch. Input is already checked and normalized by
// the code the enrichment endpoints use; RawInput is the request's input fields as
// sent (normalized), shown as the watch's input and given to its tasks.
type NewWatch struct {
	OrgID           string
	ObjectType      string
	Input           enrich.Input
	RawInput        json.RawMessage
	LoopID          string
	EveryDays       int
	Fields          []string // nil: every field
	NotifyUnchanged bool
	Enabled         bool
	FirstRunAt      time.Time // when a new enabled watch is first due (watch.FirstRun)
}

// WatchPatch changes the fields it sets.
type WatchPatch struct {
	LoopID          *string
	EveryDays       *int
	Fields          *[]string // a pointer to nil: every field
	NotifyUnchanged *bool
	Enabled         *bool
	// NextRunAt is when the watch is next due, set by the caller when it enables the
	// watch or changes every_days (the store does not plan schedules).
	NextRunAt *time.Time
}

// WatchFilter selects a page of an organization's watches, newest first, paged like
// ListTasks (WatchPage bounds it). LoopID "" does not filter; another organization's
// Loop selects nothing.
type WatchFilter struct {
	LoopID   string
	Page     int // 0 for the first
	PageSize int
}

// DueWatch is a watch the scheduler has claimed, with what its organization has spent
// on watch tasks this UTC month (refunds deducted) and the cap it set (nil: none).
// Watch.NextRunAt is the time the watch was due, not the claim's retry time that the
// database now holds: the scheduler plans the next run from it (watch.NextRun), so a
// watch keeps its offset. MonthSpend is read once per organization per DueWatches
// call: the scheduler adds the cost of each task it enqueues in the same round.
type DueWatch struct {
	Watch      *Watch
	MonthSpend int64
	MonthlyCap *int64
}

// WatchResult is one row of a bulk import: the watch created, or why not.
type WatchResult struct {
	Watch *Watch
	Err   error
}

// WatchUpdate is what a settled watch task changes on its watch (WatchSettled): the
// new baseline (nil keeps the old one), the not_found streak, why it pauses (nil: it
// does not), and the events to send to its Loop.
type WatchUpdate struct {
	Baseline       json.RawMessage
	NotFoundStreak int
	PausedReason   *string
	Events         []WatchEvent
}

// WatchEvent is one event for a watch's Loop and its exact body.
type WatchEvent struct {
	Event   string
	Payload []byte
}

// The events a watch sends to its Loop.
const (
	EventRecordChanged   = "record.changed"
	EventJobChanged      = "person.job_changed"
	EventRecordUnchanged = "record.unchanged"
)

// WatchRetry is how long a watch claimed by DueWatches waits before it is due again if
// its task is never scheduled (a crash, a refused enqueue): long enough that another
// scheduler does not run it twice, short enough that a refusal is soon retried.
const WatchRetry = 5 * time.Minute

// PausedNotFound is the paused_reason of a watch whose target the source no longer
// finds (not_found twice in a row).
const PausedNotFound = "not_found"

// Watch bounds.
const (
	MinWatchDays     = 7
	MaxWatchDays     = 365
	DefaultWatchDays = 30
	MaxWatchFields   = 30
	MaxWatchImport   = 1000
	DefaultWatchPage = 50
	MaxWatchPage     = 100
)

// WatchNotFound is the answer for a watch that does not exist or is another
// organization's.
func WatchNotFound() error {
	return &enrich.Error{Kind: enrich.KindNotFound, Code: "not_found", Message: "watch not found"}
}

// WatchExists refuses a second watch of the same input for the same Loop.
func WatchExists() error {
	return &enrich.Error{Kind: enrich.KindConflict, Code: "watch_exists",
		Message: "your organization already watches this input for this Loop; change that watch instead (PATCH /v1/watches/{id})"}
}

// WatchLoopMismatch refuses a Loop that takes another object type than the watch's.
func WatchLoopMismatch(loopSlug, loopType, objectType string) error {
	return enrich.Errorf(enrich.KindInvalid, "loop_id: the Loop %s takes %s records, not %s ones", loopSlug, loopType, objectType)
}

// Watches and the lock order on PostgreSQL. A watch's row comes after its Loop's
// everywhere: Settle takes the task, the task's results, counts and grants (see
// CreateTask), then the watch's Loop FOR KEY SHARE, then the watch FOR UPDATE; a
// Loop's delete takes the Loop and then, by its cascade, the watch; a patch that moves
// a watch to another Loop takes that Loop before the watch. Nothing takes a watch and
// then a task, a grant or a Loop, so the watch rows close every chain of waits and
// cannot be part of a circle. The scheduler (DueWatches) takes watches only, skipping
// the locked ones. SQLite's single writer needs none of these locks.

const watchColumns = `id, org_id, object_type, lookup, target, input, loop_id, every_days, fields, notify_unchanged,
	enabled, paused_reason, not_found_streak, next_run_at, last_run_at, last_task_id, baseline, created_at, updated_at,
	subject_hash, answer_hash`

func scanWatch(row Row) (*Watch, error) {
	var w Watch
	var input string
	var fields, baseline *string
	var notifyUnchanged, enabled int
	var next, last sql.NullInt64
	var created, updated int64
	if err := row.Scan(&w.ID, &w.OrgID, &w.ObjectType, &w.Lookup, &w.Target, &input, &w.LoopID, &w.EveryDays, &fields,
		&notifyUnchanged, &enabled, &w.PausedReason, &w.NotFoundStreak, &next, &last, &w.LastTaskID, &baseline,
		&created, &updated, &w.SubjectHash, &w.AnswerHash); err != nil {
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
	return string(b), err
}

// findWatch reads one of the organization's watches; lock is "" or a row lock.
func findWatch(ctx context.Context, q Executor, orgID, id, lock string) (*Watch, error) {
	w, err := scanWatch(q.QueryRow(ctx, `SELECT `+watchColumns+` FROM watches WHERE id = ? AND org_id = ?`+lock, id, orgID))
	if errors.Is(err, ErrNoRows) {
		return nil, WatchNotFound()
	}
	return w, err
}

// CreateWatch creates a watch for one of the organization's Loops, which must take the
// watch's object type. An enabled watch is first due at nw.FirstRunAt (now if unset);
// a disabled one is not due until it is enabled.
func (db *DB) CreateWatch(ctx context.Context, by By, nw NewWatch) (*Watch, error) {
	h, err := db.hasher()
	if err != nil {
		return nil, err
	}
	suppressed, err := db.watchSuppressed(ctx, nw)
	if err != nil {
		return nil, err
	}
	var w *Watch
	err = db.Write(ctx, func(tx Tx) error {
		var err error
		if w, err = createWatch(ctx, tx, h, nw, suppressed, db.now()); err != nil {
			return err
		}
		return db.appendAudit(ctx, tx, by, watchCreated(w, nw))
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// CreateWatches creates the watches of an import in one transaction; each row that is
// refused (a bad row, a duplicate, another organization's Loop) fails alone, with its
// own error, and the others are created. Only a database error fails them all.
func (db *DB) CreateWatches(ctx context.Context, by By, nws []NewWatch) ([]WatchResult, error) {
	if len(nws) > MaxWatchImport {
		return nil, enrich.Errorf(enrich.KindInvalid, "watches: at most %d in one import, not %d", MaxWatchImport, len(nws))
	}
	h, err := db.hasher()
	if err != nil {
		return nil, err
	}
	suppressed := make([]bool, len(nws))
	for i, nw := range nws {
		if suppressed[i], err = db.watchSuppressed(ctx, nw); err != nil {
			return nil, err
		}
	}
	var out []WatchResult
	err = db.Write(ctx, func(tx Tx) error {
		out = make([]WatchResult, len(nws))
		now := db.now()
		for i, nw := range nws {
			w, err := createWatch(ctx, tx, h, nw, suppressed[i], now)
			var refused *enrich.Error
			if err != nil && !errors.As(err, &refused) {
				return err // the database failed: nothing of the import is kept
			}
			// createWatch refuses a row before it writes anything, so the
			// transaction goes on for the others.
			out[i] = WatchResult{Watch: w, Err: err}
		}
		for i, r := range out {
			if r.Watch != nil {
				if err := db.appendAudit(ctx, tx, by, watchCreated(r.Watch, nws[i])); err != nil {
					return err
				}
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
// abort PostgreSQL's transaction (CreateWatches goes on after a duplicate). A second
// request for the same key at once waits for the first's transaction, then finds it
// taken.
//
// A watch of a suppressed subject is created paused (PausedSuppressed): it is never
// due until it is resumed.
func createWatch(ctx context.Context, tx Tx, h *enrich.Subjects, nw NewWatch, suppressed bool, now time.Time) (*Watch, error) {
	if err := CheckNewWatch(nw); err != nil {
		return nil, err
	}
	if err := lockWatchLoop(ctx, tx, nw.OrgID, nw.LoopID, nw.ObjectType); err != nil {
		return nil, err
	}
	w := &Watch{ID: uuid.Must(uuid.NewV7()).String(), OrgID: nw.OrgID, ObjectType: nw.ObjectType, Lookup: nw.Input.Lookup,
		Target: nw.Input.Target, Input: nw.RawInput, LoopID: nw.LoopID, EveryDays: nw.EveryDays, Fields: nw.Fields,
		NotifyUnchanged: nw.NotifyUnchanged, Enabled: nw.Enabled, CreatedAt: now, UpdatedAt: now, SubjectHash: inputHash(h, nw.Input)}
	if len(w.Input) == 0 {
		w.Input = json.RawMessage("{}")
	}
	if suppressed {
		reason := PausedSuppressed
		w.PausedReason = &reason
	} else if nw.Enabled {
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
	n, err := tx.Exec(ctx, `INSERT INTO watches (id, org_id, object_type, lookup, target, input, loop_id, every_days, fields,
		notify_unchanged, enabled, paused_reason, next_run_at, created_at, updated_at, subject_hash)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (org_id, loop_id, lookup, target) DO NOTHING`,
		w.ID, w.OrgID, w.ObjectType, string(w.Lookup), w.Target, string(w.Input), w.LoopID, w.EveryDays, fields,
		boolInt(w.NotifyUnchanged), boolInt(w.Enabled), w.PausedReason, nullMS(w.NextRunAt), ms(now), ms(now), w.SubjectHash)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, WatchExists()
	}
	return w, nil
}

// watchCreated is the audit entry of a watch made: its checks, each a task, are
// recorded as the watch's.
func watchCreated(w *Watch, nw NewWatch) NewAuditEntry {
	id := w.ID
	return NewAuditEntry{OrgID: w.OrgID, Action: AuditWatchCreated, Subject: sentSubject(nw.RawInput, nw.Input),
		SubjectHash: w.SubjectHash, ObjectID: &id, Detail: map[string]any{"every_days": w.EveryDays, "loop_id": w.LoopID}}
}

// watchSuppressed reports whether a watch asked for names a suppressed subject of its
// organization (an address's domain included).
func (db *DB) watchSuppressed(ctx context.Context, nw NewWatch) (bool, error) {
	_, suppressed, err := db.Suppressed(ctx, nw.OrgID, enrich.InputSubjects(nw.Input)...)
	return suppressed, err
}

// lockWatchLoop is what a watch's Loop must be: the organization's (another's is not
// found, as everywhere), and of the watch's object type. A disabled Loop may be
// watched for: its events wait in its deliveries like those of any task in flight. On
// PostgreSQL the Loop is read FOR KEY SHARE, so that it cannot be deleted before the
// watch that names it commits (the delete waits and then takes the watch with it).
func lockWatchLoop(ctx context.Context, tx Tx, orgID, loopID, objectType string) error {
	if len(loopID) > 100 {
		return LoopNotFound() // no Loop has such an id
	}
	var slug, loopType string
	err := tx.QueryRow(ctx, `SELECT slug, object_type FROM loops WHERE id = ? AND org_id = ? FOR KEY SHARE`,
		loopID, orgID).Scan(&slug, &loopType)
	if errors.Is(err, ErrNoRows) {
		return LoopNotFound()
	}
	if err != nil {
		return err
	}
	if loopType != objectType {
		return WatchLoopMismatch(slug, loopType, objectType)
	}
	return nil
}

// GetWatch returns one of the organization's watches; another organization's is not
// found, the same as one that does not exist.
func (db *DB) GetWatch(ctx context.Context, orgID, id string) (*Watch, error) {
	return findWatch(ctx, db.Reader(), orgID, id, "")
}

// The lists of watches, newest first, and their counts, on watches_org_created and
// watches_org_loop_created. SQLite is told the index (INDEXED BY, which PostgreSQL's
// driver drops): its planner, without statistics, would count on another.
const (
	listWatchesQuery = `SELECT ` + watchColumns + ` FROM watches INDEXED BY watches_org_created WHERE org_id = ?
		ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`
	listLoopWatchesQuery = `SELECT ` + watchColumns + ` FROM watches INDEXED BY watches_org_loop_created
		WHERE org_id = ? AND loop_id = ? ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`
	countWatchesQuery     = `SELECT count(*) FROM watches INDEXED BY watches_org_created WHERE org_id = ?`
	countLoopWatchesQuery = `SELECT count(*) FROM watches INDEXED BY watches_org_loop_created WHERE org_id = ? AND loop_id = ?`
)

// ListWatches returns a page of the organization's watches, newest first, optionally
// of one Loop, and how many match in all, from one snapshot.
func (db *DB) ListWatches(ctx context.Context, orgID string, f WatchFilter) ([]*Watch, int64, error) {
	page, size := WatchPage(f)
	if len(f.LoopID) > 100 {
		return []*Watch{}, 0, nil // no Loop has such an id
	}
	var watches []*Watch
	var total int64
	err := db.Read(ctx, func(q Executor) error {
		count, list, args := countWatchesQuery, listWatchesQuery, []any{orgID}
		if f.LoopID != "" {
			count, list, args = countLoopWatchesQuery, listLoopWatchesQuery, append(args, f.LoopID)
		}
		if err := q.QueryRow(ctx, count, args...).Scan(&total); err != nil {
			return err
		}
		rows, err := q.Query(ctx, list, append(args, size, page*size)...)
		watches, err = collect(rows, err, scanWatch)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	if watches == nil {
		watches = []*Watch{}
	}
	return watches, total, nil
}

// UpdateWatch changes what the patch sets (ApplyWatchPatch): enabling a watch clears
// why it paused and its not_found streak; a disabled or paused watch has no next run;
// the caller plans the next run when it enables the watch or changes every_days.
func (db *DB) UpdateWatch(ctx context.Context, orgID, id string, p WatchPatch) (*Watch, error) {
	if err := CheckWatchPatch(p); err != nil {
		return nil, err
	}
	var w *Watch
	err := db.Write(ctx, func(tx Tx) error {
		if p.LoopID != nil {
			// A new Loop is taken before the watch (the lock order above). The object
			// type never changes, so it is read without a lock.
			var objectType, loopID string
			err := tx.QueryRow(ctx, `SELECT object_type, loop_id FROM watches WHERE id = ? AND org_id = ?`, id, orgID).Scan(&objectType, &loopID)
			if errors.Is(err, ErrNoRows) {
				return WatchNotFound()
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
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM watches WHERE org_id = ? AND loop_id = ? AND lookup = ? AND target = ?)`,
				orgID, *p.LoopID, string(w.Lookup), w.Target).Scan(&taken); err != nil {
				return err
			}
			if taken {
				return WatchExists()
			}
		}
		if p.Fields != nil {
			if err := CheckWatchFields(w.ObjectType, *p.Fields); err != nil {
				return err
			}
		}
		ApplyWatchPatch(w, p, db.now())
		fields, err := fieldsColumn(w.Fields)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE watches SET loop_id = ?, every_days = ?, fields = ?, notify_unchanged = ?, enabled = ?,
			paused_reason = ?, not_found_streak = ?, next_run_at = ?, updated_at = ? WHERE id = ?`,
			w.LoopID, w.EveryDays, fields, boolInt(w.NotifyUnchanged), boolInt(w.Enabled), w.PausedReason, w.NotFoundStreak,
			nullMS(w.NextRunAt), ms(w.UpdatedAt), w.ID)
		if err != nil && db.UniqueViolation(err) {
			// Another watch of the same input moved to, or was created for, that Loop
			// since the check above (PostgreSQL).
			return WatchExists()
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// DeleteWatch deletes one of the organization's watches; its tasks stay, with their
// watch_id.
func (db *DB) DeleteWatch(ctx context.Context, orgID, id string) error {
	return db.Write(ctx, func(tx Tx) error {
		n, err := tx.Exec(ctx, `DELETE FROM watches WHERE id = ? AND org_id = ?`, id, orgID)
		if err == nil && n == 0 {
			err = WatchNotFound()
		}
		return err
	})
}

// SetWatchCap sets the most credits the organization's watch tasks may be charged in
// a UTC month; nil removes the cap.
func (db *DB) SetWatchCap(ctx context.Context, orgName string, limit *int64) error {
	if err := CheckWatchCap(limit); err != nil {
		return err
	}
	return db.Write(ctx, func(tx Tx) error {
		org, err := findOrg(ctx, tx, orgName)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE orgs SET watch_monthly_cap = ? WHERE id = ?`, limit, org.ID)
		return err
	})
}

// watchSpendQuery sums the credits of the organization's watch tasks created since a
// time: failed and canceled tasks were refunded, and cost nothing. It reads the
// partial index tasks_org_watch_created, which holds watch tasks only (SQLite would
// take the organization's every task of those statuses).
const watchSpendQuery = `SELECT CAST(coalesce(sum(credits_charged), 0) AS BIGINT) FROM tasks INDEXED BY tasks_org_watch_created
	WHERE org_id = ? AND watch_id IS NOT NULL AND created_at >= ? AND status IN ('queued', 'running', 'succeeded')`

// WatchSpend returns what the organization's watch tasks created since monthStart
// were charged, less refunds, and its monthly cap (nil: none).
func (db *DB) WatchSpend(ctx context.Context, orgID string, monthStart time.Time) (spent int64, limit *int64, err error) {
	err = db.Read(ctx, func(q Executor) error {
		spent, limit, err = watchSpend(ctx, q, orgID, monthStart)
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	return spent, limit, nil
}

func watchSpend(ctx context.Context, q Executor, orgID string, monthStart time.Time) (int64, *int64, error) {
	var limit *int64
	err := q.QueryRow(ctx, `SELECT watch_monthly_cap FROM orgs WHERE id = ?`, orgID).Scan(&limit)
	if err != nil && !errors.Is(err, ErrNoRows) {
		return 0, nil, err
	}
	var spent int64
	if err := q.QueryRow(ctx, watchSpendQuery, orgID, ms(monthStart)).Scan(&spent); err != nil {
		return 0, nil, err
	}
	return spent, limit, nil
}

// dueWatchesQuery picks the due watches, oldest due first, at most perOrg of each
// organization: one organization's thousand due watches do not hold up another's.
// It reads only the range of watches_due, which holds only the watches that can run,
// and the ids; the rows picked are read after.
const dueWatchesQuery = `SELECT id FROM (
		SELECT id, next_run_at, row_number() OVER (PARTITION BY org_id ORDER BY next_run_at, id) AS nth
		FROM watches INDEXED BY watches_due WHERE enabled = 1 AND paused_reason IS NULL AND next_run_at <= ?
	) due WHERE nth <= ? ORDER BY next_run_at, id LIMIT ?`

// DueWatches claims the watches due at now, oldest first, at most perOrg of one
// organization and limit in all: each is due again WatchRetry later, so if its task is
// never scheduled (a crash, a refused enqueue) it is retried then, and no other
// scheduler takes it meanwhile. Each comes with its organization's watch spend this
// UTC month and its cap. The Watch returned keeps the next_run_at it was due at,
// which the scheduler plans the next run from (watch.NextRun). On PostgreSQL one
// replica claims at a time (LockDueWatches: while another does, this returns nil),
// and a watch a Settle or a patch holds is skipped (SKIP LOCKED) for the next round.
func (db *DB) DueWatches(ctx context.Context, now time.Time, limit, perOrg int) ([]DueWatch, error) {
	if limit <= 0 || perOrg <= 0 {
		return nil, nil
	}
	var due []DueWatch
	err := db.Write(ctx, func(tx Tx) error {
		due = nil // a retried transaction starts again
		if ok, err := tx.Hold(ctx, LockDueWatches, false); err != nil || !ok {
			return err
		}
		rows, err := tx.Query(ctx, dueWatchesQuery, ms(now), perOrg, limit)
		ids, err := collect(rows, err, func(r Row) (id string, err error) { return id, r.Scan(&id) })
		if err != nil || len(ids) == 0 {
			return err
		}
		// Read as they were due (NextRun plans the next run from that), then claimed.
		in, args := inList(ids)
		rows, err = tx.Query(ctx, `SELECT `+watchColumns+` FROM watches
			WHERE id IN `+in+` AND enabled = 1 AND paused_reason IS NULL AND next_run_at <= ?
			FOR UPDATE SKIP LOCKED`, append(args, ms(now))...)
		claimed, err := collect(rows, err, scanWatch)
		if err != nil || len(claimed) == 0 {
			return err
		}
		byID := make(map[string]*Watch, len(claimed))
		claimedIDs := make([]string, len(claimed))
		for i, w := range claimed {
			byID[w.ID], claimedIDs[i] = w, w.ID
		}
		// A watch claimed before and never recorded (its process stopped, or its check
		// was refused) keeps the due time of that first claim: the check's key names
		// it, and the next run is planned from it.
		in, args = inList(claimedIDs)
		rows, err = tx.Query(ctx, `UPDATE watches SET claimed_due_at = coalesce(claimed_due_at, next_run_at), next_run_at = ?
			WHERE id IN `+in+` RETURNING id, claimed_due_at`, append([]any{ms(now.Add(WatchRetry))}, args...)...)
		if _, err := collect(rows, err, func(r Row) (struct{}, error) {
			var id string
			var dueAt int64
			err := r.Scan(&id, &dueAt)
			if w := byID[id]; w != nil && err == nil {
				t := fromMS(dueAt)
				w.NextRunAt = &t
			}
			return struct{}{}, err
		}); err != nil {
			return err
		}
		type spend struct {
			spent int64
			limit *int64
		}
		spends := map[string]spend{}
		monthStart := watch.MonthStart(now)
		for _, id := range ids { // in the order they were picked
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
			due = append(due, DueWatch{Watch: w, MonthSpend: s.spent, MonthlyCap: s.limit})
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
	return db.setWatchRun(ctx, orgID, id, `last_run_at = ?, last_task_id = ?,`, []any{ms(ranAt), taskID}, next)
}

// DeferWatch moves a claimed watch's next run to next and changes nothing else: its
// organization's monthly cap holds it until then.
func (db *DB) DeferWatch(ctx context.Context, orgID, id string, next time.Time) error {
	return db.setWatchRun(ctx, orgID, id, ``, nil, next)
}

// setWatchRun ends a watch's claim and sets its next run, and what set says with args.
func (db *DB) setWatchRun(ctx context.Context, orgID, id, set string, args []any, next time.Time) error {
	return db.Write(ctx, func(tx Tx) error {
		n, err := tx.Exec(ctx, `UPDATE watches SET `+set+` claimed_due_at = NULL,
			next_run_at = CASE WHEN enabled = 1 AND paused_reason IS NULL THEN ? ELSE next_run_at END
			WHERE id = ? AND org_id = ?`, append(args, ms(next), id, orgID)...)
		if err == nil && n == 0 {
			err = WatchNotFound()
		}
		return err
	})
}

// settleWatch applies a settled watch task to its watch (WatchSettled), in the
// transaction that settled the task, and queues the events it yields to the watch's
// Loop. A deleted watch is left alone; a watch whose Loop is gone (being deleted with
// it) sends nothing. Two tasks of one watch settling at once take its row in turn
// (PostgreSQL), the second reading the baseline the first kept.
//
// The Loop's row is taken before the watch's (the lock order above), so the watch's
// loop_id is read before the watch is locked. Should a patch move the watch to another
// Loop in between, that Loop is taken after the watch: out of order, but only against
// a delete of that very Loop at the same moment, a deadlock PostgreSQL detects and
// answers by settling again.
func settleWatch(ctx context.Context, tx Tx, h *enrich.Subjects, taskID, watchID string, fetched bool, now time.Time) error {
	var loopID string
	var loopExists bool
	err := tx.QueryRow(ctx, `SELECT loop_id, EXISTS (SELECT 1 FROM loops WHERE loops.id = watches.loop_id FOR KEY SHARE)
		FROM watches WHERE id = ?`, watchID).Scan(&loopID, &loopExists)
	if errors.Is(err, ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	w, err := scanWatch(tx.QueryRow(ctx, `SELECT `+watchColumns+` FROM watches WHERE id = ? FOR UPDATE`, watchID))
	if errors.Is(err, ErrNoRows) {
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
	t, err := scanTask(tx.QueryRow(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id = ?`, taskID))
	if err != nil {
		return err
	}
	u := WatchSettled(w, t, fetched)
	set, args := `not_found_streak = ?`, []any{u.NotFoundStreak}
	if w.SubjectHash == nil { // made by a release that did not hash it
		w.SubjectHash = inputHash(h, enrich.Input{Lookup: w.Lookup, Target: w.Target})
		set, args = set+`, subject_hash = ?`, append(args, w.SubjectHash)
	}
	if u.Baseline != nil {
		w.AnswerHash = resultJSONHash(h, w.ObjectType, u.Baseline)
		set, args = set+`, baseline = ?, answer_hash = ?`, append(args, string(u.Baseline), answerColumn(w.SubjectHash, w.AnswerHash))
	}
	if u.PausedReason != nil {
		// A paused watch is not due again until it is enabled, which plans its next run.
		set, args = set+`, paused_reason = ?, next_run_at = NULL, updated_at = ?`, append(args, *u.PausedReason, ms(now))
	}
	if _, err := tx.Exec(ctx, `UPDATE watches SET `+set+` WHERE id = ?`, append(args, w.ID)...); err != nil {
		return err
	}
	if !loopExists {
		return nil
	}
	for _, e := range u.Events {
		if _, err := insertDelivery(ctx, tx, w.LoopID, w.OrgID, e.Event, &t.ID, e.Payload, w.SubjectHash, w.AnswerHash, now); err != nil {
			return err
		}
	}
	return nil
}

// shareLoop reports whether the Loop exists, holding its row FOR KEY SHARE on
// PostgreSQL: a delete of it waits for this transaction, and then takes the
// deliveries queued here with it.
func shareLoop(ctx context.Context, tx Tx, loopID string) (bool, error) {
	var exists bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM loops WHERE id = ? FOR KEY SHARE)`, loopID).Scan(&exists)
	return exists, err
}

// WatchQueries are the watches' list, count, scheduler and spend statements, by name,
// with arguments of the right types: each driver's tests check its engine's plan of
// them.
var WatchQueries = map[string]struct {
	Query string
	Args  []any
}{
	"ListWatches":      {listWatchesQuery, []any{"o", 50, 0}},
	"ListLoopWatches":  {listLoopWatchesQuery, []any{"o", "l", 50, 0}},
	"CountWatches":     {countWatchesQuery, []any{"o"}},
	"CountLoopWatches": {countLoopWatchesQuery, []any{"o", "l"}},
	"DueWatches":       {dueWatchesQuery, []any{int64(5), 10, 200}},
	"WatchSpend":       {watchSpendQuery, []any{"o", int64(5)}},
}

// TaskInput is the input of a watch's task: the watch's lookup and target, and the
// hints it keeps for an email.
func (w *Watch) TaskInput() enrich.Input {
	in := enrich.Input{Lookup: w.Lookup, Target: w.Target}
	if w.Lookup == enrich.LookupEmail {
		json.Unmarshal(w.Input, &in.Hints) // a watch's input is what the API's checks wrote
	}
	return in
}
