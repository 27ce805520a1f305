package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"enrichd/enrich"
	"enrichd/store"
)

// Erasures and exports of a person (GDPR Art. 17, 19 and 15): the API erases a person
// from everything the organization holds, lists the erasures, and exports what is held
// on a person as one document; the dashboard and the CLI go through the same checks
// and store methods. After an erasure the webhook sender is woken for its person.erased
// events, and the completer (package worker's) for the erasures whose events are done.

// ErasureRequest is the body of POST /v1/erasures, and the query of GET
// /v1/people/export: exactly one of email or networkUrl (a profile).
type ErasureRequest struct {
	Email      *string `json:"email,omitempty"`
	NetworkURL *string `json:"networkUrl,omitempty"`
}

// subject checks the request and normalizes its person as the enrichment endpoints
// normalize their inputs.
func (req ErasureRequest) subject(norm enrich.Normalizer) (enrich.Subject, error) {
	switch {
	case req.Email == nil && req.NetworkURL == nil:
		return enrich.Subject{}, enrich.Errorf(enrich.KindInvalid, "send one of email or networkUrl (a profile): the person to erase or export")
	case req.Email != nil && req.NetworkURL != nil:
		return enrich.Subject{}, enrich.Errorf(enrich.KindInvalid, "send only one of email or networkUrl: a person is named by one of them")
	case req.Email != nil:
		return norm.Subject(enrich.SubjectEmail, *req.Email)
	}
	return norm.Subject(enrich.SubjectProfile, *req.NetworkURL)
}

// CheckErasure checks an erasure asked for as the API does and makes it the store's
// NewErasure for orgID ("" for every organization): the CLI erases through it.
// networkHost is serve's --network-host.
func CheckErasure(networkHost, orgID string, req ErasureRequest, by store.AddedBy) (store.NewErasure, error) {
	sub, err := req.subject(enrich.Normalizer{NetworkHost: networkHost})
	if err != nil {
		return store.NewErasure{}, err
	}
	return store.NewErasure{OrgID: orgID, AllOrgs: orgID == "", Subject: sub, By: by}, nil
}

// CheckExport checks an export asked for as the API does: the person's identifier,
// normalized. The CLI exports through it.
func CheckExport(networkHost string, req ErasureRequest) (enrich.Subject, error) {
	return req.subject(enrich.Normalizer{NetworkHost: networkHost})
}

// Erase erases a person for the organization, for the API and the dashboard: the
// sender is woken for the person.erased events, and an erasure that told no Loop is
// completed at once.
func (s *Server) Erase(ctx context.Context, orgID string, req ErasureRequest, by store.AddedBy) (*store.Erasure, error) {
	ne, err := CheckErasure(s.cfg.NetworkHost, orgID, req, by)
	if err != nil {
		return nil, err
	}
	er, err := s.db.Erase(ctx, ActingOf(ctx), ne)
	if err != nil {
		return nil, err
	}
	s.log.Info("erased a person", "erasure", er.ID, "org", orgID, "loops_told", len(er.Loops))
	if len(er.Loops) > 0 {
		s.wakeSender()
	}
	s.wakeErasures()
	return er, nil
}

// ExportPerson reads everything the organization holds on a person, for the API and
// the dashboard.
func (s *Server) ExportPerson(ctx context.Context, orgID string, req ErasureRequest) (*store.PersonExport, error) {
	sub, err := CheckExport(s.cfg.NetworkHost, req)
	if err != nil {
		return nil, err
	}
	return s.db.ExportPerson(ctx, ActingOf(ctx), orgID, false, sub)
}

// ExportRequest reads an export's query: exactly one of email or networkUrl, each at
// most once; no other parameter.
func ExportRequest(q url.Values) (ErasureRequest, error) {
	var req ErasureRequest
	for name, values := range q {
		if len(values) != 1 {
			return req, enrich.Errorf(enrich.KindInvalid, "send %s once", clip(name, 40))
		}
		v := values[0]
		switch name {
		case "email":
			req.Email = &v
		case "networkUrl":
			req.NetworkURL = &v
		default:
			return req, enrich.Errorf(enrich.KindInvalid, "unknown parameter %q: an export takes email or networkUrl", clip(name, 40))
		}
	}
	return req, nil
}

// erasureBy is who the request acts for: its API key.
func erasureBy(r *http.Request) store.AddedBy {
	id := principal(r).KeyID
	return store.AddedBy{Kind: store.AddedByKey, ID: &id}
}

type erasureResponse struct {
	Data *store.Erasure `json:"data"`
}

type erasureList struct {
	Data  []*store.Erasure `json:"data"`
	Total int64            `json:"total"`
}

// handleCreateErasure erases a person: 201 {data: Erasure}.
func handleCreateErasure(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := decode[ErasureRequest](r)
		if err != nil {
			s.error(w, r, err)
			return
		}
		er, err := s.Erase(r.Context(), principal(r).OrgID, req, erasureBy(r))
		if err != nil {
			s.error(w, r, err)
			return
		}
		body, _ := json.Marshal(erasureResponse{Data: er})
		writeJSON(w, http.StatusCreated, body)
	})
}

// handleListErasures answers {data, total}: the organization's erasures, newest
// first, paged as GET /v1/tasks is.
func handleListErasures(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page, size, err := pageParams(r)
		if err != nil {
			s.error(w, r, err)
			return
		}
		list, total, err := s.db.ListErasures(r.Context(), principal(r).OrgID, page, size)
		if err != nil {
			s.error(w, r, err)
			return
		}
		body, _ := json.Marshal(erasureList{Data: list, Total: total})
		writeJSON(w, http.StatusOK, body)
	})
}

func handleGetErasure(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		er, err := s.db.GetErasure(r.Context(), principal(r).OrgID, pathID(r))
		if err != nil {
			s.error(w, r, err)
			return
		}
		body, _ := json.Marshal(erasureResponse{Data: er})
		writeJSON(w, http.StatusOK, body)
	})
}

// handleExportPerson answers the PersonExport of the person the query names.
func handleExportPerson(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := ExportRequest(r.URL.Query())
		if err != nil {
			s.error(w, r, err)
			return
		}
		x, err := s.ExportPerson(r.Context(), principal(r).OrgID, req)
		if err != nil {
			s.error(w, r, err)
			return
		}
		body, _ := json.Marshal(x)
		writeJSON(w, http.StatusOK, append(body, '\n'))
	})
}
