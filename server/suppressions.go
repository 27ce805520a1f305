package server

import (
	"bytes"
	"context"
	"encoding/json"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"enrichd/enrich"
	"enrichd/store"
)

// Suppressions: the people and companies an organization must not enrich. The API adds
// (one, or a CSV of many), lists and lifts an organization's entries; every path that
// takes a subject checks its hashes against them before the store and any source:
// submitTask for the enrichment endpoints, a Loop's run, batches, watches, the MCP
// tools and the dashboard's Try it, and the workers for what a task's answer turned out
// to be about.

// SuppressionRequest is the body of POST /v1/suppressions, and a row of its CSV:
// exactly one of email, networkUrl (a profile) or domain, and a reason.
type SuppressionRequest struct {
	Email      *string `json:"email,omitempty"`
	NetworkURL *string `json:"networkUrl,omitempty"`
	Domain     *string `json:"domain,omitempty"`
	Reason     *string `json:"reason,omitempty"`
}

// subject checks the request and normalizes its subject as the enrichment endpoints
// normalize their inputs.
func (req SuppressionRequest) subject(norm enrich.Normalizer) (enrich.Subject, error) {
	var kind enrich.SubjectKind
	var raw string
	sent := 0
	for _, f := range []struct {
		kind enrich.SubjectKind
		v    *string
	}{{enrich.SubjectEmail, req.Email}, {enrich.SubjectProfile, req.NetworkURL}, {enrich.SubjectDomain, req.Domain}} {
		if f.v != nil {
			sent++
			kind, raw = f.kind, *f.v
		}
	}
	switch sent {
	case 0:
		return enrich.Subject{}, enrich.Errorf(enrich.KindInvalid, "send one of email, networkUrl (a profile) or domain")
	case 1:
	default:
		return enrich.Subject{}, enrich.Errorf(enrich.KindInvalid, "send only one of email, networkUrl or domain: a suppression is of one subject")
	}
	if req.Reason != nil {
		if n := utf8.RuneCountInString(*req.Reason); n > store.MaxSuppressionReason {
			return enrich.Subject{}, enrich.Errorf(enrich.KindInvalid, "reason is longer than %d characters (%d sent)", store.MaxSuppressionReason, n)
		}
		if err := enrich.CheckText("reason", *req.Reason); err != nil {
			return enrich.Subject{}, err
		}
	}
	return norm.Subject(kind, raw)
}

// CheckSuppression checks a suppression asked for as the API does and makes it the
// store's NewSuppression for orgID ("" for every organization): the CLI adds its
// entries through it. networkHost is serve's --network-host.
func CheckSuppression(networkHost, orgID string, req SuppressionRequest, by store.AddedBy) (store.NewSuppression, error) {
	sub, err := req.subject(enrich.Normalizer{NetworkHost: networkHost})
	if err != nil {
		return store.NewSuppression{}, err
	}
	return store.NewSuppression{OrgID: orgID, Subject: sub, Reason: nonEmpty(req.Reason), AddedBy: by}, nil
}

// nonEmpty is s, or nil when it is nil or blank.
func nonEmpty(s *string) *string {
	if s == nil || strings.TrimSpace(*s) == "" {
		return nil
	}
	return s
}

// suppressionBy is who the request acts for: its API key.
func suppressionBy(r *http.Request) store.AddedBy {
	id := principal(r).KeyID
	return store.AddedBy{Kind: store.AddedByKey, ID: &id}
}

type suppressionResponse struct {
	Data *store.Suppression `json:"data"`
}

type suppressionList struct {
	Data  []*store.Suppression `json:"data"`
	Total int64                `json:"total"`
}

// SuppressionImport is what an import did: the entries it added, and those of its
// rows that were suppressed already.
type SuppressionImport struct {
	Added    int `json:"added"`
	Existing int `json:"existing"`
}

// handleCreateSuppression adds one entry (JSON) or a CSV of them (text/csv).
func handleCreateSuppression(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		org := principal(r).OrgID
		if mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mediaType == "text/csv" {
			res, err := s.importSuppressions(r, org, suppressionBy(r))
			if err != nil {
				s.error(w, r, err)
				return
			}
			status := http.StatusCreated
			if res.Added == 0 {
				status = http.StatusOK
			}
			body, _ := json.Marshal(res)
			writeJSON(w, status, body)
			return
		}
		req, err := decode[SuppressionRequest](r)
		if err != nil {
			s.error(w, r, err)
			return
		}
		sup, err := s.AddSuppression(r.Context(), org, req, suppressionBy(r))
		if err != nil {
			s.error(w, r, err)
			return
		}
		body, _ := json.Marshal(suppressionResponse{Data: sup})
		writeJSON(w, http.StatusCreated, body)
	})
}

// AddSuppression adds one entry of the organization, for the API and the dashboard.
func (s *Server) AddSuppression(ctx context.Context, orgID string, req SuppressionRequest, by store.AddedBy) (*store.Suppression, error) {
	ns, err := CheckSuppression(s.cfg.NetworkHost, orgID, req, by)
	if err != nil {
		return nil, err
	}
	return s.db.AddSuppression(ctx, ActingOf(ctx), ns)
}

// suppressionColumns are the columns a CSV of suppressions reads, matched without
// regard to case; any other column (a name, a note) is read past and kept nowhere.
var suppressionColumns = []string{"email", "networkUrl", "domain", "reason"}

