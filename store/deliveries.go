package store

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"enrichd/enrich"

	"github.com/google/uuid"
)

// Delivery statuses.
const (
	DeliveryPending   = "pending"
	DeliverySucceeded = "succeeded"
	DeliveryFailed    = "failed"
)

// Event kinds.
const (
	EventTaskSucceeded = "task.succeeded"
	EventTaskFailed    = "task.failed"
	EventTest          = "test"
)

// RetrySchedule is how long after a failed attempt the next one is due: attempt 1 is
// immediate, attempt 2 comes 10 seconds after the first failed, and so on. After the
// last attempt fails the delivery is failed.
var RetrySchedule = []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 6 * time.Hour}

// MaxAttempts is how many scheduled attempts a delivery gets.
var MaxAttempts = len(RetrySchedule) + 1

// Delivery is one event sent (or to be sent) to a Loop's webhook. Its JSON is the
// delivery of the API.
type Delivery struct {
	ID             string     `json:"id"`
	LoopID         string     `json:"loop_id"`
	Event          string     `json:"event"`
	TaskID         *string    `json:"task_id"`
	Status         string     `json:"status"`
	Attempts       int        `json:"attempts"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
	LastAttemptAt  *time.Time `json:"last_attempt_at"`
	LastStatusCode *int       `json:"last_status_code"`
	LastError      *string    `json:"last_error"`
	CreatedAt      time.Time  `json:"created_at"`
	// ErasureID names the erasure a person.erased event announces, or the one that
	// took a task's event's payload out of the history.
	ErasureID *string `json:"erasure_id"`
	// Summary says what a destination other than a webhook did with the delivery: the
	// CRM object created or the properties filled, or why nothing was written.
	Summary *string `json:"summary"`

	OrgID string `json:"-"`
}

// Dispatch is a delivery handed to the sender: what to send, where, and with which
// secret to sign it.
type Dispatch struct {
	ID     string
	LoopID string
	Event  string
	URL    string
	Secret string
	// PreviousSecret is the secret a rotation replaced, while its grace period lasts:
	// the delivery is signed with both. Empty otherwise.
	PreviousSecret string
	// DisabledReason is why the Loop's destination is disabled, if it is: the
	// delivery, queued as it was being disabled, is not sent.
	DisabledReason string
	Payload        []byte
	Attempt        int // 1 for the first
	// Kind is the Loop's destination kind (KindWebhook, KindHubSpot); for a HubSpot
	// destination, HubSpot is its token, sealed, and HubSpotOptions its options, and
	// ObjectType the Loop's.
	Kind           string
	ObjectType     string
	HubSpot        HubSpotToken
	HubSpotOptions *string
	// LeaseUntil is the lease this claim holds (ms since the epoch). Recording the
	// attempt checks it: a sender whose lease ran out, and whose delivery another
	// sender claimed and sent since, must not overwrite that sender's outcome.
	LeaseUntil int64
}

// Attempt is how one attempt to send a delivery went.
type Attempt struct {
	At         time.Time // when it was sent
	Ended      time.Time // when it failed or was acknowledged: the next attempt is scheduled from here
	StatusCode int       // 0 when no response came
	Err        string    // "" when the receiver acknowledged
	// RetryAfter is what a 429 or 503 answer's Retry-After asked for (0: nothing).
	RetryAfter time.Duration
	// NotSent: no request left, because the Loop's destination was disabled when the
	// delivery was claimed (Dispatch.DisabledReason). The delivery fails as the
	// destination's pending ones did, and no attempt is counted, of the delivery or of
	// the Loop's failure streak.
	NotSent bool
	// Summary says what the destination did (see Delivery.Summary); "" for a webhook.
	Summary string
	// DisableReason, when set, fails the delivery and disables the Loop's destination
	// for that reason, as a webhook's 410 Gone does (a CRM refusing the token).
	DisableReason string
	// Wrote is what an acknowledged attempt wrote into a CRM, kept for the Loop and the
	// delivery's subject.
	Wrote *CRMWrite
}

// CRMWrite is the CRM object a Loop wrote about a subject, and the keyed hashes of the
// values it wrote, by property.
type CRMWrite struct {
	ObjectType string
	ObjectID   string
	Written    map[string]string
}

// Outcome is what recording the attempt of d writes: acknowledged, the delivery
// succeeded; a 410 Gone, it failed (and the destination is disabled: see Heard), as
// it did when it was not sent to a disabled destination;
// otherwise the next attempt is due on the schedule, no sooner than the receiver's
// Retry-After (capped at the schedule's longest delay), or after the last attempt
// the delivery failed.
func (a *Attempt) Outcome(d *Dispatch) (status string, next *time.Time) {
	switch {
	case a.Err == "":
		return DeliverySucceeded, nil
	case a.NotSent || a.StatusCode == http.StatusGone || a.DisableReason != "" || d.Attempt >= MaxAttempts:
		return DeliveryFailed, nil
	}
	ended := a.Ended
	if ended.IsZero() {
		ended = a.At
	}
	wait := max(RetrySchedule[d.Attempt-1], min(a.RetryAfter, RetrySchedule[len(RetrySchedule)-1]))
	at := ended.Add(wait)
	return DeliveryPending, &at
}

// Heard is what a batch of attempts says of one Loop's receiver.
type Heard struct {
	LoopID string
	// Acknowledged: some attempt was; the failure streak restarts at Failures.
	Acknowledged bool
	// Failures is how many attempts failed after the last acknowledged one (all of
	// them when none was).
	Failures    int
	LastError   string
	LastErrorAt time.Time
	// Gone: the receiver answered 410; the destination is to be disabled.
	Gone bool
	// Disable is why the destination is to be disabled otherwise (Attempt.DisableReason).
	Disable string
}

// AllAcknowledged reports whether every attempt of the batch was acknowledged: then
// only a failure streak is cleared. Otherwise, even with an acknowledged attempt after
// the failed ones, the Loop's last error is written, a 410 Gone among them disables
// the destination, and the failed ones rescheduled to a disabled destination fail.
func (h Heard) AllAcknowledged() bool { return h.LastError == "" }

// HeardFrom sums up a batch of attempts by Loop, in Loop id order (the order drivers
// lock Loops in). Attempts cut short, and those not sent, say nothing.
func HeardFrom(batch []Attempted) []Heard {
	done := make([]Attempted, 0, len(batch))
	for _, a := range batch {
		if a.Attempt != nil && !a.Attempt.NotSent {
			done = append(done, a)
		}
	}
	slices.SortStableFunc(done, func(a, b Attempted) int {
		if c := strings.Compare(a.Dispatch.LoopID, b.Dispatch.LoopID); c != 0 {
			return c
		}
		return a.Attempt.Ended.Compare(b.Attempt.Ended)
	})
	var out []Heard
	for _, a := range done {
		if len(out) == 0 || out[len(out)-1].LoopID != a.Dispatch.LoopID {
			out = append(out, Heard{LoopID: a.Dispatch.LoopID})
		}
		h := &out[len(out)-1]
		if a.Attempt.Err == "" {
			h.Acknowledged, h.Failures = true, 0
			continue
		}
		h.Failures++
		h.LastError, h.LastErrorAt = a.Attempt.Err, a.Attempt.At
		h.Gone = h.Gone || a.Attempt.StatusCode == http.StatusGone
		if a.Attempt.DisableReason != "" {
			h.Disable = a.Attempt.DisableReason
		}
	}
	return out
}

// Attempted is a delivery and how its attempt went; a nil Attempt means the attempt
// was cut short (the sender is stopping) and is not counted: the delivery is due again.
type Attempted struct {
	Dispatch *Dispatch
	Attempt  *Attempt
}

const deliveryColumns = `id, loop_id, org_id, event, task_id, status, attempts, next_attempt_at, last_attempt_at,
	last_status_code, last_error, created_at, erasure_id, summary`

// scanDelivery reads a delivery selected as deliveryColumns, then extra.
func scanDelivery(row Row, extra ...any) (*Delivery, error) {
	var d Delivery
	var next, last sql.NullInt64
	var created int64
	dest := append([]any{&d.ID, &d.LoopID, &d.OrgID, &d.Event, &d.TaskID, &d.Status, &d.Attempts, &next, &last,
		&d.LastStatusCode, &d.LastError, &created, &d.ErasureID, &d.Summary}, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	d.NextAttemptAt, d.LastAttemptAt, d.CreatedAt = fromNullMS(next), fromNullMS(last), fromMS(created)
	return &d, nil
}

func scanDeliveries(rows Rows, err error) ([]*Delivery, error) {
	out, err := collect(rows, err, func(r Row) (*Delivery, error) { return scanDelivery(r) })
	if out == nil && err == nil {
		out = []*Delivery{}
	}
	return out, err
}

// insertDelivery writes a pending delivery, due at once; or, when the Loop's
// destination is disabled, a failed one that says why (retried once it is enabled).
// subject and answer are the hashes of whom its payload is about (those of its task).
func insertDelivery(ctx context.Context, tx Tx, loopID, orgID, event string, taskID *string, payload, subject, answer []byte, now time.Time) (*Delivery, error) {
	d := &Delivery{ID: uuid.Must(uuid.NewV7()).String(), LoopID: loopID, OrgID: orgID, Event: event, TaskID: taskID, CreatedAt: now}
	before, after := NotSentErrorParts()
	var next, last sql.NullInt64
	if subject == nil {
		subject = noSubject
	}
	err := tx.QueryRow(ctx, `INSERT INTO deliveries (id, loop_id, org_id, event, task_id, payload, status, next_attempt_at,
			last_error, last_attempt_at, created_at, subject_hash, answer_hash)
		SELECT ?, id, ?, ?, ?, ?, CASE WHEN destination_disabled_at IS NULL THEN 'pending' ELSE 'failed' END,
			CASE WHEN destination_disabled_at IS NULL THEN CAST(? AS BIGINT) END,
			CASE WHEN destination_disabled_at IS NOT NULL THEN CAST(? AS TEXT) || destination_disabled_reason || CAST(? AS TEXT) END,
			CASE WHEN destination_disabled_at IS NOT NULL THEN CAST(? AS BIGINT) END, ?, ?, ?
		FROM loops WHERE id = ?
		RETURNING status, next_attempt_at, last_error, last_attempt_at`,
		d.ID, orgID, event, taskID, string(payload), ms(now), before, after, ms(now), ms(now), subject, answerColumn(subject, answer), loopID).
		Scan(&d.Status, &next, &d.LastError, &last)
	if errors.Is(err, ErrNoRows) {
		return nil, LoopNotFound()
	}
	d.NextAttemptAt, d.LastAttemptAt = fromNullMS(next), fromNullMS(last)
	return d, err
}

// DeliveryErased refuses a retry of a delivery an erasure took the payload of: a
// task's event erased with its person, or a person.erased event that was delivered
// or failed for good and keeps the erasure's id alone.
func DeliveryErased(event, erasureID string) error {
	msg := "this delivery's payload was erased (erasure " + erasureID + "): there is nothing left to send"
	if event == EventPersonErased {
		msg = "this person.erased event failed for good and kept only its erasure's id (" + erasureID + "), not the identifiers it " +
			"was to send; to tell the receiver again, erase the person again (POST /v1/erasures), which tells every Loop that was sent them"
	}
	return &enrich.Error{Kind: enrich.KindConflict, Code: "delivery_erased", Message: msg}
}

// deliverSettled queues the task.succeeded or task.failed event of a task that has just
// settled, in the transaction that settled it, so that no crash can lose it. A task
// without a Loop, or whose Loop was deleted, sends nothing; a canceled one neither.
// The caller passes the task's loop_id, which it has read anyway: most tasks have
// none, and then nothing more is read.
//
// The Loop's row is read FOR KEY SHARE, which a DeleteLoop at the same moment waits
// for (PostgreSQL): the delivery is then deleted with the Loop, never left pointing at
// nothing.
func deliverSettled(ctx context.Context, tx Tx, taskID string, loopID *string, now time.Time) error {
	if loopID == nil {
		return nil
	}
	var subject, answer []byte
	t, err := scanTask(tx.QueryRow(ctx, `SELECT subject_hash, answer_hash, `+taskColumns+` FROM tasks WHERE id = ?`, taskID), &subject, &answer)
	if err != nil {
		return err
	}
	if t.LoopID == nil || (t.Status != StatusSucceeded && t.Status != StatusFailed) {
		return nil
	}
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM loops WHERE id = ? FOR KEY SHARE)`, *t.LoopID).Scan(&exists); err != nil || !exists {
		return err
	}
	event, payload, err := SettledEvent(t)
	if err != nil || event == "" {
		return err
	}
	_, err = insertDelivery(ctx, tx, *t.LoopID, t.OrgID, event, &t.ID, payload, subject, answer, now)
	return err
}

