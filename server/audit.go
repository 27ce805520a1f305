package server

import (
	"bufio"
	"encoding/json"
	"mime"
	"net/http"
	"strings"
	"time"

	"enrichd/enrich"
	"enrichd/store"
)

// The audit log's endpoint: an organization's entries, newest first and paged, or all
// those a filter selects as JSON Lines (?format=jsonl), oldest first. The API offers no
// way to change or delete an entry: the entries are written by the acts they record
// (store/audit.go), in the acts' own transactions.

// AuditQuery is a filter of the log as GET /v1/audit and the dashboard's Audit page
// read it, kept as sent so that a page can show it back.
type AuditQuery struct {
	Action, Subject, Since, Until string
}

// Filtered says whether any filter narrows the list.
func (q AuditQuery) Filtered() bool {
	return q.Action != "" || q.Subject != "" || q.Since != "" || q.Until != ""
}

// maxAuditSubject bounds the subject a filter names, in bytes: an address or a
// profile URL is far shorter.
const maxAuditSubject = 2048

// AuditFilter checks a filter of the log and makes it the store's: action one of the
// actions; subject an address, a profile URL or a domain, normalized as the enrichment
// endpoints normalize them and looked up by its keyed hash (so that the entries about
// a person are found after an erasure too); since and until RFC 3339 times, or days
// (2026-11-28, midnight UTC), since included and until not.
func (s *Server) AuditFilter(q AuditQuery) (store.AuditFilter, error) {
	var f store.AuditFilter
	if q.Action != "" {
		if !store.IsAuditAction(q.Action) {
			return f, enrich.Errorf(enrich.KindInvalid, "action must be one of %s", strings.Join(store.AuditActions, ", "))
		}
		f.Action = q.Action
	}
	if q.Subject != "" {
		if len(q.Subject) > maxAuditSubject {
			return f, enrich.Errorf(enrich.KindInvalid, "subject is longer than %d bytes", maxAuditSubject)
		}
		sub, err := auditSubject(s.norm, q.Subject)
		if err != nil {
			return f, err
		}
		h := s.db.Subjects()
		if h == nil {
			return f, store.ErrNoSubjectKey
		}
		hash := h.Hash(sub)
		f.SubjectHash = hash[:]
	}
	for _, t := range []struct {
		name, value string
		dst         *time.Time
	}{{"since", q.Since, &f.Since}, {"until", q.Until, &f.Until}} {
		if t.value == "" {
			continue
		}
		v, err := auditTime(t.value)
		if err != nil {
			return f, enrich.Errorf(enrich.KindInvalid, "%s %q is neither a time like 2026-11-28T09:30:00Z nor a day like 2026-11-28", t.name, clip(t.value, 40))
		}
		*t.dst = v
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return f, enrich.Errorf(enrich.KindInvalid, "since (%s) must be before until (%s)", q.Since, q.Until)
	}
	return f, nil
}

// auditSubject is the subject a filter names: an address when it has an @, a profile
// when it is a profile's URL (/in/), a domain otherwise (a website's address too); a
// company's page names no subject.
func auditSubject(norm enrich.Normalizer, raw string) (enrich.Subject, error) {
	raw = strings.TrimSpace(raw)
	switch {
	case strings.Contains(raw, "@"):
		return norm.Subject(enrich.SubjectEmail, raw)
	case strings.Contains(raw, "/company/"):
		return enrich.Subject{}, enrich.Errorf(enrich.KindInvalid, "subject: a company's page names no subject; filter by the company's domain")
	case strings.Contains(raw, "/in/"):
		return norm.Subject(enrich.SubjectProfile, raw)
	}
	return norm.Subject(enrich.SubjectDomain, raw)
}

// auditTime reads a time of a filter: RFC 3339, or a day at midnight UTC.
func auditTime(v string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t.UTC(), nil
	}
	return time.Parse("2006-01-02", v)
}

// auditList is the body of GET /v1/audit: a page of entries, and whether there are
// more after it (the log is not counted: that would read three years of it a page).
type auditList struct {
	Data    []*store.AuditEntry `json:"data"`
	HasMore bool                `json:"has_more"`
}

// handleListAudit answers GET /v1/audit: {data, has_more}, or with ?format=jsonl the
// whole selection as JSON Lines.
func handleListAudit(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := r.URL.Query()
		q := AuditQuery{Action: v.Get("action"), Subject: v.Get("subject"), Since: v.Get("since"), Until: v.Get("until")}
		f, err := s.AuditFilter(q)
		if err != nil {
			s.error(w, r, err)
			return
		}
		org := principal(r).OrgID
		switch v.Get("format") {
		case "", "json":
		case "jsonl":
			if v.Has("page") || v.Has("pageSize") {
				s.error(w, r, enrich.Errorf(enrich.KindInvalid, "an export (format=jsonl) is not paged: it holds every entry the filters select, up to %d; narrow it with since and until", store.MaxAuditExport))
				return
			}
			s.WriteAudit(w, r, org, f, s.error)
			return
		default:
			s.error(w, r, enrich.Errorf(enrich.KindInvalid, "format must be json or jsonl"))
			return
		}
		page, size, err := pageParams(r)
		if err != nil {
			s.error(w, r, err)
			return
		}
		list, more, err := s.db.ListAudit(r.Context(), org, f, page, size)
		if err != nil {
			s.error(w, r, err)
			return
		}
		encode(w, http.StatusOK, auditList{Data: list, HasMore: more})
	})
}

// WriteAudit streams the organization's entries that f selects as JSON Lines, oldest
// first, at most store.MaxAuditExport of them, read a chunk at a time. A failure
// before the first byte is answered by fail (the API's or the dashboard's error);
// after it, the connection is dropped, so that the client sees a broken download
// rather than a file that looks complete and is not.
func (s *Server) WriteAudit(w http.ResponseWriter, r *http.Request, orgID string, f store.AuditFilter, fail func(http.ResponseWriter, *http.Request, error)) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": "audit.jsonl"}))
	out := &sentWriter{w: w}
	buf := bufio.NewWriterSize(out, 32<<10)
	enc := json.NewEncoder(buf)
	_, err := s.db.ExportAudit(r.Context(), orgID, f, 0, func(e *store.AuditEntry) error {
		return enc.Encode(e)
	})
	if err == nil {
		err = buf.Flush()
	}
	if err == nil {
		return
	}
	if !out.sent { // nothing reached the client: what was buffered is dropped
		w.Header().Del("Content-Disposition")
		fail(w, r, err)
		return
	}
	s.abortStream(r, "audit export cut short", err)
}
