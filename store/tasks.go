package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"enrichd/enrich"

	"github.com/google/uuid"
)

// Task statuses.
const (
	StatusQueued    = "queued"
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusCanceled  = "canceled"
)

// IsStatus reports whether s is one of the task statuses.
func IsStatus(s string) bool {
	switch s {
	case StatusQueued, StatusRunning, StatusSucceeded, StatusFailed, StatusCanceled:
		return true
	}
	return false
}

// Task is an enrichment task. Its JSON is the Task of the API.
type Task struct {
	ID             string          `json:"id"`
	ObjectType     string          `json:"object_type"`
	Operation      string          `json:"operation"`
	Status         string          `json:"status"`
	Input          json.RawMessage `json:"input"`
	Target         string          `json:"target"`
	CreditsCharged int64           `json:"credits_charged"`
	LoopID         *string         `json:"loop_id"`
	WatchID        *string         `json:"watch_id"` // the watch this task checks, if any
	IdempotencyKey *string         `json:"idempotency_key"`
	CreatedAt      time.Time       `json:"created_at"`
	QueuedAt       *time.Time      `json:"queued_at"`
	StartedAt      *time.Time      `json:"started_at"`
	FinishedAt     *time.Time      `json:"finished_at"`
	ExpiresAt      time.Time       `json:"expires_at"`
	// ErasedAt is when an erasure of the person it was about took its input, target
	// and result (see ErasedMarker); the task stays, with its charge.
	ErasedAt *time.Time `json:"erased_at"`

	OrgID  string            `json:"-"`
	Lookup enrich.Lookup     `json:"-"`
	Data   json.RawMessage   `json:"-"` // the result once succeeded
	Error  *enrich.TaskError `json:"-"` // why it failed once failed
	// Provenance is the JSON object naming the source of each field of Data; Sources
	// the JSON array of what each source was asked (enrich.SourceCall). Nil when the
	// task has none (not settled, or settled before they were kept).
	Provenance json.RawMessage `json:"-"`
	Sources    json.RawMessage `json:"-"`
}

// Settled reports whether the task has reached a final status.
func (t *Task) Settled() bool {
	return t.Status == StatusSucceeded || t.Status == StatusFailed || t.Status == StatusCanceled
}

// NewTask is a request to create a task.
type NewTask struct {
	OrgID    string
	Input    enrich.Input
	RawInput json.RawMessage // the request fields as sent, shown as the task's input
	LoopID   *string
	// WatchID marks a watch's task: when it settles, its result is compared with the
	// watch's baseline (WatchSettled). Such a task has Freshness 0 and no LoopID.
	WatchID        *string
	IdempotencyKey string // "" when none was sent
	// Endpoint is the method and path the request was sent to ("POST /v1/people/enrich"),
	// kept with the key so a reuse on another endpoint is told apart from another body.
	Endpoint   string
	BodyHash   string // what the idempotency key is bound to: the endpoint and the body
	TTL        time.Duration
	MaxBacklog int64
	Freshness  time.Duration // a stored record younger than this settles the task at once
	// Fail, when set, is why the task fails inside the request (a refused email
	// address): it is created failed with this error, charged and refunded at once,
	// and never queued.
	Fail *enrich.TaskError
	// Batch, when set, is the batch row the task is made for: the row is linked to
	// the task in the task's transaction. A replay links nothing (the first did).
	Batch *BatchRowRef
	// SubjectHash is the hash of the subject Input names, when the caller has made it
	// already (to check the suppressions): nil makes the store hash it.
	SubjectHash []byte
}

// Enqueued is what CreateTask did.
type Enqueued struct {
	Task     *Task
	Replayed bool // the idempotency key named an earlier task, which is returned as it is
}

// Task list bounds: a page of the dashboard's task list.
const (
	DefaultTaskPage = 50
	MaxTaskPage     = 100
)

// TaskFilter selects an organization's tasks. Empty fields do not filter.
type TaskFilter struct {
	Status     string    // one of the task statuses
	ObjectType string    // company or person
	LoopID     string    // the Loop the task runs for; another organization's selects nothing
	From, To   time.Time // created_at in [From, To); a zero time leaves that end open
	Before     *TaskCursor
	Limit      int // 1..MaxTaskPage; 0 means DefaultTaskPage, more than the most means the most
}

// TaskCursor is where a page of tasks ends: the next page holds the tasks listed after
// it, newest first by (created_at, id). Keyset paging costs the same on the thousandth
// page as on the first, which OFFSET does not.
type TaskCursor struct {
	CreatedAt time.Time
	ID        string
}

