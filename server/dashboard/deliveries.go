package dashboard

import (
	"net/http"
	"time"

	"enrichd/server"
	"enrichd/store"
)

// A delivery's page: what was sent (the exact payload every attempt sends), how the
// receiver answered, and "Retry now", as in Svix's app portal.

type deliveryPage struct {
	Delivery    *store.Delivery
	Loop        *store.Loop
	Payload     []byte
	MaxAttempts int
	Retryable   bool // the store refuses to retry a delivery that succeeded
	// PollSeconds, when not zero, is how often the page asks again: while an attempt is
	// due within deliveryPollWindow, so a retried delivery's answer shows by itself.
	PollSeconds int
}

// deliveryPollWindow is how soon a pending delivery's next attempt must be for its page
// to keep asking; one due in hours is not watched every two seconds.
const deliveryPollWindow = time.Minute

func handleDeliveryPage(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, u := r.Context(), dashUser(r)
		d, payload, err := s.db.GetDelivery(ctx, u.OrgID, server.PathID(r))
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		l, err := s.db.GetLoop(ctx, u.OrgID, d.LoopID)
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		page := deliveryPage{Delivery: d, Loop: l, Payload: payload, MaxAttempts: store.MaxAttempts,
			Retryable: d.Status != store.DeliverySucceeded}
		if d.Status == store.DeliveryPending && (d.NextAttemptAt == nil || d.NextAttemptAt.Sub(s.db.Now()) <= deliveryPollWindow) {
			page.PollSeconds = 2
		}
		s.render(w, r, http.StatusOK, "delivery", view{Title: "Delivery " + d.Event, Section: "loops", Notice: notice(r), Data: page})
	})
}

func handleRetryDeliveryForm(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, err := s.db.RetryDelivery(r.Context(), dashUser(r).OrgID, server.PathID(r))
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		s.srv.WakeSender()
		seeOther(w, r, "/dashboard/deliveries/"+d.ID, "The delivery is due now: it is sent again within moments, with the same id.")
	})
}
