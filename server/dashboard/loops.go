package dashboard

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/store"
)

// The Loops pages, modelled on Stripe's webhook endpoints and Svix's app portal. Every
// change goes through the checks the API makes (newLoop, loopPatch, loopRunInput) and
// the same store methods, so a Loop made or changed here is exactly one made or changed
// through /v1/loops.

// maxLoopField bounds every field of the Loop forms, in characters: a webhook URL is the
// longest, and the API's own checks apply after.
const maxLoopField = 4096

// deliveriesPerPage is how many deliveries a Loop's page lists at once.
const deliveriesPerPage = 50

// "Send test event" waits at most testEventWait for the receiver's answer: longer than
// an attempt may take by default (10 s), shorter than a person waits for a page.
const (
	testEventWait = 15 * time.Second
	testEventPoll = 100 * time.Millisecond
)

// loopForm is what a Loop form shows: the Loop's values, or the values just sent and
// the reason they were refused.
type loopForm struct {
	Name, WebhookURL, ObjectType string
	Enabled                      bool
	Error                        string
	// Kind is the destination's kind; for HubSpot, its options (the token is never
	// shown back, not even to the person who just typed it).
	Kind                            string
	Refresh, Provenance, GDPRDelete bool
}

type loopsPage struct {
	Loops  []*store.Loop
	Create loopForm
}

// loopPage is what a Loop's page shows.
type loopPage struct {
	Loop *store.Loop
	// Secret is the signing secret, only in the answer to the create or the rotation
	// that made it: the store never gives it back again.
	Secret      string
	Edit        loopForm
	Run         runForm
	Test        *testResult
	Deliveries  []*store.Delivery
	Total       int64
	Page, Pages int // Page counts from 1
	// PrevPage and NextPage are the pages the pager links to, 0 for none.
	PrevPage, NextPage int
	MaxAttempts        int
	// OOB is set when htmx asked for the test result alone: the deliveries list, which
	// has a new row, comes along to be swapped out of band.
	OOB bool
}

// runForm is the "Run" form: the input sent, and why it was refused.
type runForm struct {
	Input server.LoopRun
	Error string
}

// testResult is how the receiver answered a test event, or that it had not yet.
type testResult struct {
	Delivery *store.Delivery
	Answered bool   // the first attempt was recorded within testEventWait
	Status   string // "204 No Content", when the receiver answered at all
	Waited   string
}

// loopRefusal is the status and message of a refusal a form shows beside itself; ok
// is false for a failure of ours, which gets the error page instead.
func loopRefusal(w http.ResponseWriter, err error) (status int, msg string, ok bool) {
	var e *enrich.Error
	if !errors.As(err, &e) || e.Kind == enrich.KindInternal {
		return 0, "", false
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	return server.StatusOf[e.Kind], e.Message, true
}

// loopFormField is a form field trimmed, nil only when the form did not have it: a
// field left empty is sent as empty, to be refused as the API refuses an empty name.
func loopFormField(r *http.Request, name string) *string {
	if !r.PostForm.Has(name) {
		return nil
	}
	v := strings.TrimSpace(r.PostFormValue(name))
	return &v
}

// loopCheckbox is a checkbox of a form that always shows it: a browser sends a ticked
// box and leaves an unticked one out.
func loopCheckbox(r *http.Request, name string) *bool {
	v := r.PostForm.Has(name)
	return &v
}

func loopText(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func loopEditForm(l *store.Loop) loopForm {
	f := loopForm{Name: l.Name, WebhookURL: l.Destination.URL, ObjectType: l.ObjectType, Enabled: l.Enabled, Kind: l.Destination.Kind}
	if o := l.Destination.HubSpotOptions; o != nil {
		f.Refresh, f.Provenance, f.GDPRDelete = o.Refresh, o.Provenance, o.GDPRDelete
	}
	return f
}

func handleLoopsPage(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.renderLoops(w, r, http.StatusOK, loopForm{ObjectType: enrich.ObjectCompany, Enabled: true, Kind: store.KindWebhook}, notice(r))
	})
}

func (s *Dashboard) renderLoops(w http.ResponseWriter, r *http.Request, status int, create loopForm, note string) {
	loops, err := s.db.ListLoops(r.Context(), dashUser(r).OrgID)
	if err != nil {
		s.dashError(w, r, err)
		return
	}
	s.render(w, r, status, "loops", view{Title: "Loops", Section: "loops", Notice: note, Data: loopsPage{Loops: loops, Create: create}})
}