// String is the cursor as it goes in a URL: the creation time in milliseconds, "_",
// the task's id.
func (c TaskCursor) String() string {
	return strconv.FormatInt(c.CreatedAt.UnixMilli(), 10) + "_" + c.ID
}

// ParseTaskCursor reads a cursor written by TaskCursor.String.
func ParseTaskCursor(s string) (*TaskCursor, error) {
	invalid := &enrich.Error{Kind: enrich.KindInvalid, Code: "invalid_cursor",
		Message: "the page cursor is not one this server gave; start again from the first page"}
	if len(s) > 100 {
		return nil, invalid
	}
	at, id, ok := strings.Cut(s, "_")
	t, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil || t < 0 {
		return nil, invalid
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return nil, invalid
	}
	return &TaskCursor{CreatedAt: time.UnixMilli(t).UTC(), ID: u.String()}, nil
}

// taskColumns are a task's columns, its result put back in its place, qualified so
// that a join (findIdempotent) can read them.
const taskColumns = `tasks.id, tasks.org_id, tasks.object_type, tasks.status, tasks.lookup, tasks.input, tasks.target,
	tasks.credits_charged, tasks.loop_id, tasks.watch_id, tasks.idempotency_key, tasks.created_at, tasks.queued_at,
	tasks.started_at, tasks.finished_at, tasks.expires_at, ` + resultColumn + `, tasks.error, tasks.provenance, tasks.sources, tasks.erased_at`

// scanTask reads a task selected as taskColumns, after the columns before it, into
// before.
func scanTask(row Row, before ...any) (*Task, error) {
	var t Task
	var input string
	// Null types rather than pointers: a pointer target costs an allocation a column,
	// and every task read scans these.
	var result, taskErr, provenance, sources sql.NullString
	var created, expires int64
	var queued, started, finished, erased sql.NullInt64
	if err := row.Scan(append(before, &t.ID, &t.OrgID, &t.ObjectType, &t.Status, &t.Lookup, &input, &t.Target,
		&t.CreditsCharged, &t.LoopID, &t.WatchID, &t.IdempotencyKey, &created, &queued, &started, &finished, &expires,
		&result, &taskErr, &provenance, &sources, &erased)...); err != nil {
		return nil, err
	}
	t.ErasedAt = fromNullMS(erased)
	t.Operation = TaskOperation
	t.Input = json.RawMessage(input)
	t.CreatedAt, t.ExpiresAt = fromMS(created), fromMS(expires)
	t.QueuedAt, t.StartedAt, t.FinishedAt = fromNullMS(queued), fromNullMS(started), fromNullMS(finished)
	if result.Valid {
		t.Data = json.RawMessage(result.String)
	}
	if provenance.Valid {
		t.Provenance = json.RawMessage(provenance.String)
	}
	if sources.Valid {
		t.Sources = json.RawMessage(sources.String)
	}
	if taskErr.Valid {
		t.Error = &enrich.TaskError{}
		if err := json.Unmarshal([]byte(taskErr.String), t.Error); err != nil {
			return nil, fmt.Errorf("task %s: error column: %w", t.ID, err)
		}
	}
	return &t, nil
}

