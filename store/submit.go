package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"enrichd/enrich"

	"github.com/google/uuid"
)

// TaskRequest is one enrichment asked for, through the API, the dashboard's forms, the
// MCP tools, a watch's check or a batch's row: each makes exactly the same task, charge
// and idempotency binding through SubmitTask (SubmitTasks for several batch rows).
type TaskRequest struct {
	OrgID  string
	Input  enrich.Input
	LoopID *string
	// WatchID makes the task a watch's check: it asks the source afresh, never the
	// 30-day store, since the watch compares what the source says now with what it
	// said last time.
	WatchID *string
	// Fields is the request as decoded, stored as the task's input and bound to its
	// Idempotency-Key.
	Fields         any
	IdempotencyKey string
	Route          string // the route's name, part of the idempotency binding
	Endpoint       string // "POST /v1/people/enrich"
	// Batch is the batch row the task is made for, if any; MaxBacklog, when set,
	// is a lower backlog limit than the organization's (the batch feeder's).
	Batch      *BatchRowRef
	MaxBacklog int64
}

// TaskLimits are serve's bounds of a new task: its lifetime, the organization's
// backlog, and the freshness window of a stored record served in a source's place.
type TaskLimits struct {
	TTL        time.Duration
	MaxBacklog int64
	Freshness  time.Duration
}

// SubmitTask creates the task, charging for it, bound to its Idempotency-Key by the
// request as decoded. A suppressed subject, a personal-mailbox or a role address
// makes a task failed at once, refunded. The caller wakes a worker when it is queued,
// and the sender when it settled at once with a Loop to tell.
func (db *DB) SubmitTask(ctx context.Context, by By, tr TaskRequest, lim TaskLimits) (*Enqueued, error) {
	nt, err := db.newTask(ctx, tr, lim)
	if err != nil {
		return nil, err
	}
	return db.CreateTask(ctx, by, nt)
}

// newTask is the task a request makes, its subject hashed and checked against the
// suppressions.
func (db *DB) newTask(ctx context.Context, tr TaskRequest, lim TaskLimits) (NewTask, error) {
	bind := tr.Route + "\n"
	if tr.LoopID != nil {
		if _, err := uuid.Parse(*tr.LoopID); err != nil {
			return NewTask{}, enrich.Errorf(enrich.KindInvalid, "loop_id must be the uuid of a Loop")
		}
		bind += *tr.LoopID + "\n"
	}
	freshness := lim.Freshness
	if tr.WatchID != nil {
		bind += "watch " + *tr.WatchID + "\n"
		freshness = 0
	}
	raw, err := json.Marshal(tr.Fields)
	if err != nil {
		return NewTask{}, err
	}
	// The key is bound to the request as decoded, so the same fields in another order
	// or spacing are the same request.
	sum := sha256.Sum256(append([]byte(bind), raw...))
	nt := NewTask{
		OrgID: tr.OrgID, Input: tr.Input, RawInput: raw, LoopID: tr.LoopID, WatchID: tr.WatchID,
		IdempotencyKey: tr.IdempotencyKey, Endpoint: tr.Endpoint, BodyHash: hex.EncodeToString(sum[:]),
		TTL: lim.TTL, MaxBacklog: lim.MaxBacklog, Freshness: freshness, Batch: tr.Batch,
	}
	if tr.MaxBacklog > 0 {
		nt.MaxBacklog = min(nt.MaxBacklog, tr.MaxBacklog)
	}
	// A suppressed subject is refused before the store and any source; so are
	// personal-mailbox and role addresses. The subject's hash is made once, here.
	if nt.SubjectHash, nt.Fail, err = db.InputSuppression(ctx, tr.OrgID, tr.Input); err != nil {
		return NewTask{}, err
	}
	if nt.Fail == nil && tr.Input.Lookup == enrich.LookupEmail {
		nt.Fail = enrich.Refusal(tr.Input.Target)
	}
	return nt, nil
}

// Submission is one request of SubmitTasks, with whom it is made by.
type Submission struct {
	By      By
	Request TaskRequest
}

