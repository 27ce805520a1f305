package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/store"

	"github.com/google/uuid"
)

// dateLayout is how the list's date filters travel: what <input type="date"> sends.
const dateLayout = "2006-01-02"

// taskQuery is the task list's filter as the URL carries it, kept as sent so the form
// shows it back and the pager's links keep it.
type taskQuery struct {
	Status, Type, Loop, From, To, Before string
}

// Filtered says whether any filter narrows the list.
func (q taskQuery) Filtered() bool {
	return q.Status != "" || q.Type != "" || q.Loop != "" || q.From != "" || q.To != ""
}

// parseTaskQuery reads the list's filter from the URL into what FindTasks takes. The
// dates are whole UTC days, both ends included.
func parseTaskQuery(v url.Values) (taskQuery, store.TaskFilter, error) {
	q := taskQuery{Status: server.Clip(v.Get("status"), 40), Type: server.Clip(v.Get("type"), 40), Loop: server.Clip(v.Get("loop"), 100),
		From: server.Clip(v.Get("from"), 40), To: server.Clip(v.Get("to"), 40), Before: server.Clip(v.Get("before"), 200)}
	f := store.TaskFilter{Status: q.Status, ObjectType: q.Type}
	if q.Loop != "" {
		id, err := uuid.Parse(q.Loop)
		if err != nil {
			return q, f, enrich.Errorf(enrich.KindInvalid, "loop %q is not the id of a Loop", q.Loop)
		}
		f.LoopID = id.String()
	}
	for _, d := range []struct {
		name, value string
		dst         *time.Time
	}{{"from", q.From, &f.From}, {"to", q.To, &f.To}} {
		if d.value == "" {
			continue
		}
		t, err := time.Parse(dateLayout, d.value)
		if err != nil {
			return q, f, enrich.Errorf(enrich.KindInvalid, "%s %q is not a date like 2025-01-31", d.name, d.value)
		}
		*d.dst = t
	}
	if !f.To.IsZero() {
		f.To = f.To.AddDate(0, 0, 1) // through the end of that day
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return q, f, enrich.Errorf(enrich.KindInvalid, "the from date %s is after the to date %s", q.From, q.To)
	}
	if q.Before != "" {
		c, err := store.ParseTaskCursor(q.Before)
		if err != nil {
			return q, f, err
		}
		f.Before = c
	}
	return q, f, nil
}

// taskStatuses are the statuses the list filters by, in a task's life order.
var taskStatuses = []string{store.StatusQueued, store.StatusRunning, store.StatusSucceeded, store.StatusFailed, store.StatusCanceled}

func handleTaskList(s *Dashboard) http.Handler {
	type data struct {
		Q        taskQuery
		Tasks    []*store.Task
		Next     string // the cursor of the next, older page; "" on the last
		Loops    []*store.Loop
		LoopName map[string]string
		Statuses []string
		Types    []string
		// Total counts the tasks the list holds, from the kept counts: known only when
		// the list is not filtered or filtered by status alone; -1 otherwise.
		Total int64
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := dashUser(r)
		ctx := r.Context()
		q, f, err := parseTaskQuery(r.URL.Query())
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		d := data{Q: q, Statuses: taskStatuses, Types: []string{enrich.ObjectCompany, enrich.ObjectPerson}, Total: -1}
		tasks, next, err := s.db.FindTasks(ctx, u.OrgID, f)
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		d.Tasks = tasks
		if next != nil {
			d.Next = next.String()
		}
		if d.Loops, err = s.db.ListLoops(ctx, u.OrgID); err != nil {
			s.dashError(w, r, err)
			return
		}
		d.LoopName = loopNames(d.Loops)
		if q.Type == "" && q.Loop == "" && q.From == "" && q.To == "" {
			if d.Total, err = s.db.CountTasks(ctx, u.OrgID, q.Status); err != nil {
				s.dashError(w, r, err)
				return
			}
		}
		s.render(w, r, http.StatusOK, "tasks", view{Title: "Tasks", Section: "tasks", Notice: notice(r), Data: d})
	})
}

func loopNames(loops []*store.Loop) map[string]string {
	names := make(map[string]string, len(loops))
	for _, l := range loops {
		names[l.ID] = l.Name
	}
	return names
}

// taskPage is what a task's page shows; the part that changes while the task runs is
// also the fragment htmx polls.
type taskPage struct {
	Task       *store.Task
	Loop       *store.Loop // nil when the task has none or its Loop was deleted
	Deliveries []*store.Delivery
	// Balance is the organization's balance once the task settled, when a refund has
	// had its effect; nil before.
	Balance *int64
	// Refunded says the task's charge was given back: it failed or was canceled.
	Refunded bool
	// Card is the result as people read it, once the task succeeded.
	Card *resultCard
	// Trace is where the answer came from: each field's source, the sources asked.
	Trace *taskTrace
	// Polled says the page is answering htmx's poll of the part that changes: once the
	// task settled, that answer also takes away what only an unsettled task offers.
	Polled bool
	// Retry is the form an ambiguous email answer offers, when a hint can help.
	Retry *hintRetry
}