// CreateTestDelivery queues a `test` event to the Loop: body {event: "test", task:
// null, data: null, error: null}. A disabled Loop can still be tested.
func (db *DB) CreateTestDelivery(ctx context.Context, orgID, loopID string) (*Delivery, error) {
	var d *Delivery
	err := db.Write(ctx, func(tx Tx) error {
		if _, err := findLoop(ctx, tx, orgID, loopID); err != nil {
			return err
		}
		payload, err := TestEventPayload()
		if err != nil {
			return err
		}
		d, err = insertDelivery(ctx, tx, loopID, orgID, EventTest, nil, payload, noSubject, nil, db.now())
		return err
	})
	return d, err
}

const listDeliveriesQuery = `SELECT ` + deliveryColumns + ` FROM deliveries WHERE loop_id = ?
	ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`

// ListDeliveries returns a page of a Loop's deliveries, newest first, and how many it
// has in all, from one snapshot.
func (db *DB) ListDeliveries(ctx context.Context, orgID, loopID string, page, pageSize int) ([]*Delivery, int64, error) {
	var deliveries []*Delivery
	var total int64
	err := db.Read(ctx, func(q Executor) error {
		if _, err := findLoop(ctx, q, orgID, loopID); err != nil {
			return err
		}
		if err := q.QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE loop_id = ?`, loopID).Scan(&total); err != nil {
			return err
		}
		var err error
		deliveries, err = scanDeliveries(q.Query(ctx, listDeliveriesQuery, loopID, pageSize, page*pageSize))
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

const taskDeliveriesQuery = `SELECT ` + deliveryColumns + ` FROM deliveries WHERE task_id = ? AND org_id = ?
	ORDER BY created_at DESC, id DESC LIMIT ?`

// TaskDeliveries returns the deliveries of one of the organization's tasks, newest
// first. Another organization's task is not found.
func (db *DB) TaskDeliveries(ctx context.Context, orgID, taskID string) ([]*Delivery, error) {
	var deliveries []*Delivery
	err := db.Read(ctx, func(q Executor) error {
		var exists bool
		if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM tasks WHERE id = ? AND org_id = ?)`, taskID, orgID).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return TaskNotFound()
		}
		var err error
		deliveries, err = scanDeliveries(q.Query(ctx, taskDeliveriesQuery, taskID, orgID, maxTaskDeliveries))
		return err
	})
	if err != nil {
		return nil, err
	}
	return deliveries, nil
}

