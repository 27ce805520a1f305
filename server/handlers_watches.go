package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"enrichd/enrich"
	"enrichd/store"
	"enrichd/watch"

	"github.com/google/uuid"
)

// maxWatchImportBody bounds the body of an import: 1,000 rows of up to a kilobyte
// each, where one watch's body is bounded by maxBody.
const maxWatchImportBody = 1 << 20

// watchCreate is a watch asked for, through the API (as JSON, alone or as a row of an
// import) or the dashboard's form: nil is a field not sent. The input fields are the
// enrichment endpoints', checked by the same code.
type watchCreate struct {
	ObjectType *string `json:"object_type,omitempty"`
	enrichInput
	LoopID          *string   `json:"loop_id,omitempty"`
	EveryDays       *int      `json:"every_days,omitempty"`
	Fields          *[]string `json:"fields,omitempty"`
	NotifyUnchanged *bool     `json:"notify_unchanged,omitempty"`
	Enabled         *bool     `json:"enabled,omitempty"`
}

// watchChange is a change asked for to a watch: nil leaves a field as it is.
type watchChange struct {
	LoopID          *string   `json:"loop_id,omitempty"`
	EveryDays       *int      `json:"every_days,omitempty"`
	Fields          *[]string `json:"fields,omitempty"`
	NotifyUnchanged *bool     `json:"notify_unchanged,omitempty"`
	Enabled         *bool     `json:"enabled,omitempty"`
}

type watchResponse struct {
	Data *store.Watch `json:"data"`
}

// checkLoopID refuses a loop_id that cannot name a Loop before the store is asked.
func checkLoopID(id string) error {
	if _, err := uuid.Parse(id); err != nil {
		return enrich.Errorf(enrich.KindInvalid, "loop_id must be the uuid of a Loop")
	}
	return nil
}

// watchFields checks the fields a watch compares (store.CheckWatchFields). An empty
// list is every field, as is a list not sent: JSON null is refused everywhere, so []
// is how a PATCH goes back to every field.
func watchFields(objectType string, fields *[]string) ([]string, error) {
	if fields == nil || len(*fields) == 0 {
		return nil, nil
	}
	if err := store.CheckWatchFields(objectType, *fields); err != nil {
		return nil, err
	}
	return *fields, nil
}

// watchInput is the input a watch keeps and gives its tasks: the request's input
// fields, normalized, so that every check asks for exactly what the first one did.
func watchInput(in enrich.Input) json.RawMessage {
	var req enrichInput
	switch in.Lookup {
	case enrich.LookupDomain:
		req.Domain = &in.Target
	case enrich.LookupCompanyURL, enrich.LookupPersonURL:
		req.NetworkURL = &in.Target
	case enrich.LookupEmail:
		req.Email = &in.Target
		for _, h := range []struct {
			v   string
			dst **string
		}{{in.Hints.FullName, &req.FullName}, {in.Hints.Title, &req.Title}, {in.Hints.Location, &req.Location}} {
			if h.v != "" {
				*h.dst = &h.v
			}
		}
	}
	raw, _ := json.Marshal(req) // strings only: it always marshals
	return raw
}

// watchTaskInput is the input of a watch's task (store.Watch.TaskInput).
func watchTaskInput(w *store.Watch) enrich.Input { return w.TaskInput() }

// CheckWatch checks a body of POST /v1/watches as the API does and makes it the
// store's NewWatch: the CLI creates watches through it, so that a watch made there is
// exactly one made through the API. networkHost is serve's --network-host.
func CheckWatch(networkHost, orgID string, body []byte, now time.Time) (store.NewWatch, error) {
	req, err := decodeObject[watchCreate](body)
	if err != nil {
		return store.NewWatch{}, err
	}
	return newWatch(enrich.Normalizer{NetworkHost: networkHost}, orgID, req, now)
}

