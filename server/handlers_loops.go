package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"
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

// pathID is the :id of the request's route: an id as the store writes ids, which the
// router matched (Router); a path with anything else there has no route.
func pathID(r *http.Request) string {
	return httprouter.ParamsFromContext(r.Context()).ByName("id")
}

func checkLoopName(name string) error {
	if strings.TrimSpace(name) == "" || utf8.RuneCountInString(name) > maxLoopName {
		return enrich.Errorf(enrich.KindInvalid, "name must be 1 to %d characters, not blank", maxLoopName)
	}
	return enrich.CheckText("name", name)
}

// checkWebhookURL accepts an https URL whose host resolves only to public addresses.
// It looks the host up: never call it inside a transaction.
func (s *Server) checkWebhookURL(ctx context.Context, raw string) error {
	if _, err := s.cfg.WebhookPolicy.CheckURL(ctx, raw); err != nil {
		if ctx.Err() != nil {
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

// loopCreate is a Loop asked for, through the API (as JSON) or the dashboard's form:
// nil is a field not sent.
type loopCreate struct {
	Name       *string `json:"name"`
	WebhookURL *string `json:"webhook_url"`
	ObjectType *string `json:"object_type"`
	Enabled    *bool   `json:"enabled"`
	// Destination is the long form: {"kind": "webhook", "url"} (webhook_url is its
	// short form) or {"kind": "hubspot", "token", ...}.
	Destination *destinationSpec `json:"destination"`
}

// newLoop checks a Loop asked for and makes it the store's NewLoop, the same for the
// API and the dashboard. The webhook URL's host is looked up: call it before any
// transaction.
func (s *Server) newLoop(ctx context.Context, orgID string, req loopCreate) (store.NewLoop, error) {
	nl := store.NewLoop{OrgID: orgID, ObjectType: enrich.ObjectCompany, Enabled: true}
	var err error
	hubspotDest := false
	if d := req.Destination; d != nil {
		switch {
		case d.Kind == nil || (*d.Kind != store.KindWebhook && *d.Kind != store.KindHubSpot):
			return nl, enrich.Errorf(enrich.KindInvalid, "destination.kind must be webhook or hubspot")
		case req.WebhookURL != nil:
			return nl, enrich.Errorf(enrich.KindInvalid, "send webhook_url or destination, not both (webhook_url is the short form of {\"kind\": \"webhook\", \"url\"})")
		case *d.Kind == store.KindHubSpot:
			hubspotDest = true
		case d.Token != nil || d.hubspotOptionsSet() || d.Enabled != nil:
			return nl, enrich.Errorf(enrich.KindInvalid, "a webhook destination takes url only")
		default:
			req.WebhookURL = d.URL
		}
	}
	switch {
	case req.Name == nil:
		err = enrich.Errorf(enrich.KindInvalid, "name is required")
	case hubspotDest:
	case req.WebhookURL == nil:
		err = enrich.Errorf(enrich.KindInvalid, "webhook_url is required: the https URL the Loop's events are posted to")
	case req.ObjectType != nil && *req.ObjectType != enrich.ObjectCompany && *req.ObjectType != enrich.ObjectPerson:
		err = enrich.Errorf(enrich.KindInvalid, "object_type must be company or person")
	default:
		err = checkLoopName(*req.Name)
	}
	if err == nil && !hubspotDest {
		err = s.checkWebhookURL(ctx, *req.WebhookURL)
	}
	if err != nil {
		return nl, err
	}
	nl.Name = *req.Name
	if req.ObjectType != nil {
		nl.ObjectType = *req.ObjectType
	}
	if hubspotDest {
		if err := s.newHubSpotLoop(ctx, &nl, req.Destination); err != nil {
			return nl, err
		}
	} else {
		nl.WebhookURL = *req.WebhookURL
	}
	if req.Enabled != nil {
		nl.Enabled = *req.Enabled
	}
	return nl, nil
}

// loopChange is a change asked for to a Loop: nil leaves a field as it is.
type loopChange struct {
	Name        *string          `json:"name"`
	WebhookURL  *string          `json:"webhook_url"`
	Enabled     *bool            `json:"enabled"`
	ObjectType  *string          `json:"object_type"`
	Destination *destinationSpec `json:"destination"`
	// RotateSecret replaces the signing secret; the old one keeps signing beside it
	// for SecretGraceSeconds (store.DefaultSecretGrace when not sent).
	RotateSecret       *bool  `json:"rotate_secret"`
	SecretGraceSeconds *int64 `json:"secret_grace_seconds"`
}

// secretRotation checks a rotation asked for and makes the new secret: nil when none
// was asked for.
func (req loopChange) secretRotation() (*store.SecretRotation, error) {
	if req.RotateSecret == nil || !*req.RotateSecret {
		if req.SecretGraceSeconds != nil {
			return nil, enrich.Errorf(enrich.KindInvalid, "secret_grace_seconds goes with rotate_secret: true")
		}
		return nil, nil
	}
	grace := store.DefaultSecretGrace
	if g := req.SecretGraceSeconds; g != nil {
		if *g < 0 || *g > int64(store.MaxSecretGrace/time.Second) {
			return nil, enrich.Errorf(enrich.KindInvalid, "secret_grace_seconds must be 0 to %d (7 days)", int64(store.MaxSecretGrace/time.Second))
		}
		grace = time.Duration(*g) * time.Second
	}
	secret, err := store.NewLoopSecret()
	if err != nil {
		return nil, err
	}
	return &store.SecretRotation{Secret: secret, Grace: grace}, nil
}

// loopPatch checks a change to the Loop current and makes it the store's LoopPatch,
// the same for the API and the dashboard. The webhook URL's host is looked up: call
// it before any transaction.
func (s *Server) loopPatch(ctx context.Context, current *store.Loop, req loopChange) (store.LoopPatch, error) {
	var err error
	switch {
	case req.ObjectType != nil && *req.ObjectType != current.ObjectType:
		err = enrich.Errorf(enrich.KindInvalid, "object_type cannot change; create a new Loop for the other object type")
	case req.Name != nil:
		err = checkLoopName(*req.Name)
	}
	hubspotDest := current.Destination.Kind == store.KindHubSpot
	d := req.Destination
	switch {
	case err != nil:
	case d != nil && d.Kind != nil && *d.Kind != current.Destination.Kind:
		err = enrich.Errorf(enrich.KindInvalid, "destination.kind cannot change; create a new Loop for another kind of destination")
	case hubspotDest && req.WebhookURL != nil:
		err = enrich.Errorf(enrich.KindInvalid, "webhook_url is a webhook's; this Loop's destination is hubspot")
	case hubspotDest && req.RotateSecret != nil:
		err = enrich.Errorf(enrich.KindInvalid, "a hubspot destination signs nothing: there is no secret to rotate (send destination.token to replace its token)")
	case !hubspotDest && d != nil && (d.Token != nil || d.hubspotOptionsSet() || d.URL != nil):
		err = enrich.Errorf(enrich.KindInvalid, "destination takes enabled (true or false) only; a webhook's URL changes with webhook_url")
	case !hubspotDest && d != nil && d.Enabled == nil:
		err = enrich.Errorf(enrich.KindInvalid, "destination takes enabled (true or false) only")
	case hubspotDest && d != nil && d.Enabled == nil && d.Token == nil && !d.hubspotOptionsSet():
		err = enrich.Errorf(enrich.KindInvalid, "destination takes enabled, token, refresh, provenance, gdpr_delete or mapping")
	}
	if err == nil && req.WebhookURL != nil {
		err = s.checkWebhookURL(ctx, *req.WebhookURL)
	}
	var rotation *store.SecretRotation
	if err == nil {
		rotation, err = req.secretRotation()
	}
	if err != nil {
		return store.LoopPatch{}, err
	}
	p := store.LoopPatch{Name: req.Name, WebhookURL: req.WebhookURL, Enabled: req.Enabled, Rotate: rotation}
	if d != nil {
		p.DestinationEnabled = d.Enabled
		if hubspotDest {
			if err := s.hubspotPatch(ctx, current, d, &p); err != nil {
				return store.LoopPatch{}, err
			}
		}
	}
	return p, nil
}

func handleCreateLoop(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := decode[loopCreate](r)
		if err != nil {
			s.error(w, r, err)
			return
		}
		nl, err := s.newLoop(r.Context(), principal(r).OrgID, req)
		if err != nil {
			s.error(w, r, err)
			return
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
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := decode[loopChange](r)
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
		patch, err := s.loopPatch(r.Context(), current, req)
		if err != nil {
			s.error(w, r, err)
			return
		}
		l, err := s.db.UpdateLoop(r.Context(), orgID, id, patch)
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

// enrichInput is the input of an enrichment of either object type, as a Loop's run
// and a watch take it: the fields of the direct endpoint of the object type. The
// direct endpoints, a Loop's run and a watch normalize it with the same Normalizer
// calls, so one input names one record whichever way it came.
type enrichInput struct {
	Domain     *string `json:"domain,omitempty"`
	NetworkURL *string `json:"networkUrl,omitempty"`
	Email      *string `json:"email,omitempty"`
	FullName   *string `json:"fullName,omitempty"`
	Title      *string `json:"title,omitempty"`
	Location   *string `json:"location,omitempty"`
}

// loopRun is an input to run a Loop on, through the API (as JSON) or the dashboard's
// form, without loop_id.
type loopRun = enrichInput

// normalize checks the input for objectType and normalizes it the way the direct
// endpoint of that object type does. who starts the refusal of a field of the other
// object type: "the Loop acme-sync enriches" (companies: send ...).
func (req enrichInput) normalize(norm enrich.Normalizer, objectType, who string) (enrich.Input, error) {
	if objectType == enrich.ObjectCompany {
		if req.Email != nil || req.FullName != nil || req.Title != nil || req.Location != nil {
			return enrich.Input{}, enrich.Errorf(enrich.KindInvalid, "%s companies: send domain or networkUrl (a company page)", who)
		}
		return norm.CompanyInput(req.Domain, req.NetworkURL)
	}
	if req.Domain != nil {
		return enrich.Input{}, enrich.Errorf(enrich.KindInvalid, "%s people: send networkUrl (a profile) or email, not domain", who)
	}
	return norm.PersonInput(req.NetworkURL, req.Email, enrich.SentHints{FullName: req.FullName, Title: req.Title, Location: req.Location})
}

// loopRunInput checks an input for the Loop l and normalises it the way the direct
// endpoint of the Loop's object type does.
func (s *Server) loopRunInput(l *store.Loop, req loopRun) (enrich.Input, error) {
	return req.normalize(s.norm, l.ObjectType, "the Loop "+l.Slug+" enriches")
}

// handleRunLoop enriches the input the way the direct endpoint of the Loop's object
// type does, and delivers the result to the Loop's webhook.
func handleRunLoop(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l, err := s.db.GetLoop(r.Context(), principal(r).OrgID, pathID(r))
		if err != nil {
			s.error(w, r, err)
			return
		}
		req, err := decode[loopRun](r)
		if err != nil {
			s.error(w, r, err)
			return
		}
		in, err := s.loopRunInput(l, req)
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
		s.wakeSender()
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
		s.wakeSender()
		encode(w, http.StatusAccepted, deliveryResponse{Delivery: d})
	})
}