// DeliveryStatements are the deliveries' list statements, by operation, with arguments
// of the right types: each engine's tests check that an index serves them.
var DeliveryStatements = map[string]struct {
	Query string
	Args  []any
}{
	"ListDeliveries": {listDeliveriesQuery, []any{"l", 50, 0}},
	"TaskDeliveries": {taskDeliveriesQuery, []any{"t", "o", maxTaskDeliveries}},
}

// GetDelivery returns one of the organization's deliveries and its payload: the exact
// bytes every attempt sends. Another organization's delivery is not found.
func (db *DB) GetDelivery(ctx context.Context, orgID, id string) (*Delivery, []byte, error) {
	var payload string
	d, err := scanDelivery(db.Reader().QueryRow(ctx, `SELECT `+deliveryColumns+`, payload FROM deliveries WHERE id = ? AND org_id = ?`, id, orgID), &payload)
	if errors.Is(err, ErrNoRows) {
		return nil, nil, DeliveryNotFound()
	}
	if err != nil {
		return nil, nil, err
	}
	return d, []byte(payload), nil
}

// RetryDelivery makes a failed or pending delivery due now, with the same id: a
// failed one gets one more attempt, a pending one has its next attempt now instead of
// later on the schedule (a receiver that was down need not wait hours). A pending one
// being attempted right now is left to that attempt. A delivery that succeeded cannot
// be retried (409 delivery_not_failed). The row is locked (PostgreSQL), so an attempt
// recorded at the same moment is either seen or waits.
func (db *DB) RetryDelivery(ctx context.Context, orgID, id string) (*Delivery, error) {
	var d *Delivery
	err := db.Write(ctx, func(tx Tx) error {
		var err error
		d, err = scanDelivery(tx.QueryRow(ctx, `SELECT `+deliveryColumns+` FROM deliveries WHERE id = ? AND org_id = ? FOR UPDATE`, id, orgID))
		if errors.Is(err, ErrNoRows) {
			return DeliveryNotFound()
		}
		if err != nil {
			return err
		}
		if d.Status == DeliverySucceeded {
			return &enrich.Error{Kind: enrich.KindConflict, Code: "delivery_not_failed",
				Message: "the delivery already succeeded (its receiver acknowledged it); there is nothing to retry"}
		}
		if d.ErasureID != nil && (d.Event != EventPersonErased || d.Status != DeliveryPending) {
			return DeliveryErased(d.Event, *d.ErasureID)
		}
		var reason *string
		if err := tx.QueryRow(ctx, `SELECT destination_disabled_reason FROM loops WHERE id = ?`, d.LoopID).Scan(&reason); err != nil {
			return err
		}
		if reason != nil {
			return DestinationDisabled(*reason)
		}
		now := db.now()
		if d.Status == DeliveryPending && d.NextAttemptAt != nil && !d.NextAttemptAt.After(now) {
			return nil // already due, or being attempted: that attempt is the retry
		}
		d.Status, d.NextAttemptAt = DeliveryPending, &now
		// A pending delivery is not leased here: its next attempt was later, and a
		// lease is taken only when an attempt is due.
		_, err = tx.Exec(ctx, `UPDATE deliveries SET status = 'pending', next_attempt_at = ?, lease_until = NULL WHERE id = ?`, ms(now), id)
		return err
	})
	return d, err
}