// CreateTask creates, charges and either settles or queues a task, in one transaction:
// an idempotent replay returns the original task and charges nothing; a task that
// fails inside the request (nt.Fail) is created failed and refunded; a stored record
// younger than the freshness window settles the task at once; otherwise the task is
// queued, unless the organization's backlog is full. A task naming a Loop must name an
// enabled Loop of the organization that takes its object type; one settled here sends
// its event like any other. A refusal (400, 402, 409, 422, 429) creates and charges
// nothing.
//
// With many writers (PostgreSQL), what a single writer makes safe is made safe by locks:
//   - the Idempotency-Key is claimed first, by the primary key of idempotency_keys
//     (INSERT ... ON CONFLICT DO NOTHING): a second request with the same key waits for
//     the first's transaction, and once it commits finds the key taken and replays the
//     task it names, charging nothing;
//   - a task to be queued locks its organization's row first (Tx.LockOrgs), so the
//     backlog count it checks cannot be passed by another enqueue of the same
//     organization meanwhile, and so a claimer does not drop the organization's turn
//     under it (see ClaimTask);
//   - the charge is guarded on the grants' rows.
//
// Locks are taken in one order everywhere (orgs, queue_turns, tasks, task_results,
// task_counts through the trigger, credit_grants, audit_heads) so that two transactions
// do not wait for each other in a circle; PostgreSQL's Write retries the deadlock an
// order missed would give. The task is inserted before it is charged for that reason: a
// cancel or a refund takes task_counts before credit_grants too. A claimer, which holds
// a turn, never waits for an organization's row (it skips a locked one).
func (db *DB) CreateTask(ctx context.Context, by By, nt NewTask) (*Enqueued, error) {
	nt, ahead, audit, err := db.taskAhead(ctx, nt)
	if err != nil {
		return nil, err
	}
	var out *Enqueued
	err = db.Write(ctx, func(tx Tx) error {
		var err error
		out, err = db.createTask(ctx, tx, by, nt, ahead, audit)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// taskAhead is what CreateTask works out before its transaction, so as not to hold up
// SQLite's single writer: a store hit's answer, the subject's hash (unless the caller
// hashed it to check the suppressions) and the task's audit entry, with the seal of the
// subject as sent.
func (db *DB) taskAhead(ctx context.Context, nt NewTask) (NewTask, *storedAnswer, NewAuditEntry, error) {
	var ahead *storedAnswer
	if db.SingleWriter() {
		ahead = db.answerAhead(ctx, nt)
	}
	h, err := db.hasher()
	if err != nil {
		return nt, nil, NewAuditEntry{}, err
	}
	if nt.SubjectHash == nil {
		nt.SubjectHash = inputHash(h, nt.Input)
	}
	sent := sentSubject(nt.RawInput, nt.Input)
	audit := NewAuditEntry{OrgID: nt.OrgID, Action: AuditTaskCreated, Subject: sent, SubjectHash: nt.SubjectHash,
		seal: subjectSeal(h, *sent)}
	if nt.Batch != nil {
		audit.BatchID = &nt.Batch.BatchID
	}
	return nt, ahead, audit, nil
}

// createTask is CreateTask's transaction; entry is the task's audit entry, its subject
// hashed and sealed ahead: createTask adds the task and its charge to it.
func (db *DB) createTask(ctx context.Context, tx Tx, by By, nt NewTask, ahead *storedAnswer, entry NewAuditEntry) (*Enqueued, error) {
	h, err := db.hasher()
	if err != nil {
		return nil, err
	}
	now := db.now()
	t := &Task{
		ID: uuid.Must(uuid.NewV7()).String(), OrgID: nt.OrgID, ObjectType: nt.Input.Lookup.ObjectType(),
		Operation: TaskOperation, Status: StatusQueued, Lookup: nt.Input.Lookup, Input: nt.RawInput, Target: nt.Input.Target,
		CreditsCharged: nt.Input.Lookup.Cost(), LoopID: nt.LoopID, WatchID: nt.WatchID, CreatedAt: now, ExpiresAt: now.Add(nt.TTL),
	}
	// Whom the input names, and whom the result turns out to be about (a store hit's
	// record): see subjects.go.
	subject, answer := nt.SubjectHash, []byte(nil)
	if nt.IdempotencyKey != "" {
		t.IdempotencyKey = &nt.IdempotencyKey
		// A key taken by a task that retention deletes between the two statements is
		// free again: try to take it once more, as a new request would.
		for attempt := 1; ; attempt++ {
			claimed, err := claimIdempotencyKey(ctx, tx, nt, t.ID, now)
			if err != nil {
				return nil, err
			}
			if claimed {
				break
			}
			replay, err := findIdempotent(ctx, tx, nt)
			if errors.Is(err, errKeyGone) && attempt < 3 {
				continue
			}
			if err != nil {
				return nil, err
			}
			return &Enqueued{Task: replay, Replayed: true}, nil
		}
	}
	if nt.LoopID != nil {
		if err := checkLoopForRun(ctx, tx, nt.OrgID, *nt.LoopID, t.ObjectType); err != nil {
			return nil, err
		}
	}
	var rec *StoredRecord
	var queue *backlog // the organization's, when the task is to be queued
	fail := nt.Fail
	if fail == nil {
		if rec, err = findStoredFor(ctx, tx, nt.OrgID, RecordKey(nt.Input.Lookup, nt.Input.Target)); err != nil {
			return nil, err
		}
	}
	if rec != nil && nt.Input.Lookup == enrich.LookupEmail {
		if ok, err := stillEmployed(ctx, tx, nt.OrgID, rec, nt.Input.Target, now, nt.Freshness); err != nil || !ok {
			rec = nil // the workers resolve the address afresh
			if err != nil {
				return nil, err
			}
		}
	}
	if rec != nil && now.Sub(rec.LastEnriched) < nt.Freshness {
		if rec.SubjectHash == nil { // written by a release that did not hash it
			rec.SubjectHash = resultJSONHash(h, rec.ObjectType, rec.Data)
		}
		// The record may be about someone the input did not name: the person an
		// address belongs to, the company behind a page. A suppressed one is not
		// answered, as if the input had named them.
		if !bytes.Equal(rec.SubjectHash, subject) && len(rec.SubjectHash) > 0 {
			suppressed, err := db.suppressedHashes(ctx, tx, nt.OrgID, rec.SubjectHash)
			if err != nil {
				return nil, err
			}
			if suppressed {
				fail, rec = SuppressedAnswer(nt.Input), nil
			}
		}
	}
	switch {
	case fail != nil:
		t.Status, t.FinishedAt, t.Error = StatusFailed, &now, fail
	case rec != nil && now.Sub(rec.LastEnriched) < nt.Freshness:
		if t.Data = ahead.answer(rec); t.Data == nil {
			var err error
			if t.Data, err = answerFrom(rec, nt.Input); err != nil {
				return nil, err
			}
			if ahead != nil { // the record changed since the answer kept: keep this one
				db.answers.put(nt.Input, &storedAnswer{rec: rec, result: t.Data})
			}
		}
		t.Status, t.FinishedAt = StatusSucceeded, &now
		// A store hit asks no source, and shows where the record's fields came from
		// when it was stored.
		t.Provenance, t.Sources = storedProvenance(rec), json.RawMessage(`[]`)
		answer = rec.SubjectHash
	default:
		if err := tx.LockOrgs(ctx, nt.OrgID); err != nil {
			return nil, err
		}
		if queue, err = askBacklog(ctx, tx, nt.OrgID, nt.MaxBacklog); err != nil {
			return nil, err
		}
		if db.SingleWriter() {
			// The count is read already (SQLite runs it at once): a full backlog is
			// refused before anything is written. PostgreSQL reads it with the grants
			// and the head below, a round trip fewer for every task queued, and
			// undoes the task's row on a refusal.
			if err := queue.check(); err != nil {
				return nil, err
			}
		}
		if err := db.joinQueue(ctx, tx, nt.OrgID); err != nil {
			return nil, err
		}
		t.QueuedAt = &now
	}
	if err := insertTask(ctx, tx, t, subject, answer); err != nil {
		return nil, err
	}
	if nt.Batch != nil {
		if err := linkBatchRow(ctx, tx, nt.Batch, t.ID); err != nil {
			return nil, err
		}
	}
	// What the rest decides on is read in one round trip on PostgreSQL: the backlog
	// (read before the task's row is written, as the statements run in their order),
	// the grants the charge takes from, and the head of the audit chain the entry
	// joins, the last two locked from here to the commit, in the lock order above.
	// A task failed here is refunded: its head is taken last (askAuditHeadBeforeCharge).
	grants, err := askGrants(ctx, tx, nt.OrgID)
	if err != nil {
		return nil, err
	}
	var head *auditHead
	if t.Status != StatusFailed {
		if head, err = db.askAuditHeadBeforeCharge(ctx, tx, nt.OrgID, now); err != nil {
			return nil, err
		}
	}
	if err := tx.Flush(ctx); err != nil {
		return nil, err
	}
	if err := queue.check(); err != nil {
		return nil, err
	}
	if err := charge(ctx, tx, *grants, nt.OrgID, t.ID, t.CreditsCharged, now); err != nil {
		return nil, err
	}
	switch t.Status {
	case StatusQueued:
		if err := tx.NotifyQueued(ctx); err != nil {
			return nil, err
		}
	case StatusFailed:
		if err := refund(ctx, tx, t.ID, now); err != nil {
			return nil, err
		}
		fallthrough
	default:
		if err := deliverSettled(ctx, tx, t.ID, t.LoopID, now); err != nil {
			return nil, err
		}
	}
	// The enrichment's entry in the audit log, last, on the head asked for above, or
	// taking it now.
	entry.TaskID = &t.ID
	if t.Status != StatusFailed { // a task failed here was refunded at once
		entry.Credits = t.CreditsCharged
	}
	if err := db.appendAuditAt(ctx, tx, by, entry, head); err != nil {
		return nil, err
	}
	return &Enqueued{Task: t}, nil
}

// sentSubject is the subject of a task's input as the request sent it, the field that
// names it (email, networkUrl or domain), for the audit log; the normalized target
// when the input has no such field.
func sentSubject(raw json.RawMessage, in enrich.Input) *string {
	var sent struct {
		Email      *string `json:"email"`
		NetworkURL *string `json:"networkUrl"`
		Domain     *string `json:"domain"`
	}
	var v *string
	if json.Unmarshal(raw, &sent) == nil {
		switch in.Lookup {
		case enrich.LookupEmail:
			v = sent.Email
		case enrich.LookupPersonURL, enrich.LookupCompanyURL:
			v = sent.NetworkURL
		case enrich.LookupDomain:
			v = sent.Domain
		}
	}
	if v == nil || *v == "" {
		target := in.Target
		return &target
	}
	return v
}

// storedAnswer is a store hit's result worked out from the record as the reader saw
// it before the transaction: on SQLite, decoding the record and encoding the result
// took an eighth of the single writer's time for each hit, and need not hold it up.
// The transaction reads the record again and uses the answer only if it is the same
// record with the same bytes.
type storedAnswer struct {
	rec    *StoredRecord
	result []byte
}

// answerAhead works out a store hit's result before the transaction, or returns nil
// when the input is not a plain store hit (an email lookup also checks employment
// inside the transaction, and a refused or failed task has no result). It is only a
// head start: whatever fails here, the transaction reads and decides again, and
// reports its own errors. The answer of the same input a moment ago is taken as it
// is, without reading the record: the transaction compares it with the record all the
// same, and a result is a function of the record and the input alone (RecordResult).
// That spares most hits a read of the record and a decode and encode of it: a sixth
// of the CPU time of a hit.
func (db *DB) answerAhead(ctx context.Context, nt NewTask) *storedAnswer {
	if nt.Fail != nil || nt.Input.Lookup == enrich.LookupEmail {
		return nil
	}
	if a := db.answers.get(nt.Input); a != nil {
		return a
	}
	rec, err := findStoredFor(ctx, db.Reader(), nt.OrgID, RecordKey(nt.Input.Lookup, nt.Input.Target))
	if err != nil || rec == nil || db.now().Sub(rec.LastEnriched) >= nt.Freshness {
		return nil
	}
	result, err := answerFrom(rec, nt.Input)
	if err != nil {
		return nil
	}
	a := &storedAnswer{rec: rec, result: result}
	db.answers.put(nt.Input, a)
	return a
}

// answerMemoSize bounds the answers kept: a few MB at the size of a company.
const answerMemoSize = 1024

// answerMemo keeps the latest store hits' answers by their input. An entry is only
// ever a head start (see storedAnswer.answer), so one the store has moved past costs a
// computation in the transaction and is replaced, never a wrong answer; nor another
// organization's: the transaction compares it with the record it reads for the task's
// own organization (findStoredFor).
type answerMemo struct {
	mu sync.Mutex
	m  map[enrich.Input]*storedAnswer
}

func (m *answerMemo) get(in enrich.Input) *storedAnswer {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.m[in]
}

// clear forgets every answer: an erasure may have taken the records they came from.
func (m *answerMemo) clear() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.m)
}

func (m *answerMemo) put(in enrich.Input, a *storedAnswer) {
	// Every task that gets the answer holds the same bytes: none may append in place.
	a.result = slices.Clip(a.result)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = make(map[enrich.Input]*storedAnswer)
	}
	if _, ok := m.m[in]; !ok && len(m.m) >= answerMemoSize {
		for old := range m.m { // any one: the map's order is as good as a random pick
			delete(m.m, old)
			break
		}
	}
	m.m[in] = a
}

