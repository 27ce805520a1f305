package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
	return s.db.AddSuppression(ctx, ns)
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
	added, existing, err := s.db.ImportSuppressions(r.Context(), list)
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
		if _, err := s.db.DeleteSuppression(r.Context(), principal(r).OrgID, pathID(r)); err != nil {
			s.error(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// inputSuppression is how an input's subjects stand for the organization: the hash of
// the subject the task is about (empty for a company's page), and, when one of its
// subjects is suppressed (an address's domain included), the error the task fails
// with. Each subject is hashed once.
func (s *Server) inputSuppression(ctx context.Context, orgID string, in enrich.Input) (subject []byte, fail *enrich.TaskError, err error) {
	h := s.db.Subjects()
	subs := enrich.InputSubjects(in)
	if h == nil || len(subs) == 0 {
		return nil, nil, nil // a company's page; or no key, which the store refuses
	}
	for i, sub := range subs {
		hash := h.Hash(sub)
		if i == 0 {
			subject = hash[:]
		}
		if fail == nil {
			suppressed, err := s.db.SuppressedHash(ctx, orgID, hash[:])
			if err != nil {
				return nil, nil, err
			}
			if suppressed {
				fail = store.SuppressedInput(in, sub)
			}
		}
	}
	return subject, fail, nil
}

// answerSuppressed reports whether a result is about a suppressed subject the input
// did not name (the person an address belongs to, the company at a page).
func (s *Server) answerSuppressed(ctx context.Context, orgID string, in enrich.Input, res enrich.Result) (bool, error) {
	h := s.db.Subjects()
	who, ok := enrich.ResultSubject(res)
	if h == nil || !ok {
		return false, nil
	}
	if asked, ok := enrich.InputSubject(in); ok && h.Hash(asked) == h.Hash(who) {
		return false, nil // checked when the task was made, and again before it ran
	}
	hash := h.Hash(who)
	return s.db.SuppressedHash(ctx, orgID, hash[:])
}

// gatheredSuppressed reports whether what an email lookup gathered holds a suppressed
// person: then none of it is kept, and a retry searches again.
func (s *Server) gatheredSuppressed(ctx context.Context, orgID string, g *enrich.Gathering) (bool, error) {
	if g == nil {
		return false, nil
	}
	for _, c := range g.Candidates {
		if c.Person == nil {
			continue
		}
		if suppressed, err := s.answerSuppressed(ctx, orgID, enrich.Input{}, enrich.Result{Person: c.Person}); err != nil || suppressed {
			return suppressed, err
		}
	}
	return false, nil
}

// withoutSuppressed is the outcome of a claimed task once its answer is checked: a
// result about a suppressed subject fails not_found, keeping nothing of them (neither
// the record nor what the lookup gathered), with the sources that were asked.
func (s *Server) withoutSuppressed(ctx context.Context, c *store.Claim, out store.Outcome) store.Outcome {
	check := func(suppressed bool, err error) bool {
		if err != nil && !store.IsStorageFault(err) {
			s.log.Error("checking the suppressions", "task", c.TaskID, "err", err)
		}
		// A check that cannot be made keeps nothing either: the task fails, refunded,
		// and may be asked again.
		return suppressed || err != nil
	}
	if out.Result != nil && check(s.answerSuppressed(ctx, c.OrgID, c.Input, *out.Result)) {
		return store.Outcome{Err: store.SuppressedAnswer(c.Input), Trace: enrich.Trace{Sources: out.Trace.Sources}}
	}
	if out.Gathered != nil && check(s.gatheredSuppressed(ctx, c.OrgID, out.Gathered)) {
		out.Gathered = nil
	}
	return out
}

// claimSuppressed is the error a claimed task fails with, before any source is asked,
// when its input was suppressed after it was queued.
func (s *Server) claimSuppressed(ctx context.Context, c *store.Claim) *enrich.TaskError {
	_, fail, err := s.inputSuppression(ctx, c.OrgID, c.Input)
	if err != nil && ctx.Err() != nil {
		return nil // the task's time is up: it fails as any task past its lifetime does
	}
	if err != nil {
		if !store.IsStorageFault(err) {
			s.log.Error("checking the suppressions", "task", c.TaskID, "err", err)
		}
		return &enrich.TaskError{Code: enrich.CodeProviderUnavailable, Message: fmt.Sprintf("the suppression list could not be read: %v; nothing was asked", err)}
	}
	return fail
}