// ClaimDeliveries hands out up to limit due deliveries, oldest due first, under a lease
// of the given length, never more to one Loop than perLoop less what the sender already
// has in flight to it (inFlight, by Loop): a slow receiver holds up only its own.
// A claim with nothing due does not take a write transaction. Which deliveries are
// picked, and how they are leased, is the engine's (Tx.PickDueDeliveries,
// Tx.LeaseDeliveries): PostgreSQL counts what other replicas have in flight too.
func (db *DB) ClaimDeliveries(ctx context.Context, limit, perLoop int, inFlight map[string]int, lease time.Duration) ([]*Dispatch, error) {
	if limit <= 0 || perLoop <= 0 {
		return nil, nil
	}
	var due bool
	err := db.Reader().QueryRow(ctx, `SELECT EXISTS (SELECT 1 `+dueDeliveries+`)`, dueArgs(ms(db.now()), fullLoops(perLoop, inFlight))...).Scan(&due)
	if err != nil || !due {
		return nil, err
	}
	var out []*Dispatch
	err = db.Write(ctx, func(tx Tx) error {
		now := db.now()
		ids, err := tx.PickDueDeliveries(ctx, ms(now), limit, perLoop, inFlight)
		if err != nil || len(ids) == 0 {
			out = nil
			return err
		}
		out, err = tx.LeaseDeliveries(ctx, ids, ms(now.Add(lease)), ms(now))
		return err
	})
	if err != nil {
		return nil, err // nothing was leased: nothing may be sent
	}
	return out, nil
}

