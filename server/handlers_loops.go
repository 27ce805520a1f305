package server

import (
	"errors"
	"net/http"
	"strings"
	"unicode/utf8"

	"enrichd/enrich"
	"enrichd/netguard"
	"enrichd/store"

	"github.com/julienschmidt/httprouter"
)

// maxLoopName is the longest Loop name accepted, in characters.
const maxLoopName = 200

type loopResponse struct {
	Data *store.Loop `json:"data"`
}

type deliveryResponse struct {
	Delivery *store.Delivery `json:"delivery"`
}

func pathID(r *http.Request) string {
	return httprouter.ParamsFromContext(r.Context()).ByName("id")
}

func checkLoopName(name string) error {
	if strings.TrimSpace(name) == "" || utf8.RuneCountInString(name) > maxLoopName {
		return enrich.Errorf(enrich.KindInvalid, "name must be 1 to %d characters, not blank", maxLoopName)
	}
	return nil
}

// checkWebhookURL accepts an https URL whose host resolves only to public addresses.
func (s *Server) checkWebhookURL(r *http.Request, raw string) error {
	if _, err := s.cfg.WebhookPolicy.CheckURL(r.Context(), raw); err != nil {
		if r.Context().Err() != nil {
			return err // the client hung up, or the request ran out of time, during the lookup
		}
		if errors.Is(err, netguard.ErrPlainHTTP) || errors.Is(err, netguard.ErrNotPublic) {
			return enrich.Errorf(enrich.KindInvalid, "webhook_url: %v (to allow plain http and private addresses for local testing only, "+
				"the server's operator starts it with `enrichd serve --allow-private-webhooks`)", err)
		}
		return enrich.Errorf(enrich.KindInvalid, "webhook_url: %v", err)
	}
	return nil
}

func handleCreateLoop(s *Server) http.Handler {
	type request struct {
		Name       *string `json:"name"`
		WebhookURL *string `json:"webhook_url"`
		ObjectType *string `json:"object_type"`
		Enabled    *bool   `json:"enabled"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := decode[request](r)
		if err != nil {
			s.error(w, r, err)
			return
		}
		nl := store.NewLoop{OrgID: principal(r).OrgID, ObjectType: enrich.ObjectCompany, Enabled: true}
		switch {
		case req.Name == nil:
			err = enrich.Errorf(enrich.KindInvalid, "name is required")
		case req.WebhookURL == nil:
			err = enrich.Errorf(enrich.KindInvalid, "webhook_url is required: the https URL the Loop's events are posted to")
		case req.ObjectType != nil && *req.ObjectType != enrich.ObjectCompany && *req.ObjectType != enrich.ObjectPerson:
			err = enrich.Errorf(enrich.KindInvalid, "object_type must be company or person")
		default:
			err = checkLoopName(*req.Name)
		}
		if err == nil {
			err = s.checkWebhookURL(r, *req.WebhookURL)
		}
		if err != nil {
			s.error(w, r, err)
			return
		}
		nl.Name, nl.WebhookURL = *req.Name, *req.WebhookURL
		if req.ObjectType != nil {
			nl.ObjectType = *req.ObjectType
		}
		if req.Enabled != nil {
			nl.Enabled = *req.Enabled
		}
		l, err := s.db.CreateLoop(r.Context(), nl)
		if err != nil {
			s.error(w, r, err)
			return
		}
		encode(w, http.StatusCreated, loopResponse{Data: l})
	})
}

func handleListLoops(s *Server) http.Handler {
	type response struct {
		Data []*store.Loop `json:"data"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		loops, err := s.db.ListLoops(r.Context(), principal(r).OrgID)
		if err != nil {
			s.error(w, r, err)
			return
		}
		encode(w, http.StatusOK, response{Data: loops})
	})
}

func handleGetLoop(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l, err := s.db.GetLoop(r.Context(), principal(r).OrgID, pathID(r))
		if err != nil {
			s.error(w, r, err)
			return
		}
		encode(w, http.StatusOK, loopResponse{Data: l})
	})
}