// answer is the result worked out ahead, if rec, read inside the transaction, is the
// record it was worked out from.
func (a *storedAnswer) answer(rec *StoredRecord) []byte {
	if a == nil || a.rec.ID != rec.ID || a.rec.ObjectType != rec.ObjectType || a.rec.ConfirmedAlias != rec.ConfirmedAlias ||
		!bytes.Equal(a.rec.Data, rec.Data) {
		return nil
	}
	return a.result
}

func answerFrom(rec *StoredRecord, in enrich.Input) ([]byte, error) {
	res, err := rec.Result(in)
	if err != nil {
		return nil, err
	}
	return ResultJSON(res)
}

// stillEmployed reports whether the person an address is on record for holds a
// current position at the company behind its domain (as the store has it, or named
// after the domain): only then may the address be answered inside the request.
func stillEmployed(ctx context.Context, q Executor, orgID string, person *StoredRecord, address string, now time.Time, freshness time.Duration) (bool, error) {
	_, domain, err := enrich.SplitAddress(address)
	if err != nil {
		return false, nil
	}
	var company *enrich.Company
	stored, err := findStoredFor(ctx, q, orgID, RecordKey(enrich.LookupDomain, domain))
	if err != nil {
		return false, err
	}
	if stored != nil && now.Sub(stored.LastEnriched) < freshness {
		res, err := stored.Result(enrich.Input{Lookup: enrich.LookupDomain, Target: domain})
		if err != nil {
			return false, err
		}
		company = res.Company
	}
	held, err := person.Result(enrich.Input{Lookup: enrich.LookupPersonURL})
	if err != nil || held.Person == nil {
		return false, err
	}
	return enrich.EmployerAt(company, domain).CurrentPosition(held.Person) != nil, nil
}