// skipLoops is how many Loops that have their share the due check leaves out by
// itself: the sender's 64 deliveries in flight, at most 8 to one Loop, make at most 8
// such Loops. Past that many, the rest are skipped as the claim reads them.
const skipLoops = 16

// dueDeliveries is the FROM and WHERE of the deliveries a claim may take: pending,
// due, not leased, of a Loop that is not among the full ones; dueArgs gives its
// parameters. The Loops are a fixed list of parameters, so that the statement's text,
// and SQLite's plan of it, is the same on every run.
var dueDeliveries = `FROM deliveries
	WHERE status = 'pending' AND next_attempt_at <= ? AND (lease_until IS NULL OR lease_until <= ?)
	  AND loop_id NOT IN (` + strings.TrimSuffix(strings.Repeat("?, ", skipLoops), ", ") + `)`

// DueDeliveries is dueDeliveries for an engine's PickDueDeliveries, with DueArgs.
var DueDeliveries = dueDeliveries

func dueArgs(now int64, full []any) []any {
	return append([]any{now, now}, full...)
}

// DueArgs are the parameters of DueDeliveries at now for a sender with perLoop and
// inFlight.
func DueArgs(now int64, perLoop int, inFlight map[string]int) []any {
	return dueArgs(now, fullLoops(perLoop, inFlight))
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

// RecordAttempts writes the outcomes of attempts, in one transaction (see
// Attempt.Outcome), and what they say of each Loop's receiver (see recordHeard).
// Deliveries are updated in id order, then Loops in id order, so two replicas
// recording the same deliveries (a lease that ran out mid-send) or the same Loops wait
// on each other rather than deadlock (PostgreSQL).
func (db *DB) RecordAttempts(ctx context.Context, done []Attempted) error {
	sorted := slices.Clone(done)
	slices.SortFunc(sorted, func(a, b Attempted) int { return strings.Compare(a.Dispatch.ID, b.Dispatch.ID) })
	return db.Write(ctx, func(tx Tx) error {
		for _, a := range sorted {
			if err := recordAttempt(ctx, tx, a.Dispatch, a.Attempt); err != nil {
				return err
			}
		}
		for _, h := range HeardFrom(done) {
			if err := recordHeard(ctx, tx, h, db.now()); err != nil {
				return err
			}
		}
		return nil
	})
}

func recordAttempt(ctx context.Context, tx Tx, d *Dispatch, a *Attempt) error {
	if a == nil {
		_, err := tx.Exec(ctx, `UPDATE deliveries SET lease_until = NULL WHERE id = ? AND status = 'pending' AND lease_until = ?`,
			d.ID, d.LeaseUntil)
		return err
	}
	if a.NotSent {
		// As failPending fails the destination's other pending deliveries.
		_, err := tx.Exec(ctx, `UPDATE deliveries SET status = 'failed', next_attempt_at = NULL, lease_until = NULL,
			last_error = ?, last_attempt_at = coalesce(last_attempt_at, ?), payload = `+spendErasureEvent+`
			WHERE id = ? AND status = 'pending' AND lease_until = ?`,
			a.Err, ms(a.At), d.ID, d.LeaseUntil)
		return err
	}
	status, nextAt := a.Outcome(d)
	var code, lastErr any
	if a.StatusCode != 0 {
		code = a.StatusCode
	}
	if a.Err != "" {
		lastErr = a.Err
	}
	payload := `payload`
	if status != DeliveryPending && d.Event == EventPersonErased {
		payload = spendErasureEvent
	}
	var summary any
	if a.Summary != "" {
		summary = a.Summary
	}
	n, err := tx.Exec(ctx, `UPDATE deliveries SET status = ?, attempts = ?, next_attempt_at = ?, lease_until = NULL,
		last_attempt_at = ?, last_status_code = ?, last_error = ?, summary = ?, payload = `+payload+` WHERE id = ? AND status = 'pending' AND lease_until = ?`,
		status, d.Attempt, nullMS(nextAt), ms(a.At), code, lastErr, summary, d.ID, d.LeaseUntil)
	if err != nil || n == 0 || a.Wrote == nil {
		return err
	}
	return keepCRMWrite(ctx, tx, d, a.Wrote, a.Ended)
}

// spendErasureEvent is the payload of a delivery being settled: a person.erased event
// keeps the erasure's id alone once it is delivered or failed for good
// (SpentErasurePayload), any other its own.
const spendErasureEvent = `CASE WHEN event = 'person.erased' THEN ` + spentErasurePayloadSQL + ` ELSE payload END`

// recordHeard keeps a Loop's failure streak and last error, and on a 410 Gone
// disables its destination. An attempt that failed while the destination was being
// disabled was rescheduled by recordAttempt: its Loop's pending deliveries are failed
// here. A batch all acknowledged writes only when a streak is to be cleared; one with
// a failure writes, whatever was acknowledged after it (see Heard.AllAcknowledged).
func recordHeard(ctx context.Context, tx Tx, h Heard, now time.Time) error {
	if h.AllAcknowledged() {
		_, err := tx.Exec(ctx, `UPDATE loops SET delivery_failures = 0 WHERE id = ? AND delivery_failures <> 0`, h.LoopID)
		return err
	}
	var reason *string
	err := tx.QueryRow(ctx, `UPDATE loops SET delivery_failures = CASE WHEN ? = 1 THEN ? ELSE delivery_failures + ? END,
		last_delivery_error = ?, last_delivery_error_at = ? WHERE id = ? RETURNING destination_disabled_reason`,
		boolInt(h.Acknowledged), h.Failures, h.Failures, h.LastError, ms(h.LastErrorAt), h.LoopID).Scan(&reason)
	switch {
	case errors.Is(err, ErrNoRows):
		return nil // the Loop was deleted
	case err != nil:
		return err
	case h.Gone:
		return disableDestination(ctx, tx, h.LoopID, ReasonGone, now)
	case h.Disable != "":
		return disableDestination(ctx, tx, h.LoopID, h.Disable, now)
	case reason != nil:
		return failPending(ctx, tx, h.LoopID, *reason, now)
	}
	return nil
}
