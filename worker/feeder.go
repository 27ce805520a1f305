package worker

import (
	"context"
	"encoding/json"
	"enrichd/enrich"
	"enrichd/store"
	"errors"
	"time"
)

// A feeding round's bounds.
const (
	batchFeedBatches  = 50  // batches a feeding round takes rows from
	batchFeedPerBatch = 200 // rows of one batch a round makes tasks for
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
	for _, p := range pending {
		if ctx.Err() != nil {
			return made
		}
		if full[p.OrgID] {
			continue
		}
		in, fields, err := s.rowRequest(p.ObjectType, p.Request)
		if err == nil {
			key := store.RowIdempotencyKey(p.BatchID, p.Row)
			if p.Company {
				key = store.CompanyRowIdempotencyKey(p.BatchID, p.Row)
			}
			// A row's lookup is the batch's, in the audit log: its batch.created entry
			// names who uploaded it.
			id := p.BatchID
			byBatch := store.By{Actor: store.Actor{Kind: store.ActorBatch, ID: &id}}
			_, err = s.submitTask(ctx, byBatch, taskRequest{OrgID: p.OrgID, Input: in, Fields: fields,
				IdempotencyKey: key, Route: "create_batch", Endpoint: "POST /v1/batches",
				Batch: &store.BatchRowRef{BatchID: p.BatchID, Row: p.Row, Company: p.Company}, MaxBacklog: s.feedBacklog()})
		}
		var e *enrich.Error
		switch {
		case err == nil:
			made = true
			continue
		case !errors.As(err, &e) || e.Kind == enrich.KindInternal || e.Kind == enrich.KindUnavailable:
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
	return made
}

// submitTask makes a watch's or a batch row's task through the path every enrichment
// takes (store.DB.SubmitTask), and wakes a worker when it is queued and the sender
// when it settled at once with a Loop to tell.
func (s *Pool) submitTask(ctx context.Context, by store.By, tr taskRequest) (*store.Enqueued, error) {
	res, err := s.db.SubmitTask(ctx, by, tr, store.TaskLimits{TTL: s.cfg.TaskTTL, MaxBacklog: s.cfg.MaxBacklog, Freshness: s.cfg.Freshness})
	if err != nil {
		return nil, err
	}
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
	return res, nil
}

type taskRequest = store.TaskRequest

// rowRequest reads a batch row's stored request back as its endpoint would
// (Config.RowRequest).
func (s *Pool) rowRequest(objectType string, raw json.RawMessage) (enrich.Input, any, error) {
	return s.cfg.RowRequest(objectType, raw)
}