func handleCreateLoopForm(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, u := r.Context(), dashUser(r)
		form := loopForm{ObjectType: enrich.ObjectCompany, Enabled: true, Kind: store.KindWebhook}
		l, err := func() (*store.Loop, error) {
			if err := parseForm(w, r, maxLoopField); err != nil {
				return nil, err
			}
			req := server.LoopCreate{Name: formValue(r, "name"), WebhookURL: formValue(r, "webhook_url"),
				ObjectType: formValue(r, "object_type"), Enabled: loopCheckbox(r, "enabled")}
			form = loopForm{Name: loopText(req.Name), WebhookURL: loopText(req.WebhookURL), ObjectType: loopText(req.ObjectType), Enabled: *req.Enabled,
				Kind: store.KindWebhook}
			if kind := loopText(formValue(r, "kind")); kind == store.KindHubSpot {
				// The HubSpot fields, as the API's destination; the webhook URL field is
				// left out, whatever it holds.
				d := &server.DestinationSpec{Kind: &kind, Token: formValue(r, "token"), Refresh: loopCheckbox(r, "refresh"),
					Provenance: loopCheckbox(r, "provenance"), GDPRDelete: loopCheckbox(r, "gdpr_delete")}
				req.WebhookURL, req.Destination = nil, d
				form.Kind, form.Refresh, form.Provenance, form.GDPRDelete = kind, *d.Refresh, *d.Provenance, *d.GDPRDelete
			}
			// The URL check looks the host up: before the store's transaction, as the API does.
			nl, err := s.srv.NewLoop(ctx, u.OrgID, req)
			if err != nil {
				return nil, err
			}
			return s.db.CreateLoop(ctx, nl)
		}()
		if err != nil {
			status, msg, ok := loopRefusal(w, err)
			if !ok {
				s.dashError(w, r, err)
				return
			}
			form.Error = msg
			s.renderLoops(w, r, status, form, "")
			return
		}
		if l.Destination.Kind == store.KindHubSpot {
			s.showLoop(w, r, http.StatusCreated, l, 1, "The Loop "+l.Name+" is created: HubSpot accepted its token, which is kept sealed and not shown again.", nil)
			return
		}
		s.showLoop(w, r, http.StatusCreated, l, 1, "The Loop "+l.Name+" is created. Copy its signing secret now: it is not shown again.",
			func(p *loopPage) { p.Secret = l.Destination.Secret })
	})
}

// loopPage reads what the page of the Loop l shows: its deliveries, a page of them.
func (s *Dashboard) loopPage(ctx context.Context, l *store.Loop, page int) (*loopPage, error) {
	deliveries, total, err := s.db.ListDeliveries(ctx, l.OrgID, l.ID, page-1, deliveriesPerPage)
	if err != nil {
		return nil, err
	}
	p := &loopPage{Loop: l, Edit: loopEditForm(l), Deliveries: deliveries, Total: total, Page: page,
		Pages: max(1, int(math.Ceil(float64(total)/deliveriesPerPage))), MaxAttempts: store.MaxAttempts}
	if page > 1 {
		p.PrevPage = min(page-1, p.Pages)
	}
	if page < p.Pages && page < maxDeliveriesPage {
		p.NextPage = page + 1
	}
	return p, nil
}

// maxDeliveriesPage is the last page of deliveries a Loop's page goes to: OFFSET walks
// every row it skips, and the API stops at the same depth.
const maxDeliveriesPage = server.MaxPageOffset/deliveriesPerPage + 1

func handleLoopPage(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l, err := s.db.GetLoop(r.Context(), dashUser(r).OrgID, server.PathID(r))
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		page, err := server.IntParam(r.URL.Query(), "page", 1, 1, maxDeliveriesPage)
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		s.showLoop(w, r, http.StatusOK, l, page, notice(r), nil)
	})
}

// refuseLoopForm shows a Loop's page again with a form's refusal beside the form; set
// puts the message in the page. A failure of ours gets the error page.
func (s *Dashboard) refuseLoopForm(w http.ResponseWriter, r *http.Request, l *store.Loop, err error, set func(p *loopPage, msg string)) {
	status, msg, ok := loopRefusal(w, err)
	if !ok {
		s.dashError(w, r, err)
		return
	}
	s.showLoop(w, r, status, l, 1, "", func(p *loopPage) { set(p, msg) })
}