// CheckWatchChange checks a body of PATCH /v1/watches/{id} for the watch current as
// the API does and makes it the store's WatchPatch, for the CLI.
func CheckWatchChange(current *store.Watch, body []byte, now time.Time) (store.WatchPatch, error) {
	req, err := decodeObject[watchChange](body)
	if err != nil {
		return store.WatchPatch{}, err
	}
	return watchPatch(current, req, now)
}

// newWatch checks a watch asked for and makes it the store's NewWatch, the same for
// the API, an import's rows, the dashboard and the CLI. The Loop is the store's to
// check: it answers 404 for another organization's, as for one that does not exist.
func (s *Server) newWatch(orgID string, req watchCreate, now time.Time) (store.NewWatch, error) {
	return newWatch(s.norm, orgID, req, now)
}

func newWatch(norm enrich.Normalizer, orgID string, req watchCreate, now time.Time) (store.NewWatch, error) {
	nw := store.NewWatch{OrgID: orgID, EveryDays: store.DefaultWatchDays, Enabled: true}
	switch {
	case req.ObjectType == nil:
		return nw, enrich.Errorf(enrich.KindInvalid, "object_type is required: company or person")
	case *req.ObjectType != enrich.ObjectCompany && *req.ObjectType != enrich.ObjectPerson:
		return nw, enrich.Errorf(enrich.KindInvalid, "object_type must be company or person")
	}
	nw.ObjectType = *req.ObjectType
	in, err := req.enrichInput.normalize(norm, nw.ObjectType, "object_type "+nw.ObjectType+" watches")
	if err != nil {
		return nw, err
	}
	if in.Lookup == enrich.LookupEmail {
		// Every check of such an address would fail at once: it is no person to watch.
		if refused := enrich.Refusal(in.Target); refused != nil {
			return nw, enrich.Errorf(enrich.KindInvalid, "email: %s", refused.Message)
		}
	}
	nw.Input, nw.RawInput = in, watchInput(in)
	if req.LoopID == nil {
		return nw, enrich.Errorf(enrich.KindInvalid, "loop_id is required: the Loop a watch sends what changed to")
	}
	if err := checkLoopID(*req.LoopID); err != nil {
		return nw, err
	}
	nw.LoopID = *req.LoopID
	if req.EveryDays != nil {
		if err := store.CheckEveryDays(*req.EveryDays); err != nil {
			return nw, err
		}
		nw.EveryDays = *req.EveryDays
	}
	if nw.Fields, err = watchFields(nw.ObjectType, req.Fields); err != nil {
		return nw, err
	}
	if req.NotifyUnchanged != nil {
		nw.NotifyUnchanged = *req.NotifyUnchanged
	}
	if req.Enabled != nil {
		nw.Enabled = *req.Enabled
	}
	// The id is the store's to make: the first run is spread by what the watch is of,
	// which names it in its organization as well.
	nw.FirstRunAt = watch.FirstRun(orgID+"\n"+nw.LoopID+"\n"+in.Target, now)
	return nw, nil
}

// watchPatch checks a change to the watch current and makes it the store's
// WatchPatch. Turning a watch on (a disabled or paused one) makes it due soon, as a
// new one is; a new every_days is counted from the last run.
func watchPatch(current *store.Watch, req watchChange, now time.Time) (store.WatchPatch, error) {
	p := store.WatchPatch{LoopID: req.LoopID, EveryDays: req.EveryDays, NotifyUnchanged: req.NotifyUnchanged, Enabled: req.Enabled}
	if req.LoopID != nil {
		if err := checkLoopID(*req.LoopID); err != nil {
			return p, err
		}
	}
	if req.EveryDays != nil {
		if err := store.CheckEveryDays(*req.EveryDays); err != nil {
			return p, err
		}
	}
	if req.Fields != nil {
		fields, err := watchFields(current.ObjectType, req.Fields)
		if err != nil {
			return p, err
		}
		p.Fields = &fields
	}
	switch {
	case req.Enabled != nil && *req.Enabled && (!current.Enabled || current.PausedReason != nil):
		next := watch.FirstRun(current.ID, now)
		p.NextRunAt = &next
	case req.EveryDays != nil && *req.EveryDays != current.EveryDays && current.LastRunAt != nil:
		next := watch.NextRun(*current.LastRunAt, *req.EveryDays, now)
		p.NextRunAt = &next
	}
	return p, nil
}