// hintRetry is the address of an ambiguous email lookup sent again with hints, as
// POST /v1/people/enrich takes them: the hints the answer named as able to tell the
// people apart, and those the lookup was sent with, filled in as sent. The retry
// decides among the people the first lookup gathered, without a new search.
type hintRetry struct {
	Email string
	Hints []hintField
	Cost  int64
}

// Mixed says some of the hints shown are there as sent, not as of help: the form
// then marks those that are.
func (r *hintRetry) Mixed() bool {
	for _, h := range r.Hints {
		if !h.Helps {
			return true
		}
	}
	return false
}

type hintField struct {
	Name, Label, Value string
	Helps              bool // named by the answer's hintsAccepted
}

// hintLabels are the hints of an email lookup, in the order the forms show them.
var hintLabels = []struct{ name, label string }{{"fullName", "Full name"}, {"title", "Title"}, {"location", "Location"}}

// retryOf is the retry an ambiguous email lookup's page offers; nil for any other
// task, and for an address no hint can settle.
func retryOf(t *store.Task) *hintRetry {
	if t.Status != store.StatusFailed || t.Error == nil || t.Error.Code != enrich.CodeAmbiguous ||
		t.Lookup != enrich.LookupEmail || len(t.Error.HintsAccepted) == 0 {
		return nil
	}
	var sent map[string]any
	if err := json.Unmarshal(t.Input, &sent); err != nil {
		sent = nil
	}
	text := func(name string) string {
		v, _ := sent[name].(string)
		return v
	}
	r := &hintRetry{Email: text("email"), Cost: enrich.LookupEmail.Cost()}
	if r.Email == "" {
		r.Email = t.Target
	}
	for _, h := range hintLabels {
		f := hintField{Name: h.name, Label: h.label, Value: text(h.name), Helps: slices.Contains(t.Error.HintsAccepted, h.name)}
		if f.Helps || f.Value != "" {
			r.Hints = append(r.Hints, f)
		}
	}
	return r
}

// PollSeconds is how often the page asks again while the task is unsettled: what the
// API's Retry-After says.
func (taskPage) PollSeconds() int { return 2 }

func handleTaskPage(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := dashUser(r)
		ctx := r.Context()
		id := server.PathID(r)
		t, err := s.db.GetTask(ctx, u.OrgID, id)
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		p := taskPage{Task: t, Refunded: t.Status == store.StatusFailed || t.Status == store.StatusCanceled,
			Card: newResultCard(t), Trace: traceOf(t), Polled: r.Header.Get("HX-Request") == "true" && r.Header.Get("HX-Target") == "task-live",
			Retry: retryOf(t)}
		if t.LoopID != nil {
			p.Loop, err = s.db.GetLoop(ctx, u.OrgID, *t.LoopID)
			var e *enrich.Error
			if err != nil && !(errors.As(err, &e) && e.Kind == enrich.KindNotFound) {
				s.dashError(w, r, err)
				return
			}
		}
		if p.Deliveries, err = s.db.TaskDeliveries(ctx, u.OrgID, t.ID); err != nil {
			s.dashError(w, r, err)
			return
		}
		if t.Settled() {
			// Read once settled only: the balance is a write (it writes off expired
			// grants), too much for every poll of a running task.
			b, err := s.db.CreditBalance(ctx, u.OrgName)
			if err != nil {
				s.dashError(w, r, err)
				return
			}
			p.Balance = &b.Balance
		}
		s.render(w, r, http.StatusOK, "task", view{Title: "Task " + t.Target, Section: "tasks", Notice: notice(r), Data: p})
	})
}

func handleDashCancelTask(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := dashUser(r)
		t, err := s.srv.CancelTask(r.Context(), u.OrgID, server.PathID(r))
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		seeOther(w, r, "/dashboard/tasks/"+url.PathEscape(t.ID),
			fmt.Sprintf("The task is canceled and its %s refunded.", credits(t.CreditsCharged)))
	})
}

// credits words an amount of credits.
func credits(n int64) string {
	if n == 1 {
		return "1 credit"
	}
	return fmt.Sprintf("%d credits", n)
}

// creditsWere words an amount of credits as the subject of "were": "1 credit was".
func creditsWere(n int64) string {
	if n == 1 {
		return "1 credit was"
	}
	return credits(n) + " were"
}

// lookupName words what a task looked its target up by.
func lookupName(l enrich.Lookup) string {
	switch l {
	case enrich.LookupDomain:
		return "domain"
	case enrich.LookupCompanyURL:
		return "company page"
	case enrich.LookupPersonURL:
		return "profile"
	case enrich.LookupEmail:
		return "email"
	}
	return string(l)
}
