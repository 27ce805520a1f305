package worker

import (
	"context"
	"encoding/json"
	"enrichd/enrich"
	"enrichd/store"
	"errors"
	"slices"
	"time"
)

// A feeding round's bounds.
const (
	batchFeedBatches  = 50  // batches a feeding round takes rows from
	batchFeedPerBatch = 200 // rows of one batch a round makes tasks for
	// Rows whose tasks one transaction makes on SQLite, whose single writer made each
	// row wait on a commit of its own: a 10,000-row batch took 14.5-16.9 s one at a
	// time, 11.8-15.2 s eight at a time (docs/performance.md). PostgreSQL makes them one
	// at a time: its transaction holds the organization's credit grant from the first
	// charge to the commit, and the workers' refunds waited on it (the same batch took
	// 35-41 s one at a time, 49 s eight at a time, 88 s fifty at a time).
	batchFeedAtOnce = 8
)

func (s *Pool) wakeFeeder() {
	select {
	case s.feedWake <- struct{}{}:
	default:
	}
}

// feedBacklog is the most queued tasks an organization may have for a batch row's task
// to be made: half its backlog, so that its own calls keep room while a batch runs.
func (s *Pool) feedBacklog() int64 { return max(1, s.cfg.MaxBacklog/2) }

// feedBatches makes the tasks of batch rows until ctx ends: a round takes the rows
// still without a task and makes each one's task through the path every enrichment
// takes (charged, fair-queued, an Idempotency-Key derived from the batch and the row,
// so a row tried twice, by two replicas or after a restart, makes one task). An
// organization whose backlog is full waits for the next round.
func (s *Pool) feedBatches(ctx context.Context) {
	if s.cfg.RowRequest == nil {
		return // nothing can read the rows' requests back
	}
	tick := time.NewTicker(s.cfg.PollInterval)
	defer tick.Stop()
	for {
		if s.storageWait(ctx, tick.C) {
			continue
		}
		if s.feedRound(ctx) && ctx.Err() == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-s.feedWake:
		case <-tick.C:
		}
	}
}

// feedRound is one round of feedBatches; it reports whether it made a task.
func (s *Pool) feedRound(ctx context.Context) bool {
	pending, err := s.db.PendingBatchRows(ctx, batchFeedBatches, batchFeedPerBatch)
	if err != nil {
		if ctx.Err() == nil && !store.IsStorageFault(err) {
			s.log.Error("reading batch rows to enqueue", "err", err)
		}
		return false
	}
	full := map[string]bool{} // organizations whose backlog is full this round
	made := false
	atOnce := 1
	if s.db.SingleWriter() {
		atOnce = batchFeedAtOnce
	}
	for len(pending) > 0 {
		if ctx.Err() != nil {
			return made
		}
		var rows []store.PendingBatchRow
		for len(pending) > 0 && len(rows) < atOnce {
			if p := pending[0]; !full[p.OrgID] {
				rows = append(rows, p)
			}
			pending = pending[1:]
		}
		errs, err := s.submitRows(ctx, rows)
		if err != nil {
			if ctx.Err() == nil && !store.IsStorageFault(err) {
				s.log.Error("enqueuing batch rows", "first_batch", rows[0].BatchID, "first_row", rows[0].Row, "rows", len(rows), "err", err)
			}
			return made
		}
		// Counted before the refusals are read: one of them may end the round.
		made = made || slices.Contains(errs, nil)
		for i, p := range rows {
			err := errs[i]
			var e *enrich.Error
			switch {
			case err == nil:
				continue
			case !store.IsRefusal(err) || !errors.As(err, &e):
				// A request that could not be read back for a fault of the service.
				if ctx.Err() == nil && !store.IsStorageFault(err) {
					s.log.Error("enqueuing a batch row", "batch", p.BatchID, "row", p.Row, "err", err)
				}
				return made
			case e.Kind == enrich.KindTooManyRequests:
				full[p.OrgID] = true
				continue
			}
			// The row cannot have its task (credits ran out since the upload, say): it
			// fails alone, uncharged, and the batch goes on.
			code := e.Code
			if code == "" {
				code = enrich.CodeInvalidInput
			}
			fail := s.db.FailBatchRow
			if p.Company {
				fail = s.db.FailBatchCompany
			}
			if err := fail(ctx, p.BatchID, p.Row, &enrich.TaskError{Code: code, Message: e.Message}); err != nil {
				if ctx.Err() == nil && !store.IsStorageFault(err) {
					s.log.Error("failing a batch row", "batch", p.BatchID, "row", p.Row, "err", err)
				}
				return made
			}
			made = true
		}
	}
	return made
}

