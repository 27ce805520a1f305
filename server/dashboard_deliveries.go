package server

import (
	"net/http"

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
}

func handleDeliveryPage(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, u := r.Context(), dashUser(r)
		d, payload, err := s.db.GetDelivery(ctx, u.OrgID, pathID(r))
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		l, err := s.db.GetLoop(ctx, u.OrgID, d.LoopID)
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		s.render(w, r, http.StatusOK, "delivery", view{Title: "Delivery " + d.Event, Section: "loops", Notice: notice(r),
			Data: deliveryPage{Delivery: d, Loop: l, Payload: payload, MaxAttempts: store.MaxAttempts,
				Retryable: d.Status != store.DeliverySucceeded}})
	})
}

func handleRetryDeliveryForm(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, err := s.db.RetryDelivery(r.Context(), dashUser(r).OrgID, pathID(r))
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		s.sender.Wake()
		seeOther(w, r, "/dashboard/deliveries/"+d.ID, "The delivery is due now: it is sent again within moments, with the same id.")
	})
}