func handleCreateWatch(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := decode[watchCreate](r)
		if err != nil {
			s.error(w, r, err)
			return
		}
		nw, err := s.newWatch(principal(r).OrgID, req, s.db.Now())
		if err != nil {
			s.error(w, r, err)
			return
		}
		wt, err := s.db.CreateWatch(r.Context(), ActingOf(r.Context()), nw)
		if err != nil {
			s.error(w, r, err)
			return
		}
		encode(w, http.StatusCreated, watchResponse{Data: wt})
	})
}

// watchListMeta is what a list of watches says beside the page: the credits the
// organization's watch tasks took this UTC month, and the cap it set (null: none).
type watchListMeta struct {
	WatchCreditsThisMonth int64  `json:"watch_credits_this_month"`
	WatchMonthlyCap       *int64 `json:"watch_monthly_cap"`
}

func handleListWatches(s *Server) http.Handler {
	type response struct {
		Data  []*store.Watch `json:"data"`
		Total int64          `json:"total"`
		Meta  watchListMeta  `json:"meta"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page, size, err := pageParams(r)
		if err != nil {
			s.error(w, r, err)
			return
		}
		ctx, orgID := r.Context(), principal(r).OrgID
		f := store.WatchFilter{Page: page, PageSize: size}
		if q := r.URL.Query(); q.Has("loop_id") {
			f.LoopID = q.Get("loop_id")
			if err := checkLoopID(f.LoopID); err != nil {
				s.error(w, r, err)
				return
			}
			// Another organization's Loop is 404 here too, not an empty list that
			// would say it exists.
			if _, err := s.db.GetLoop(ctx, orgID, f.LoopID); err != nil {
				s.error(w, r, err)
				return
			}
		}
		watches, total, err := s.db.ListWatches(ctx, orgID, f)
		if err != nil {
			s.error(w, r, err)
			return
		}
		res := response{Data: watches, Total: total}
		if res.Data == nil {
			res.Data = []*store.Watch{}
		}
		if res.Meta.WatchCreditsThisMonth, res.Meta.WatchMonthlyCap, err = s.db.WatchSpend(ctx, orgID, watch.MonthStart(s.db.Now())); err != nil {
			s.error(w, r, err)
			return
		}
		encode(w, http.StatusOK, res)
	})
}

func handleGetWatch(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wt, err := s.db.GetWatch(r.Context(), principal(r).OrgID, pathID(r))
		if err != nil {
			s.error(w, r, err)
			return
		}
		encode(w, http.StatusOK, watchResponse{Data: wt})
	})
}

func handleUpdateWatch(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := decode[watchChange](r)
		if err != nil {
			s.error(w, r, err)
			return
		}
		wt, err := s.updateWatch(r.Context(), principal(r).OrgID, pathID(r), req)
		if err != nil {
			s.error(w, r, err)
			return
		}
		encode(w, http.StatusOK, watchResponse{Data: wt})
	})
}

// updateWatch applies a change to a watch, for the API and the dashboard alike.
func (s *Server) updateWatch(ctx context.Context, orgID, id string, req watchChange) (*store.Watch, error) {
	current, err := s.db.GetWatch(ctx, orgID, id)
	if err != nil {
		return nil, err
	}
	p, err := watchPatch(current, req, s.db.Now())
	if err != nil {
		return nil, err
	}
	return s.db.UpdateWatch(ctx, orgID, id, p)
}

func handleDeleteWatch(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.db.DeleteWatch(r.Context(), principal(r).OrgID, pathID(r)); err != nil {
			s.error(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// importRow is one row's answer in an import: the status it would have had alone,
// and the watch or the error body.
type importRow struct {
	Index  int          `json:"index"`
	Status int          `json:"status"`
	Data   *store.Watch `json:"data,omitempty"`
	Error  *errorBody   `json:"error,omitempty"`
}

// rowError is a refused row's status and error body; ok is false for a failure of
// ours, which fails the whole request as it would a single one.
func rowError(err error) (int, *errorBody, bool) {
	var e *enrich.Error
	if !errors.As(err, &e) || e.Kind == enrich.KindInternal || e.Kind == enrich.KindUnavailable {
		return 0, nil, false
	}
	status := statusOf[e.Kind]
	code := e.Code
	if code == "" && status == http.StatusBadRequest {
		code = enrich.CodeInvalidInput
	}
	return status, &errorBody{Error: e.Message, Code: code}, true
}

// handleImportWatches creates up to MaxWatchImport watches in one request: each row
// is checked as POST /v1/watches checks a body and fails alone, with its own status
// and error; the rows that pass are created in one transaction.
func handleImportWatches(s *Server) http.Handler {
	type request struct {
		Watches []json.RawMessage `json:"watches"`
	}
	type response struct {
		Data []importRow `json:"data"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := decodeUpTo[request](r, maxWatchImportBody)
		if err != nil {
			s.error(w, r, err)
			return
		}
		switch {
		case req.Watches == nil:
			err = enrich.Errorf(enrich.KindInvalid, "watches is required: an array of up to %d watches, each a body of POST /v1/watches", store.MaxWatchImport)
		case len(req.Watches) == 0:
			err = enrich.Errorf(enrich.KindInvalid, "watches is empty; send 1 to %d watches", store.MaxWatchImport)
		case len(req.Watches) > store.MaxWatchImport:
			err = enrich.Errorf(enrich.KindInvalid, "watches holds %d rows; send at most %d in one request", len(req.Watches), store.MaxWatchImport)
		}
		if err != nil {
			s.error(w, r, err)
			return
		}
		orgID, now := principal(r).OrgID, s.db.Now()
		rows := make([]importRow, len(req.Watches))
		var valid []store.NewWatch
		var at []int // the row of each valid watch
		for i, raw := range req.Watches {
			rows[i].Index = i
			row, err := decodeObject[watchCreate](raw)
			var nw store.NewWatch
			if err == nil {
				nw, err = s.newWatch(orgID, row, now)
			}
			if err != nil {
				var ok bool
				if rows[i].Status, rows[i].Error, ok = rowError(err); !ok {
					s.error(w, r, err)
					return
				}
				continue
			}
			valid, at = append(valid, nw), append(at, i)
		}
		if len(valid) > 0 {
			results, err := s.db.CreateWatches(r.Context(), ActingOf(r.Context()), valid)
			if err != nil {
				s.error(w, r, err)
				return
			}
			for j, res := range results {
				i := at[j]
				if res.Err != nil {
					var ok bool
					if rows[i].Status, rows[i].Error, ok = rowError(res.Err); !ok {
						s.error(w, r, res.Err)
						return
					}
					continue
				}
				rows[i].Status, rows[i].Data = http.StatusCreated, res.Watch
			}
		}
		encode(w, http.StatusOK, response{Data: rows})
	})
}

// handleRunWatch checks a watch now: its task is enqueued at once through the path
// every enrichment takes (charged, fair-queued, its Idempotency-Key honoured) and the
// answer is an enrichment's. A person asked, so the monthly cap does not hold it back,
// though its credits count towards the month's spend; the schedule is unchanged.
func handleRunWatch(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wt, err := s.db.GetWatch(r.Context(), principal(r).OrgID, pathID(r))
		if err != nil {
			s.error(w, r, err)
			return
		}
		s.answerEnqueue(w, r, taskRequest{Input: watchTaskInput(wt), Fields: wt.Input, WatchID: &wt.ID})
	})
}