// claimIdempotencyKey binds the key to the task about to be created, and reports
// false when the key is already bound. The primary key (org_id, key) decides between
// two requests at once: on PostgreSQL the second's insert waits for the first's
// transaction and then does nothing; in READ COMMITTED the statements after it see the
// first's row. On SQLite's single writer the claim is the one statement a new key
// costs.
func claimIdempotencyKey(ctx context.Context, tx Tx, nt NewTask, taskID string, now time.Time) (bool, error) {
	var endpoint *string
	if nt.Endpoint != "" {
		endpoint = &nt.Endpoint
	}
	n, err := tx.Exec(ctx, `INSERT INTO idempotency_keys (org_id, key, endpoint, body_hash, task_id, created_at)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (org_id, key) DO NOTHING`,
		nt.OrgID, nt.IdempotencyKey, endpoint, BodyHash(nt.BodyHash), taskID, ms(now))
	return n == 1, err
}

// errKeyGone is an Idempotency-Key deleted with its task (retention) after the
// insert that found it taken.
var errKeyGone = errors.New("the idempotency key was deleted with its task")

// findIdempotent returns the task the key is bound to, or the 422 when the key was
// first used for another request; the key and its task are read in one statement.
func findIdempotent(ctx context.Context, tx Tx, nt NewTask) (*Task, error) {
	var endpoint *string
	var hash []byte
	t, err := scanTask(tx.QueryRow(ctx, `SELECT idempotency_keys.endpoint, idempotency_keys.body_hash, `+taskColumns+`
		FROM idempotency_keys JOIN tasks ON tasks.id = idempotency_keys.task_id
		WHERE idempotency_keys.org_id = ? AND idempotency_keys.key = ?`, nt.OrgID, nt.IdempotencyKey), &endpoint, &hash)
	if errors.Is(err, ErrNoRows) {
		// The key was there a statement ago; only its task's purge in between removes it.
		return nil, errKeyGone
	}
	if err != nil {
		return nil, fmt.Errorf("reading idempotency key: %w", err)
	}
	// The hash, which covers the endpoint, decides. A key stored before endpoints were
	// kept has none.
	if !bytes.Equal(hash, BodyHash(nt.BodyHash)) {
		var was string
		if endpoint != nil {
			was = *endpoint
		}
		return nil, IdempotencyKeyReused(was, nt.Endpoint)
	}
	return t, nil
}