// submitRows makes the tasks of batch rows, in their order, in one transaction, through
// the path every enrichment takes (charged, fair-queued, an Idempotency-Key derived
// from the batch and the row). A row without its task has its
// error in errs: a refusal on its own terms (an *enrich.Error), or a request that
// could not be read back (which may be another error). Any other error is err, and no
// row got its task.
func (s *Pool) submitRows(ctx context.Context, rows []store.PendingBatchRow) (errs []error, err error) {
	errs = make([]error, len(rows))
	subs := make([]store.Submission, 0, len(rows))
	at := make([]int, 0, len(rows)) // the row of each submission
	for i, p := range rows {
		in, fields, err := s.rowRequest(p.ObjectType, p.Request)
		if err != nil {
			errs[i] = err
			continue
		}
		key := store.RowIdempotencyKey(p.BatchID, p.Row)
		if p.Company {
			key = store.CompanyRowIdempotencyKey(p.BatchID, p.Row)
		}
		// A row's lookup is the batch's, in the audit log: its batch.created entry
		// names who uploaded it.
		id := p.BatchID
		subs = append(subs, store.Submission{
			By: store.By{Actor: store.Actor{Kind: store.ActorBatch, ID: &id}},
			Request: taskRequest{OrgID: p.OrgID, Input: in, Fields: fields,
				IdempotencyKey: key, Route: "create_batch", Endpoint: "POST /v1/batches",
				Batch: &store.BatchRowRef{BatchID: p.BatchID, Row: p.Row, Company: p.Company}, MaxBacklog: s.feedBacklog()},
		})
		at = append(at, i)
	}
	if len(subs) == 0 {
		return errs, nil
	}
	outs, refused, err := s.db.SubmitTasks(ctx, subs, s.taskLimits())
	if err != nil {
		return nil, err
	}
	for j, i := range at {
		if errs[i] = refused[j]; outs[j] != nil {
			s.submitted(outs[j])
		}
	}
	return errs, nil
}

// submitTask makes a watch's check through the path every enrichment takes
// (store.DB.SubmitTask), and wakes who must know of it (submitted).
func (s *Pool) submitTask(ctx context.Context, by store.By, tr taskRequest) (*store.Enqueued, error) {
	res, err := s.db.SubmitTask(ctx, by, tr, s.taskLimits())
	if err != nil {
		return nil, err
	}
	s.submitted(res)
	return res, nil
}

func (s *Pool) taskLimits() store.TaskLimits {
	return store.TaskLimits{TTL: s.cfg.TaskTTL, MaxBacklog: s.cfg.MaxBacklog, Freshness: s.cfg.Freshness}
}

// submitted counts a task just made and wakes a worker when it is queued, and the
// sender when it settled at once with a Loop to tell.
func (s *Pool) submitted(res *store.Enqueued) {
	t := res.Task
	if !res.Replayed {
		s.metrics.created(t)
	}
	if !t.Settled() && !res.Replayed {
		s.wakeWorker()
	}
	if t.Settled() && t.LoopID != nil && !res.Replayed {
		s.sender.Wake()
	}
}

type taskRequest = store.TaskRequest

// rowRequest reads a batch row's stored request back as its endpoint would
// (Config.RowRequest).
func (s *Pool) rowRequest(objectType string, raw json.RawMessage) (enrich.Input, any, error) {
	return s.cfg.RowRequest(objectType, raw)
}