// showLoop renders the page of the Loop l at its page of deliveries, with a notice,
// after set (when not nil) has added what the answer to a form shows.
func (s *Dashboard) showLoop(w http.ResponseWriter, r *http.Request, status int, l *store.Loop, page int, notice string, set func(p *loopPage)) {
	p, err := s.loopPage(r.Context(), l, page)
	if err != nil {
		s.dashError(w, r, err)
		return
	}
	if set != nil {
		set(p)
	}
	s.render(w, r, status, "loop", view{Title: l.Name, Section: "loops", Notice: notice, Data: p})
}

func handleEditLoopForm(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		current, err := s.db.GetLoop(ctx, dashUser(r).OrgID, server.PathID(r))
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		sent := loopEditForm(current)
		l, err := func() (*store.Loop, error) {
			if err := parseForm(w, r, maxLoopField); err != nil {
				return nil, err
			}
			change := server.LoopChange{Name: loopFormField(r, "name"), WebhookURL: loopFormField(r, "webhook_url"), Enabled: loopCheckbox(r, "enabled")}
			if change.Name != nil {
				sent.Name = *change.Name
			}
			if change.WebhookURL != nil {
				sent.WebhookURL = *change.WebhookURL
				if *change.WebhookURL == current.Destination.URL {
					// Unchanged: not looked up again, so that renaming a Loop does not
					// depend on its receiver's DNS.
					change.WebhookURL = nil
				}
			}
			sent.Enabled = *change.Enabled
			if current.Destination.Kind == store.KindHubSpot {
				d := &server.DestinationSpec{Token: formValue(r, "token"), Refresh: loopCheckbox(r, "refresh"),
					Provenance: loopCheckbox(r, "provenance"), GDPRDelete: loopCheckbox(r, "gdpr_delete")}
				if current.ObjectType != enrich.ObjectPerson {
					d.GDPRDelete = nil // people Loops only: the form does not show it
				}
				change.Destination = d
				sent.Refresh, sent.Provenance, sent.GDPRDelete = *d.Refresh, *d.Provenance, d.GDPRDelete != nil && *d.GDPRDelete
			}
			patch, err := s.srv.LoopPatch(ctx, current, change)
			if err != nil {
				return nil, err
			}
			return s.db.UpdateLoop(ctx, current.OrgID, current.ID, patch)
		}()
		if err != nil {
			s.refuseLoopForm(w, r, current, err, func(p *loopPage, msg string) { sent.Error = msg; p.Edit = sent })
			return
		}
		seeOther(w, r, "/dashboard/loops/"+l.ID, "The Loop "+l.Name+" is saved.")
	})
}

func handleRotateLoopSecret(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		grace := store.DefaultSecretGrace
		if err := parseForm(w, r, maxLoopField); err != nil {
			s.dashError(w, r, err)
			return
		}
		if v := strings.TrimSpace(r.PostFormValue("grace_hours")); v != "" {
			hours, err := strconv.ParseFloat(v, 64)
			if err != nil || math.IsNaN(hours) || hours < 0 || hours > store.MaxSecretGrace.Hours() {
				s.dashError(w, r, enrich.Errorf(enrich.KindInvalid, "The grace period is a number of hours from 0 to %d.", int(store.MaxSecretGrace.Hours())))
				return
			}
			grace = time.Duration(hours * float64(time.Hour)).Round(time.Second)
		}
		l, err := s.db.RotateLoopSecret(r.Context(), dashUser(r).OrgID, server.PathID(r), grace)
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		msg := "The signing secret is replaced. Every attempt from now on is signed with the new one, those of deliveries already queued included."
		if grace > 0 {
			msg = "The signing secret is replaced. Until " + l.Destination.PreviousSecretExpiresAt.Format("2006-01-02 15:04 UTC") +
				" every delivery is signed with both the new secret and the old one, so your receiver can move to the new one in that time; after it, with the new one only."
		}
		s.showLoop(w, r, http.StatusOK, l, 1, msg, func(p *loopPage) { p.Secret = l.Destination.Secret })
	})
}