// backlog is an organization's queued tasks, read by askBacklog, and its limit.
type backlog struct{ queued, limit int64 }

const statusCountQuery = `SELECT coalesce((SELECT n FROM task_counts WHERE org_id = ? AND status = ?), 0)`

// askBacklog asks for the organization's count of queued tasks (Tx.QueryLater), there
// once Tx.Flush has returned; with no limit it asks nothing, and nil checks nothing.
func askBacklog(ctx context.Context, tx Tx, orgID string, limit int64) (*backlog, error) {
	if limit <= 0 {
		return nil, nil
	}
	b := &backlog{limit: limit}
	return b, tx.QueryLater(ctx, func(r Row) error { return r.Scan(&b.queued) }, statusCountQuery, orgID, StatusQueued)
}

// check refuses a task past the limit (429, queue_full).
func (b *backlog) check() error {
	if b != nil && b.queued >= b.limit {
		return QueueFull(b.queued)
	}
	return nil
}

// insertTask writes the task t; subject and answer are the hashes of whom its input
// names and whom its result is about.
func insertTask(ctx context.Context, tx Tx, t *Task, subject, answer []byte) error {
	var taskErr *string
	if t.Error != nil {
		b, err := json.Marshal(t.Error)
		if err != nil {
			return err
		}
		s := string(b)
		taskErr = &s
	}
	resultSubject := answer
	if len(resultSubject) == 0 {
		resultSubject = subject
	}
	result, err := resultID(ctx, tx, t.Data, resultSubject, false)
	if err != nil {
		return err
	}
	return tx.ExecLater(ctx, `INSERT INTO tasks (id, org_id, object_type, status, lookup, input, target,
		credits_charged, loop_id, watch_id, idempotency_key, created_at, queued_at, finished_at, expires_at, result_id, error,
		provenance, sources, subject_hash, answer_hash)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		t.ID, t.OrgID, t.ObjectType, t.Status, string(t.Lookup), string(t.Input), t.Target, t.CreditsCharged,
		t.LoopID, t.WatchID, t.IdempotencyKey, ms(t.CreatedAt), nullMS(t.QueuedAt), nullMS(t.FinishedAt), ms(t.ExpiresAt), result, taskErr,
		nullText(t.Provenance), nullText(t.Sources), subject, answerColumn(subject, answer))
}

const (
	getTaskQuery   = `SELECT ` + taskColumns + ` FROM tasks WHERE id = ? AND org_id = ?`
	listTasksQuery = `SELECT ` + taskColumns + ` FROM tasks WHERE org_id = ?
		ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`
	listTasksByStatusQuery = `SELECT ` + taskColumns + ` FROM tasks WHERE org_id = ? AND status = ?
		ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`
)

// TaskQueries are the statements of GetTask, ListTasks and RequeueAbandoned's list of
// organizations by name, for the drivers' tests of their plans. ListTasks takes the
// organization, the page size and the offset; ListTasksByStatus the status after the
// organization; AbandonedOrgs the time.
var TaskQueries = map[string]string{
	"GetTask":           getTaskQuery,
	"ListTasks":         listTasksQuery,
	"ListTasksByStatus": listTasksByStatusQuery,
	"AbandonedOrgs":     abandonedOrgsQuery,
}

// GetTask returns one of the organization's tasks; another organization's task is
// not found, the same as one that does not exist.
func (db *DB) GetTask(ctx context.Context, orgID, id string) (*Task, error) {
	t, err := scanTask(db.Reader().QueryRow(ctx, getTaskQuery, id, orgID))
	if errors.Is(err, ErrNoRows) {
		return nil, TaskNotFound()
	}
	return t, err
}

// ListTasks returns a page of the organization's tasks, newest first, and how many
// tasks match the filter in all, both from one read view. status "" lists every
// status.
func (db *DB) ListTasks(ctx context.Context, orgID, status string, page, pageSize int) ([]*Task, int64, error) {
	var tasks []*Task
	var total int64
	err := db.Read(ctx, func(q Executor) error {
		query, args := listTasksQuery, []any{orgID}
		if status != "" {
			query, args = listTasksByStatusQuery, append(args, status)
		}
		var err error
		if total, err = taskCount(ctx, q, orgID, status); err != nil {
			return err
		}
		rows, err := q.Query(ctx, query, append(args, pageSize, page*pageSize)...)
		tasks, err = collect(rows, err, func(row Row) (*Task, error) { return scanTask(row) })
		return err
	})
	return tasks, total, err
}

// CancelTask cancels a queued or running task and refunds it; a late result is then
// discarded. A settled task cannot be canceled (409 task_settled). The task's row is
// locked first (PostgreSQL): a Settle, an expiry or another cancel of it waits, then
// finds it settled, so it is refunded once.
func (db *DB) CancelTask(ctx context.Context, orgID, id string) (*Task, error) {
	var t *Task
	err := db.Write(ctx, func(tx Tx) error {
		var err error
		t, err = scanTask(tx.QueryRow(ctx, getTaskQuery+` FOR UPDATE`, id, orgID))
		if errors.Is(err, ErrNoRows) {
			return TaskNotFound()
		}
		if err != nil {
			return err
		}
		if t.Settled() {
			return TaskSettled(t.Status)
		}
		now := db.now()
		if _, err := tx.Exec(ctx, `UPDATE tasks SET status = 'canceled', finished_at = ?, lease_token = NULL, lease_until = NULL
			WHERE id = ?`, ms(now), id); err != nil {
			return err
		}
		t.Status, t.FinishedAt = StatusCanceled, &now
		return refund(ctx, tx, id, now)
	})
	return t, err
}

// CountTasks counts the organization's tasks in one status.
func (db *DB) CountTasks(ctx context.Context, orgID, status string) (int64, error) {
	return taskCount(ctx, db.Reader(), orgID, status)
}

// taskCount reads the organization's count of tasks in a status ("" for all) from
// task_counts, which triggers keep: the same cost at a thousand tasks as at a million.
func taskCount(ctx context.Context, q Executor, orgID, status string) (int64, error) {
	var n int64
	if status == "" {
		err := q.QueryRow(ctx, `SELECT CAST(coalesce(sum(n), 0) AS BIGINT) FROM task_counts WHERE org_id = ?`, orgID).Scan(&n)
		return n, err
	}
	err := q.QueryRow(ctx, statusCountQuery, orgID, status).Scan(&n)
	return n, err
}

// FindTasks returns a page of the organization's tasks matching the filter, newest
// first, and the cursor of the next page (nil when this page is the last). The filter
// picks the index it walks (a Loop's, the queued tasks', or the list's); where
// the engine can be told (Driver.IndexedBy), the query names it, so a schema that could
// no longer serve it fails loudly instead of scanning the table.
func (db *DB) FindTasks(ctx context.Context, orgID string, f TaskFilter) ([]*Task, *TaskCursor, error) {
	limit := f.Limit
	switch {
	case limit <= 0:
		limit = DefaultTaskPage
	case limit > MaxTaskPage:
		limit = MaxTaskPage
	}
	if f.Status != "" && !IsStatus(f.Status) {
		return nil, nil, enrich.Errorf(enrich.KindInvalid, "status %q is not one of queued, running, succeeded, failed, canceled", f.Status)
	}
	if f.ObjectType != "" && f.ObjectType != enrich.ObjectCompany && f.ObjectType != enrich.ObjectPerson {
		return nil, nil, enrich.Errorf(enrich.KindInvalid, "type %q is neither company nor person", f.ObjectType)
	}
	if len(f.LoopID) > 100 {
		return []*Task{}, nil, nil // no Loop has such an id
	}
	query, args := db.FindTasksQuery(orgID, f, limit)
	rows, err := db.Reader().Query(ctx, query, args...)
	tasks, err := collect(rows, err, func(row Row) (*Task, error) { return scanTask(row) })
	if err != nil {
		return nil, nil, err
	}
	if len(tasks) <= limit {
		if tasks == nil {
			tasks = []*Task{}
		}
		return tasks, nil, nil
	}
	tasks = tasks[:limit]
	last := tasks[limit-1]
	return tasks, &TaskCursor{CreatedAt: last.CreatedAt, ID: last.ID}, nil
}

// FindTasksQuery is the statement FindTasks runs for a filter already checked, and
// its arguments; the drivers' tests check its plans. It walks one of three indexes
// backwards: a Loop's tasks by tasks_org_loop_created, the queued tasks by
// tasks_org_queued (the claims' index, which holds them alone), everything else by
// tasks_org_created, whose entries carry status and object_type, so that those
// filters are checked on the index entry and a task's row is read only once it matches.
func (db *DB) FindTasksQuery(orgID string, f TaskFilter, limit int) (string, []any) {
	index := "tasks_org_created"
	switch {
	case f.LoopID != "":
		index = "tasks_org_loop_created"
	case f.Status == StatusQueued:
		index = "tasks_org_queued"
	}
	var q strings.Builder
	q.WriteString(`SELECT ` + taskColumns + ` FROM ` + db.IndexedBy("tasks", index) + ` WHERE org_id = ?`)
	args := []any{orgID}
	if f.LoopID != "" {
		q.WriteString(` AND loop_id = ?`)
		args = append(args, f.LoopID)
	}
	switch {
	case f.Status == StatusQueued:
		// The partial index's own condition, written as it is: INDEXED BY names a
		// partial index only in a statement that states its WHERE, which a parameter in
		// its place does not when the statement is prepared.
		q.WriteString(` AND status = 'queued'`)
	case f.Status != "":
		q.WriteString(` AND status = ?`)
		args = append(args, f.Status)
	}
	if f.ObjectType != "" {
		q.WriteString(` AND object_type = ?`)
		args = append(args, f.ObjectType)
	}
	if !f.From.IsZero() {
		q.WriteString(` AND created_at >= ?`)
		args = append(args, ms(f.From))
	}
	// One upper bound, the tighter: given two, SQLite bounds the index walk by one and
	// checks the other row by row, and a deep page would walk every row above it.
	if f.Before != nil && (f.To.IsZero() || ms(f.Before.CreatedAt) < ms(f.To)) {
		q.WriteString(` AND (created_at, id) < (?, ?)`)
		args = append(args, ms(f.Before.CreatedAt), f.Before.ID)
	} else if !f.To.IsZero() {
		q.WriteString(` AND created_at < ?`)
		args = append(args, ms(f.To))
	}
	q.WriteString(` ORDER BY created_at DESC, id DESC LIMIT ?`)
	args = append(args, limit+1) // one more tells whether a next page exists
	return q.String(), args
}
