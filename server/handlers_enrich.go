package server

import (
	"context"
	"net/http"
	"unicode/utf8"

	"enrichd/enrich"
	"enrichd/store"
)

// maxIdempotencyKey is the longest Idempotency-Key accepted, in characters.
const maxIdempotencyKey = 255

// companyRequest is the body of POST /v1/companies/enrich. The dashboard's Try it fills
// it too, without a Loop, so that a task from the form is stored exactly as one from
// the API.
type companyRequest struct {
	Domain     *string `json:"domain,omitempty"`
	NetworkURL *string `json:"networkUrl,omitempty"`
	LoopID     *string `json:"loop_id,omitempty"`
}

func (req companyRequest) input(norm enrich.Normalizer) (enrich.Input, error) {
	return norm.CompanyInput(req.Domain, req.NetworkURL)
}

// task is the task POST /v1/companies/enrich makes of the request, bound to an
// Idempotency-Key as that endpoint binds it: the dashboard's Try it and the MCP tool
// make theirs so, and a key sent any of the three ways names one task.
func (req companyRequest) task(norm enrich.Normalizer) (taskRequest, error) {
	in, err := req.input(norm)
	return taskRequest{Input: in, LoopID: req.LoopID, Fields: req, Route: "enrich_company", Endpoint: "POST /v1/companies/enrich"}, err
}

// personRequest is the body of POST /v1/people/enrich, filled by Try it too.
type personRequest struct {
	NetworkURL *string `json:"networkUrl,omitempty"`
	Email      *string `json:"email,omitempty"`
	FullName   *string `json:"fullName,omitempty"`
	Title      *string `json:"title,omitempty"`
	Location   *string `json:"location,omitempty"`
	LoopID     *string `json:"loop_id,omitempty"`
}

func (req personRequest) input(norm enrich.Normalizer) (enrich.Input, error) {
	return norm.PersonInput(req.NetworkURL, req.Email, enrich.SentHints{FullName: req.FullName, Title: req.Title, Location: req.Location})
}

// task is the task POST /v1/people/enrich makes of the request (see companyRequest.task).
func (req personRequest) task(norm enrich.Normalizer) (taskRequest, error) {
	in, err := req.input(norm)
	return taskRequest{Input: in, LoopID: req.LoopID, Fields: req, Route: "enrich_person", Endpoint: "POST /v1/people/enrich"}, err
}

func handleEnrichCompany(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := decode[companyRequest](r)
		if err != nil {
			s.error(w, r, err)
			return
		}
		in, err := req.input(s.norm)
		if err != nil {
			s.error(w, r, err)
			return
		}
		s.enqueue(w, r, in, req.LoopID, req)
	})
}

func handleEnrichPerson(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := decode[personRequest](r)
		if err != nil {
			s.error(w, r, err)
			return
		}
		in, err := req.input(s.norm)
		if err != nil {
			s.error(w, r, err)
			return
		}
		s.enqueue(w, r, in, req.LoopID, req)
	})
}

// idempotencyKey reads the Idempotency-Key header: at most 255 characters of text
// (enrich.CheckText), sent at most once (of two keys, which one binds the request would be a guess).
func idempotencyKey(r *http.Request) (string, error) {
	keys := r.Header.Values("Idempotency-Key")
	switch {
	case len(keys) == 0:
		return "", nil
	case len(keys) > 1:
		return "", enrich.Errorf(enrich.KindInvalid, "Idempotency-Key is sent %d times; send it once", len(keys))
	}
	return keys[0], checkIdempotencyKey("Idempotency-Key", keys[0])
}

// checkIdempotencyKey bounds an idempotency key, sent as the header or as an MCP tool's
// argument (named so in the refusal), and holds it to the rule of text
// (enrich.CheckText): it is stored, and PostgreSQL would refuse bytes that are not
// UTF-8 where SQLite keeps them.
func checkIdempotencyKey(name, key string) error {
	if n := utf8.RuneCountInString(key); n > maxIdempotencyKey {
		return enrich.Errorf(enrich.KindInvalid, "%s is longer than %d characters (%d sent)", name, maxIdempotencyKey, n)
	}
	return enrich.CheckText(name, key)
}

// enqueue creates the task for a validated input and answers with the enqueue
// response (see answerEnqueue).
func (s *Server) enqueue(w http.ResponseWriter, r *http.Request, in enrich.Input, loopID *string, req any) {
	s.answerEnqueue(w, r, taskRequest{Input: in, LoopID: loopID, Fields: req})
}

// answerEnqueue submits tr for the request's organization, bound to its
// Idempotency-Key, and answers with the enqueue response: 200 when the task settled
// inside the request (a fresh stored record, or a refused email address, failed and
// refunded at once) or is an idempotent replay, 202 when it was queued.
func (s *Server) answerEnqueue(w http.ResponseWriter, r *http.Request, tr taskRequest) {
	key, err := idempotencyKey(r)
	if err != nil {
		s.error(w, r, err)
		return
	}
	tr.OrgID, tr.IdempotencyKey, tr.Route, tr.Endpoint = principal(r).OrgID, key, info(r).route, r.Method+" "+r.URL.Path
	res, err := s.submitTask(r.Context(), tr)
	if err != nil {
		s.error(w, r, err)
		return
	}
	t := res.Task
	status := http.StatusOK
	if !t.Settled() && !res.Replayed {
		status = http.StatusAccepted
	}
	if !t.Settled() {
		w.Header().Set("Retry-After", "2")
	}
	if res.Replayed {
		// Tells a replay from a task settled by this request, which both answer 200.
		w.Header().Set("Idempotent-Replayed", "true")
	}
	// The TaskEnqueueResponse: the task, and its error when it already failed; never
	// data.
	encodeTask(w, status, t, nil, t.Error)
}

// taskRequest is one enrichment asked for, through the API or the dashboard's forms: the
// two make exactly the same task, charge and idempotency binding (store.TaskRequest).
type taskRequest = store.TaskRequest

// submitTask creates the task, charging for it, and wakes a worker when it is queued
// and the sender when it settled at once with a Loop to tell.
func (s *Server) submitTask(ctx context.Context, tr taskRequest) (*store.Enqueued, error) {
	res, err := s.db.SubmitTask(ctx, ActingOf(ctx), tr, store.TaskLimits{TTL: s.cfg.TaskTTL, MaxBacklog: s.cfg.MaxBacklog, Freshness: s.cfg.Freshness})
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
		s.wakeSender()
	}
	return res, nil
}