func handleUpdateLoop(s *Server) http.Handler {
	type request struct {
		Name       *string `json:"name"`
		WebhookURL *string `json:"webhook_url"`
		Enabled    *bool   `json:"enabled"`
		ObjectType *string `json:"object_type"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := decode[request](r)
		if err != nil {
			s.error(w, r, err)
			return
		}
		orgID, id := principal(r).OrgID, pathID(r)
		current, err := s.db.GetLoop(r.Context(), orgID, id)
		if err != nil {
			s.error(w, r, err)
			return
		}
		switch {
		case req.ObjectType != nil && *req.ObjectType != current.ObjectType:
			err = enrich.Errorf(enrich.KindInvalid, "object_type cannot change; create a new Loop for the other object type")
		case req.Name != nil:
			err = checkLoopName(*req.Name)
		}
		if err == nil && req.WebhookURL != nil {
			err = s.checkWebhookURL(r, *req.WebhookURL)
		}
		if err != nil {
			s.error(w, r, err)
			return
		}
		l, err := s.db.UpdateLoop(r.Context(), orgID, id, store.LoopPatch{Name: req.Name, WebhookURL: req.WebhookURL, Enabled: req.Enabled})
		if err != nil {
			s.error(w, r, err)
			return
		}
		encode(w, http.StatusOK, loopResponse{Data: l})
	})
}

func handleDeleteLoop(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.db.DeleteLoop(r.Context(), principal(r).OrgID, pathID(r)); err != nil {
			s.error(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// handleRunLoop enriches the input the way the direct endpoint of the Loop's object
// type does, and delivers the result to the Loop's webhook.
func handleRunLoop(s *Server) http.Handler {
	type request struct {
		Domain     *string `json:"domain,omitempty"`
		NetworkURL *string `json:"networkUrl,omitempty"`
		Email      *string `json:"email,omitempty"`
		FullName   *string `json:"fullName,omitempty"`
		Title      *string `json:"title,omitempty"`
		Location   *string `json:"location,omitempty"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l, err := s.db.GetLoop(r.Context(), principal(r).OrgID, pathID(r))
		if err != nil {
			s.error(w, r, err)
			return
		}
		req, err := decode[request](r)
		if err != nil {
			s.error(w, r, err)
			return
		}
		var in enrich.Input
		if l.ObjectType == enrich.ObjectCompany {
			if req.Email != nil || req.FullName != nil || req.Title != nil || req.Location != nil {
				err = enrich.Errorf(enrich.KindInvalid, "the Loop %s enriches companies: send domain or networkUrl (a company page)", l.Slug)
			} else {
				in, err = s.norm.CompanyInput(req.Domain, req.NetworkURL)
			}
		} else {
			if req.Domain != nil {
				err = enrich.Errorf(enrich.KindInvalid, "the Loop %s enriches people: send networkUrl (a profile) or email, not domain", l.Slug)
			} else {
				in, err = s.norm.PersonInput(req.NetworkURL, req.Email, enrich.SentHints{FullName: req.FullName, Title: req.Title, Location: req.Location})
			}
		}
		if err != nil {
			s.error(w, r, err)
			return
		}
		s.enqueue(w, r, in, &l.ID, req)
	})
}

func handleTestLoop(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, err := s.db.CreateTestDelivery(r.Context(), principal(r).OrgID, pathID(r))
		if err != nil {
			s.error(w, r, err)
			return
		}
		s.sender.Wake()
		encode(w, http.StatusAccepted, deliveryResponse{Delivery: d})
	})
}

func handleListDeliveries(s *Server) http.Handler {
	type response struct {
		Data  []*store.Delivery `json:"data"`
		Total int64             `json:"total"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page, size, err := pageParams(r)
		if err != nil {
			s.error(w, r, err)
			return
		}
		deliveries, total, err := s.db.ListDeliveries(r.Context(), principal(r).OrgID, pathID(r), page, size)
		if err != nil {
			s.error(w, r, err)
			return
		}
		encode(w, http.StatusOK, response{Data: deliveries, Total: total})
	})
}

func handleRetryDelivery(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, err := s.db.RetryDelivery(r.Context(), principal(r).OrgID, pathID(r))
		if err != nil {
			s.error(w, r, err)
			return
		}
		s.sender.Wake()
		encode(w, http.StatusAccepted, deliveryResponse{Delivery: d})
	})
}
