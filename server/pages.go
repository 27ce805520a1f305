package server

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/julienschmidt/httprouter"
)

// This file is the whole of what the dashboard (package server/dashboard) uses of the
// server: the same request types, checks, task submission and middleware as the API's
// handlers, so that a rule is written once and a page and an endpoint cannot differ.

// Pages is a browser UI served beside the API, under /dashboard/. routes.go mounts it
// and hands it the requests under /dashboard/ that no route takes.
type Pages interface {
	// Mount adds the pages' routes to the router.
	Mount(r *Router)
	// Refuse answers a request under /dashboard/ that no page takes, as a page.
	Refuse(w http.ResponseWriter, r *http.Request, err *enrich.Error)
}

// The requests, as the API decodes them and the dashboard's forms fill them.
type (
	TaskRequest    = taskRequest
	CompanyRequest = companyRequest
	PersonRequest  = personRequest
	EnrichInput    = enrichInput
	LoopRun        = loopRun
	LoopCreate     = loopCreate
	LoopChange     = loopChange
	// DestinationSpec is a Loop's destination asked for (a HubSpot one) or changed.
	DestinationSpec = destinationSpec
	WatchCreate     = watchCreate
	WatchChange     = watchChange
	Upload          = upload
	BatchFormat     = batchFormat
	Limiter         = limiter
)

// What a batch upload is written in.
const (
	FormatCSV   = formatCSV
	FormatJSONL = formatJSONL
)

// Bounds the API applies, which the dashboard's forms and pages apply too.
const (
	MaxPageOffset      = maxPageOffset
	MaxBatchName       = maxBatchName
	StatusClientClosed = statusClientClosed
)

// BatchInputColumns are the input columns of a batch upload, in order.
var BatchInputColumns = batchInputColumns

// StatusOf is the one mapping of an error's kind to its HTTP status.
var StatusOf = statusOf

// DB is the store the API uses.
func (s *Server) DB() *store.DB { return s.db }

// Config is the server's configuration, its defaults filled in.
func (s *Server) Config() Config { return s.cfg }

// Log is the server's logger.
func (s *Server) Log() *slog.Logger { return s.log }

// WakeSender has the webhook sender look for deliveries due now.
func (s *Server) WakeSender() { s.wakeSender() }

// Route names a route for the request log, metrics and recovery (see route).
func (s *Server) Route(name string, next http.Handler) http.Handler { return s.route(name, next) }

// LimitIP applies the per-address rate limit (see limitIP).
func (s *Server) LimitIP(next http.Handler) http.Handler { return s.limitIP(next) }

// AbortStream ends a download that failed after its first bytes (see abortStream).
func (s *Server) AbortStream(r *http.Request, msg string, err error, attrs ...any) {
	s.abortStream(r, msg, err, attrs...)
}

// ActAs is r acting as actor, for the audit log (ActingOf), with the request's id.
func ActAs(r *http.Request, actor store.Actor) *http.Request {
	return r.WithContext(acting(r.Context(), store.By{Actor: actor, RequestID: info(r).id}))
}

type actingKey struct{}

// acting is ctx carrying who its request acts as, set once where the request is
// authenticated (an API key, an MCP client, a dashboard session).
func acting(ctx context.Context, by store.By) context.Context {
	return context.WithValue(ctx, actingKey{}, by)
}

// ActingOf is who the request of ctx acts as, which the handlers pass to every store
// method that records what it does (store.By): the system outside any request.
func ActingOf(ctx context.Context) store.By {
	if by, ok := ctx.Value(actingKey{}).(store.By); ok {
		return by
	}
	return store.BySystem
}

// SubmitTask creates a task as the enrichment endpoints do (see submitTask).
func (s *Server) SubmitTask(ctx context.Context, tr TaskRequest) (*store.Enqueued, error) {
	return s.submitTask(ctx, tr)
}

// CompanyTask is the task POST /v1/companies/enrich makes of req.
func (s *Server) CompanyTask(req CompanyRequest) (TaskRequest, error) { return req.task(s.norm) }

// PersonTask is the task POST /v1/people/enrich makes of req.
func (s *Server) PersonTask(req PersonRequest) (TaskRequest, error) { return req.task(s.norm) }

// CancelTask cancels a task as POST /v1/tasks/:id/cancel does.
func (s *Server) CancelTask(ctx context.Context, orgID, id string) (*store.Task, error) {
	return s.cancelTask(ctx, orgID, id)
}

// BatchAsk is what an upload asks of its rows (see parseBatchAsk).
type BatchAsk = batchAsk

// ParseBatchAsk reads an upload's object_type, enrich and on_error as POST
// /v1/batches reads its query.
func ParseBatchAsk(objectType, enrichParam, onError string) (BatchAsk, error) {
	return parseBatchAsk(objectType, enrichParam, onError)
}

