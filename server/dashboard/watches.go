package dashboard

import (
	"math"
	"net/http"
	"strconv"
	"strings"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/store"
	"enrichd/watch"
)

// The Watches page. Every change goes through the checks and the store methods the API
// uses (newWatch, updateWatch, submitTask), so a watch made, paused or run here is
// exactly one made, paused or run through /v1/watches.

// watchesPerPage is how many watches the page lists at once.
const watchesPerPage = 50

// maxWatchesPage is the last page the pager goes to, as deep as the API's lists go.
const maxWatchesPage = server.MaxPageOffset/watchesPerPage + 1

// watchForm is what the create form shows: the values just sent and why they were
// refused.
type watchForm struct {
	ObjectType, Domain, NetworkURL, Email, LoopID, Fields string
	EveryDays                                             int
	NotifyUnchanged                                       bool
	Error                                                 string
}

// watchRow is a watch and the name of its Loop.
type watchRow struct {
	*store.Watch
	LoopName string
}

type watchesPage struct {
	Watches            []watchRow
	Loops              []*store.Loop
	Total              int64
	Page, Pages        int
	PrevPage, NextPage int
	Spent              int64
	Cap                *int64
	Create             watchForm
}

func handleWatchesPage(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page, err := server.IntParam(r.URL.Query(), "page", 1, 1, maxWatchesPage)
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		s.renderWatches(w, r, http.StatusOK, page, watchForm{ObjectType: enrich.ObjectCompany, EveryDays: store.DefaultWatchDays}, notice(r))
	})
}

func (s *Dashboard) renderWatches(w http.ResponseWriter, r *http.Request, status, page int, create watchForm, note string) {
	ctx, orgID := r.Context(), dashUser(r).OrgID
	watches, total, err := s.db.ListWatches(ctx, orgID, store.WatchFilter{Page: page - 1, PageSize: watchesPerPage})
	if err != nil {
		s.dashError(w, r, err)
		return
	}
	loops, err := s.db.ListLoops(ctx, orgID)
	if err != nil {
		s.dashError(w, r, err)
		return
	}
	p := watchesPage{Loops: loops, Total: total, Page: page, Pages: max(1, int(math.Ceil(float64(total)/watchesPerPage))), Create: create}
	if p.Spent, p.Cap, err = s.db.WatchSpend(ctx, orgID, watch.MonthStart(s.db.Now())); err != nil {
		s.dashError(w, r, err)
		return
	}
	names := map[string]string{}
	for _, l := range loops {
		names[l.ID] = l.Name
	}
	for _, wt := range watches {
		p.Watches = append(p.Watches, watchRow{Watch: wt, LoopName: names[wt.LoopID]})
	}
	if page > 1 {
		p.PrevPage = min(page-1, p.Pages)
	}
	if page < p.Pages && page < maxWatchesPage {
		p.NextPage = page + 1
	}
	s.render(w, r, status, "watches", view{Title: "Watches", Section: "watches", Notice: note, Data: p})
}

func handleCreateWatchForm(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, u := r.Context(), dashUser(r)
		form := watchForm{ObjectType: enrich.ObjectCompany, EveryDays: store.DefaultWatchDays}
		_, err := func() (*store.Watch, error) {
			if err := parseForm(w, r, maxLoopField); err != nil {
				return nil, err
			}
			req := server.WatchCreate{ObjectType: formValue(r, "object_type"), LoopID: formValue(r, "loop_id")}
			req.Domain, req.NetworkURL, req.Email = formValue(r, "domain"), formValue(r, "networkUrl"), formValue(r, "email")
			form = watchForm{ObjectType: loopText(req.ObjectType), Domain: loopText(req.Domain), NetworkURL: loopText(req.NetworkURL),
				Email: loopText(req.Email), LoopID: loopText(req.LoopID), Fields: strings.TrimSpace(r.PostFormValue("fields")),
				NotifyUnchanged: r.PostForm.Has("notify_unchanged"), EveryDays: store.DefaultWatchDays}
			if v := formValue(r, "every_days"); v != nil {
				n, err := strconv.Atoi(*v)
				if err != nil {
					return nil, enrich.Errorf(enrich.KindInvalid, "every_days must be an integer from %d to %d", store.MinWatchDays, store.MaxWatchDays)
				}
				req.EveryDays, form.EveryDays = &n, n
			}
			if form.Fields != "" {
				var fields []string
				for f := range strings.SplitSeq(form.Fields, ",") {
					if f = strings.TrimSpace(f); f != "" {
						fields = append(fields, f)
					}
				}
				req.Fields = &fields
			}
			if form.NotifyUnchanged {
				req.NotifyUnchanged = &form.NotifyUnchanged
			}
			nw, err := s.srv.NewWatch(u.OrgID, req, s.db.Now())
			if err != nil {
				return nil, err
			}
			return s.db.CreateWatch(ctx, server.ActingOf(ctx), nw)
		}()
		if err != nil {
			status, msg, ok := loopRefusal(w, err)
			if !ok {
				s.dashError(w, r, err)
				return
			}
			form.Error = msg
			s.renderWatches(w, r, status, 1, form, "")
			return
		}
		seeOther(w, r, "/dashboard/watches", "The watch is created: its first check, within the hour, sets the baseline and sends nothing.")
	})
}

// handleSetWatchEnabled pauses or resumes a watch, as PATCH {"enabled": ...} does.
func handleSetWatchEnabled(s *Dashboard, enabled bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wt, err := s.srv.UpdateWatch(r.Context(), dashUser(r).OrgID, server.PathID(r), server.WatchChange{Enabled: &enabled})
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		msg := "The watch is paused: no more scheduled checks."
		if enabled {
			msg = "The watch is resumed: its next check is within the hour."
		}
		seeOther(w, r, "/dashboard/watches", msg+" ("+wt.Target+")")
	})
}

// handleRunWatchForm checks a watch now, as POST /v1/watches/{id}/run does.
func handleRunWatchForm(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		wt, err := s.db.GetWatch(ctx, dashUser(r).OrgID, server.PathID(r))
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		res, err := s.srv.SubmitTask(ctx, server.TaskRequest{OrgID: wt.OrgID, Input: server.WatchTaskInput(wt), Fields: wt.Input, WatchID: &wt.ID,
			Route: "run_watch", Endpoint: "POST /v1/watches/" + wt.ID + "/run"})
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		seeOther(w, r, "/dashboard/tasks/"+res.Task.ID, "The watch is being checked: what changed goes to its Loop when this task settles.")
	})
}

func handleDeleteWatchForm(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, u := r.Context(), dashUser(r)
		wt, err := s.db.GetWatch(ctx, u.OrgID, server.PathID(r))
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		if err := s.db.DeleteWatch(ctx, u.OrgID, wt.ID); err != nil {
			s.dashError(w, r, err)
			return
		}
		seeOther(w, r, "/dashboard/watches", "The watch of "+wt.Target+" is deleted; its tasks stay.")
	})
}