// ReadSuppressionsCSV reads a CSV of suppressions (a header with any of email,
// networkUrl, domain and reason) as the API's import does, checking every row: the CLI
// imports through it. networkHost is serve's --network-host.
func ReadSuppressionsCSV(networkHost, orgID string, body []byte, by store.AddedBy) ([]store.NewSuppression, error) {
	if len(body) > store.MaxBatchBytes {
		return nil, enrich.Errorf(enrich.KindInvalid, "the file is larger than %d MiB", store.MaxBatchBytes>>20)
	}
	if !utf8.Valid(body) {
		return nil, enrich.Errorf(enrich.KindInvalid, "the file is not valid UTF-8 (first bad byte at offset %d); save it as UTF-8", invalidUTF8At(body))
	}
	up, err := parseCSVUpload(bytes.TrimPrefix(body, []byte("\ufeff")))
	if err != nil {
		return nil, err
	}
	return planSuppressions(networkHost, up, orgID, by)
}

// importSuppressions reads a CSV of suppressions from the request, checks every row
// (each must name exactly one subject), and adds them in one transaction, or refuses
// the file, listing its bad rows by number, and adds none.
func (s *Server) importSuppressions(r *http.Request, orgID string, by store.AddedBy) (SuppressionImport, error) {
	if _, err := uploadFormat(r); err != nil {
		return SuppressionImport{}, err
	}
	_, up, err := readUpload(r, formatCSV)
	if err != nil {
		return SuppressionImport{}, err
	}
	list, err := planSuppressions(s.cfg.NetworkHost, up, orgID, by)
	if err != nil {
		return SuppressionImport{}, err
	}
	added, existing, err := s.db.ImportSuppressions(r.Context(), ActingOf(r.Context()), list)
	return SuppressionImport{Added: added, Existing: existing}, err
}

// planSuppressions checks every row of an uploaded CSV of suppressions, and collects
// every refusal: nothing is added unless every row passes.
func planSuppressions(networkHost string, up *upload, orgID string, by store.AddedBy) ([]store.NewSuppression, error) {
	col := map[string]int{}
	for i, c := range up.columns {
		for _, name := range suppressionColumns {
			if strings.EqualFold(c, name) {
				if _, dup := col[name]; dup {
					return nil, enrich.Errorf(enrich.KindInvalid, "two columns are %s (the names are read without regard to case)", name)
				}
				col[name] = i
			}
		}
	}
	_, hasEmail := col["email"]
	_, hasURL := col["networkUrl"]
	_, hasDomain := col["domain"]
	if !hasEmail && !hasURL && !hasDomain {
		return nil, enrich.Errorf(enrich.KindInvalid, "the file has no email, networkUrl or domain column (its columns: %s)", clip(strings.Join(up.columns, ", "), 200))
	}
	if len(up.rows) == 0 {
		return nil, enrich.Errorf(enrich.KindInvalid, "the file has a header and no rows")
	}
	if len(up.rows) > store.MaxSuppressionImport {
		return nil, enrich.Errorf(enrich.KindInvalid, "the file has %d rows; at most %d suppressions in one import", len(up.rows), store.MaxSuppressionImport)
	}
	get := func(row uploadRow, name string) *string {
		i, ok := col[name]
		if !ok || i >= len(row.values) || strings.TrimSpace(row.values[i]) == "" {
			return nil
		}
		v := row.values[i]
		return &v
	}
	refused := append([]enrich.RowError{}, up.refused...)
	unreadable := map[int]bool{}
	for _, r := range up.refused {
		unreadable[r.Row] = true
	}
	var list []store.NewSuppression
	for i, row := range up.rows {
		if unreadable[i+1] {
			continue
		}
		req := SuppressionRequest{Email: get(row, "email"), NetworkURL: get(row, "networkUrl"), Domain: get(row, "domain"), Reason: get(row, "reason")}
		ns, err := CheckSuppression(networkHost, orgID, req, by)
		if err != nil {
			refused = append(refused, enrich.RowError{Row: i + 1, Line: row.line, Message: err.Error()})
			continue
		}
		list = append(list, ns)
	}
	if len(refused) > 0 {
		return nil, refusedRows(refused, len(up.rows))
	}
	return list, nil
}

// handleListSuppressions answers {data, total}: the organization's own entries,
// newest first, paged as GET /v1/tasks is.
func handleListSuppressions(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page, size, err := pageParams(r)
		if err != nil {
			s.error(w, r, err)
			return
		}
		list, total, err := s.db.ListSuppressions(r.Context(), principal(r).OrgID, page, size)
		if err != nil {
			s.error(w, r, err)
			return
		}
		body, _ := json.Marshal(suppressionList{Data: list, Total: total})
		writeJSON(w, http.StatusOK, body)
	})
}

func handleGetSuppression(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sup, err := s.db.GetSuppression(r.Context(), principal(r).OrgID, pathID(r))
		if err != nil {
			s.error(w, r, err)
			return
		}
		body, _ := json.Marshal(suppressionResponse{Data: sup})
		writeJSON(w, http.StatusOK, body)
	})
}

// handleDeleteSuppression lifts one of the organization's entries: 204. Another
// organization's, or the installation's, is not found.
func handleDeleteSuppression(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := s.db.DeleteSuppression(r.Context(), ActingOf(r.Context()), principal(r).OrgID, pathID(r)); err != nil {
			s.error(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