// handleLoopDestinationForm enables a Loop's destination again (after its receiver
// answered 410 Gone), or disables it: the form's enabled is "true" or "false".
func handleLoopDestinationForm(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		current, err := s.db.GetLoop(r.Context(), dashUser(r).OrgID, server.PathID(r))
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		if err := parseForm(w, r, maxLoopField); err != nil {
			s.dashError(w, r, err)
			return
		}
		enabled, err := strconv.ParseBool(r.PostFormValue("enabled"))
		if err != nil {
			s.dashError(w, r, enrich.Errorf(enrich.KindInvalid, "enabled must be true or false."))
			return
		}
		l, err := s.db.UpdateLoop(r.Context(), current.OrgID, current.ID, store.LoopPatch{DestinationEnabled: &enabled})
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		msg := "The destination is enabled: new deliveries are sent to it. Retry the failed ones from the list below."
		if !enabled {
			msg = "The destination is disabled: nothing is sent to it until it is enabled again."
		}
		seeOther(w, r, "/dashboard/loops/"+l.ID, msg)
	})
}

func handleTestLoopForm(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, u := r.Context(), dashUser(r)
		d, err := s.db.CreateTestDelivery(ctx, u.OrgID, server.PathID(r))
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		s.srv.WakeSender()
		res, err := s.awaitFirstAttempt(ctx, d)
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		l, err := s.db.GetLoop(ctx, u.OrgID, d.LoopID)
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		s.showLoop(w, r, http.StatusOK, l, 1, "", func(p *loopPage) {
			p.Test = res
			// With htmx, render sends only the #test-result fragment the form targets.
			p.OOB = r.Header.Get("HX-Request") == "true" && r.Header.Get("HX-Target") == "test-result"
		})
	})
}

// awaitFirstAttempt waits, at most testEventWait and no longer than the request lasts,
// until the sender has recorded the delivery's first attempt.
func (s *Dashboard) awaitFirstAttempt(ctx context.Context, d *store.Delivery) (*testResult, error) {
	deadline := time.NewTimer(testEventWait)
	defer deadline.Stop()
	poll := time.NewTicker(testEventPoll)
	defer poll.Stop()
	for {
		got, _, err := s.db.GetDelivery(ctx, d.OrgID, d.ID)
		if err != nil {
			return nil, err
		}
		if got.Attempts > 0 {
			res := &testResult{Delivery: got, Answered: true}
			if got.LastStatusCode != nil {
				res.Status = strconv.Itoa(*got.LastStatusCode) + " " + http.StatusText(*got.LastStatusCode)
			}
			return res, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			return &testResult{Delivery: got, Waited: testEventWait.String()}, nil
		case <-poll.C:
		}
	}
}

func handleRunLoopForm(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		l, err := s.db.GetLoop(ctx, dashUser(r).OrgID, server.PathID(r))
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		var req server.LoopRun
		res, err := func() (*store.Enqueued, error) {
			if err := parseForm(w, r, maxLoopField); err != nil {
				return nil, err
			}
			req = server.LoopRun{Domain: formValue(r, "domain"), NetworkURL: formValue(r, "networkUrl"), Email: formValue(r, "email"),
				FullName: formValue(r, "fullName"), Title: formValue(r, "title"), Location: formValue(r, "location")}
			in, err := s.srv.LoopRunInput(l, req)
			if err != nil {
				return nil, err
			}
			// The task the API's POST /v1/loops/{id}/run makes: same input, charge and Loop.
			return s.srv.SubmitTask(ctx, server.TaskRequest{OrgID: l.OrgID, Input: in, LoopID: &l.ID, Fields: req,
				Route: "run_loop", Endpoint: "POST /v1/loops/" + l.ID + "/run"})
		}()
		if err != nil {
			s.refuseLoopForm(w, r, l, err, func(p *loopPage, msg string) { p.Run = runForm{Input: req, Error: msg} })
			return
		}
		// The notice travels in the URL: it names no target, which may be a person's
		// address, and which the task's page shows anyway.
		seeOther(w, r, "/dashboard/tasks/"+res.Task.ID, "The Loop "+l.Name+" runs this task: its result is posted to the webhook when the task settles.")
	})
}

func handleDeleteLoopForm(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, u := r.Context(), dashUser(r)
		l, err := s.db.GetLoop(ctx, u.OrgID, server.PathID(r))
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		if err := s.db.DeleteLoop(ctx, u.OrgID, l.ID); err != nil {
			s.dashError(w, r, err)
			return
		}
		seeOther(w, r, "/dashboard/loops", "The Loop "+l.Name+" is deleted, with its deliveries.")
	})
}
