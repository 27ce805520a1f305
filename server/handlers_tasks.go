package server

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"enrichd/enrich"
	"enrichd/store"
)

const (
	defaultPageSize = 25
	maxPageSize     = 100
	// maxPageOffset bounds the rows a page skips (page × pageSize): the database walks
	// every skipped row, so an unbounded page is unbounded work for one request.
	maxPageOffset = 10_000
)

// handleGetTask answers {task, data, error}: data once succeeded, error once failed.
func handleGetTask(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		org, id := principal(r).OrgID, pathID(r)
		if body, ok := s.settled.get(org, id, s.db.Now(), s.cfg.Retain); ok {
			writeJSON(w, http.StatusOK, body)
			return
		}
		epoch, known := s.settled.epochNow()
		t, err := s.db.GetTask(r.Context(), org, id)
		if err != nil {
			s.error(w, r, err)
			return
		}
		body := taskAnswer(t)
		if !t.Settled() {
			w.Header().Set("Retry-After", "2")
		} else if t.FinishedAt != nil {
			s.settled.putAt(org, id, *t.FinishedAt, body, epoch, known)
		}
		writeJSON(w, http.StatusOK, body)
	})
}

// handleListTasks answers {data: [tasks], total}.
func handleListTasks(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, page, size, err := taskListParams(r.URL.Query())
		if err != nil {
			s.error(w, r, err)
			return
		}
		tasks, total, err := s.db.ListTasks(r.Context(), principal(r).OrgID, status, page, size)
		if err != nil {
			s.error(w, r, err)
			return
		}
		encodeTaskList(w, tasks, total)
	})
}

// taskListParams reads what a task list asks for: a status, or "" for all, and the
// paging (see pageParams). GET /v1/tasks and the MCP tool list_tasks read it so.
func taskListParams(q url.Values) (status string, page, size int, err error) {
	status = q.Get("status")
	if q.Has("status") && !store.IsStatus(status) {
		return "", 0, 0, enrich.Errorf(enrich.KindInvalid, "status must be one of queued, running, succeeded, failed, canceled")
	}
	page, size, err = pageParamsOf(q)
	return status, page, size, err
}

// pageParams reads the paging of a list: page from 0, pageSize from 1 to 100, 25 when
// absent, and page × pageSize at most maxPageOffset.
func pageParams(r *http.Request) (page, size int, err error) {
	return pageParamsOf(r.URL.Query())
}

func pageParamsOf(q url.Values) (page, size int, err error) {
	if page, err = intParam(q, "page", 0, 0, maxPageOffset); err != nil {
		return 0, 0, err
	}
	if size, err = intParam(q, "pageSize", defaultPageSize, 1, maxPageSize); err != nil {
		return 0, 0, err
	}
	if page*size > maxPageOffset {
		return 0, 0, enrich.Errorf(enrich.KindInvalid, "page × pageSize must be at most %d (the rows a page may skip), not %d × %d = %d; a list reaches back %d rows",
			maxPageOffset, page, size, page*size, maxPageOffset)
	}
	return page, size, nil
}

// intParam reads an integer query parameter from lo to hi: plain digits, def when the
// parameter is absent.
func intParam(q url.Values, name string, def, lo, hi int) (int, error) {
	if !q.Has(name) {
		return def, nil
	}
	raw := q.Get(name)
	n, err := strconv.Atoi(raw)
	if err != nil || strings.Trim(raw, "0123456789") != "" || n < lo || n > hi {
		return 0, enrich.Errorf(enrich.KindInvalid, "%s must be an integer from %d to %d", name, lo, hi)
	}
	return n, nil
}

func handleCancelTask(s *Server) http.Handler {
	type response struct {
		Task *store.Task `json:"task"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, err := s.cancelTask(r.Context(), principal(r).OrgID, pathID(r))
		if err != nil {
			s.error(w, r, err)
			return
		}
		encode(w, http.StatusOK, response{Task: t})
	})
}

// cancelTask cancels a queued or running task, refunding it, for the API and the
// dashboard alike.
func (s *Server) cancelTask(ctx context.Context, orgID, id string) (*store.Task, error) {
	t, err := s.db.CancelTask(ctx, orgID, id)
	if err != nil {
		return nil, err
	}
	s.metrics.settled(t.ObjectType, t.Status, t.CreditsCharged)
	return t, nil
}