// BatchPlan is an upload checked row by row, ready to be made a batch: its lookups of
// each kind, and the rows skipped (on_error=skip).
type BatchPlan struct {
	ObjectType        string
	Rows              []store.NewBatchRow
	Estimate          int64
	Skipped           []enrich.RowError
	People, Companies int
}

// PlanBatch checks every row of an upload as POST /v1/batches does (see planBatch).
func (s *Server) PlanBatch(up *Upload, ask BatchAsk) (*BatchPlan, error) {
	p, err := s.planBatch(up, ask)
	if err != nil {
		return nil, err
	}
	return &BatchPlan{ObjectType: p.objectType, Rows: p.rows, Estimate: p.estimate, Skipped: p.skipped,
		People: p.people, Companies: p.companies}, nil
}

// CreateBatch makes a batch as POST /v1/batches does (see createBatch).
func (s *Server) CreateBatch(ctx context.Context, orgID string, body []byte, up *Upload, ask BatchAsk, name, key string) (*store.Batch, bool, error) {
	return s.createBatch(ctx, orgID, body, up, ask, name, key)
}

// BatchOf is the batch the request's path names, in the organization.
func (s *Server) BatchOf(r *http.Request, orgID string) (*store.Batch, error) {
	return s.batchOf(r, orgID)
}

// WriteBatchResults writes a batch's results as GET /v1/batches/:id/results does.
func (s *Server) WriteBatchResults(w http.ResponseWriter, r *http.Request, b *store.Batch, format BatchFormat, fail func(http.ResponseWriter, *http.Request, error)) {
	s.writeBatchResults(w, r, b, format, fail)
}

// NewLoop checks a Loop asked for as POST /v1/loops does (see newLoop).
func (s *Server) NewLoop(ctx context.Context, orgID string, req LoopCreate) (store.NewLoop, error) {
	return s.newLoop(ctx, orgID, req)
}

// LoopPatch checks a change to a Loop as PATCH /v1/loops/:id does (see loopPatch).
func (s *Server) LoopPatch(ctx context.Context, current *store.Loop, req LoopChange) (store.LoopPatch, error) {
	return s.loopPatch(ctx, current, req)
}

// LoopRunInput checks an input to run a Loop on as POST /v1/loops/:id/run does.
func (s *Server) LoopRunInput(l *store.Loop, req LoopRun) (enrich.Input, error) {
	return s.loopRunInput(l, req)
}

// NewWatch checks a watch asked for as POST /v1/watches does (see newWatch).
func (s *Server) NewWatch(orgID string, req WatchCreate, now time.Time) (store.NewWatch, error) {
	return s.newWatch(orgID, req, now)
}

// UpdateWatch applies a change to a watch as PATCH /v1/watches/:id does.
func (s *Server) UpdateWatch(ctx context.Context, orgID, id string, req WatchChange) (*store.Watch, error) {
	return s.updateWatch(ctx, orgID, id, req)
}

// WatchTaskInput is the input a watch's check enriches.
func WatchTaskInput(w *store.Watch) enrich.Input { return watchTaskInput(w) }

// Columns are the upload's columns, in order.
func (u *upload) Columns() []string { return u.columns }

// ReadUpload reads and parses an upload, bounded in bytes and rows (see readUpload).
func ReadUpload(r *http.Request, format BatchFormat) ([]byte, *Upload, error) {
	return readUpload(r, format)
}

// Clip shortens s to at most n characters for a message.
func Clip(s string, n int) string { return clip(s, n) }

// PathID is the :id of the request's route: an id as the store writes ids (Router).
func PathID(r *http.Request) string { return pathID(r) }

// PathParam is the parameter name of the request's route.
func PathParam(r *http.Request, name string) string {
	return httprouter.ParamsFromContext(r.Context()).ByName(name)
}

// IntParam reads an integer query parameter within [lo, hi], def when absent.
func IntParam(q url.Values, name string, def, lo, hi int) (int, error) {
	return intParam(q, name, def, lo, hi)
}

// NewLimiter is a per-key rate limiter.
func NewLimiter(r Rate) *Limiter { return newLimiter(r) }

// Allow takes a token for key, or says how long until one is free.
func (l *limiter) Allow(key string) (time.Duration, bool) { return l.allow(key) }

// SetRequestOrg records the organization a request acts for, for its log line.
func SetRequestOrg(r *http.Request, orgID string) { info(r).orgID = orgID }

// NoteInternalError records err as the request's internal error, logged with it, and
// returns the request's id, or closed when the client hung up and err is only that.
func NoteInternalError(r *http.Request, err error) (id string, closed bool) {
	ri := info(r)
	ri.err = err
	if clientClosed(r) {
		ri.clientClosed = true
		return ri.id, true
	}
	return ri.id, false
}