// SubmitTasks is SubmitTask for several requests, made in their order in one
// transaction: on SQLite, the batch feeder's rows, which one at a time each waited on
// a writer commit of its own. The order is kept so that, when credits run short, the
// earlier rows get them; once an organization's backlog refuses a row, its later rows
// are refused the same way, so that none (a store hit, which the backlog does not
// stop) is made ahead of it. A request refused on its own terms (credits, backlog, a
// Loop gone, an Idempotency-Key bound to another request) gets its *enrich.Error in
// errs, and its writes are undone alone; any other error, a storage fault among them,
// ends the call with nothing written, as it ends SubmitTask.
//
// On PostgreSQL pass one request: with several, the first row's charge holds the
// organization's credit grant while the next takes its row, its turn and its task,
// against the lock order CreateTask keeps, and the workers' refunds wait on the
// grant to the commit (measured slower, docs/performance.md).
func (db *DB) SubmitTasks(ctx context.Context, subs []Submission, lim TaskLimits) (outs []*Enqueued, errs []error, err error) {
	if len(subs) == 1 { // its refusal undoes its own transaction: no savepoint needed
		out, err := db.SubmitTask(ctx, subs[0].By, subs[0].Request, lim)
		if err != nil && !IsRefusal(err) {
			return nil, nil, err
		}
		return []*Enqueued{out}, []error{err}, nil
	}
	type prepared struct {
		nt    NewTask
		ahead *storedAnswer
		audit NewAuditEntry
	}
	preps := make([]prepared, len(subs))
	refused := make([]error, len(subs))
	for i, sub := range subs {
		nt, err := db.newTask(ctx, sub.Request, lim)
		if err == nil {
			preps[i].nt, preps[i].ahead, preps[i].audit, err = db.taskAhead(ctx, nt)
		}
		if err != nil && !IsRefusal(err) {
			return nil, nil, err
		}
		refused[i] = err
	}
	if !slices.Contains(refused, nil) {
		return make([]*Enqueued, len(subs)), refused, nil
	}
	err = db.Write(ctx, func(tx Tx) error {
		// PostgreSQL's Write runs this again after a deadlock: start afresh.
		outs, errs = make([]*Enqueued, len(subs)), slices.Clone(refused)
		full := map[string]error{} // the organizations whose backlog refused a row
		for i, p := range preps {
			if errs[i] != nil {
				continue
			}
			if err, ok := full[subs[i].Request.OrgID]; ok {
				errs[i] = err
				continue
			}
			if _, err := tx.Exec(ctx, `SAVEPOINT submit_row`); err != nil {
				return err
			}
			out, err := db.createTask(ctx, tx, subs[i].By, p.nt, p.ahead, p.audit)
			if err != nil && !IsRefusal(err) {
				return err
			}
			if err != nil {
				if _, err := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT submit_row`); err != nil {
					return err
				}
				var e *enrich.Error
				if errors.As(err, &e) && e.Kind == enrich.KindTooManyRequests {
					full[subs[i].Request.OrgID] = err
				}
			}
			if _, err := tx.Exec(ctx, `RELEASE SAVEPOINT submit_row`); err != nil {
				return err
			}
			outs[i], errs[i] = out, err
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return outs, errs, nil
}

// IsRefusal reports whether err refuses one request on its own terms (an
// *enrich.Error of the request's, not a fault of the service or its storage, which
// is KindUnavailable): the caller goes on with its other requests.
func IsRefusal(err error) bool {
	var e *enrich.Error
	return errors.As(err, &e) && e.Kind != enrich.KindInternal && e.Kind != enrich.KindUnavailable
}

// InputSuppression is how an input's subjects stand for the organization: the hash of
// the subject the task is about (empty for a company's page), and, when one of its
// subjects is suppressed (an address's domain included), the error the task fails
// with. Each subject is hashed once.
func (db *DB) InputSuppression(ctx context.Context, orgID string, in enrich.Input) (subject []byte, fail *enrich.TaskError, err error) {
	h := db.Subjects()
	subs := enrich.InputSubjects(in)
	if h == nil || len(subs) == 0 {
		return nil, nil, nil // a company's page; or no key, which the store refuses
	}
	for i, sub := range subs {
		hash := h.Hash(sub)
		if i == 0 {
			subject = hash[:]
		}
		if fail == nil {
			suppressed, err := db.SuppressedHash(ctx, orgID, hash[:])
			if err != nil {
				return nil, nil, err
			}
			if suppressed {
				fail = SuppressedInput(in, sub)
			}
		}
	}
	return subject, fail, nil
}
