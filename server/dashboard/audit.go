package dashboard

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"enrichd/server"
	"enrichd/store"
)

// The Audit page: the organization's audit log, newest first, filtered as GET
// /v1/audit filters it (through the same checks), paged, and downloaded as the API's
// JSON Lines export.

// auditPerPage is how many entries the page lists at once.
const auditPerPage = 50

// maxAuditPage is the last page the pager goes to, as deep as the API's lists go.
const maxAuditPage = server.MaxPageOffset/auditPerPage + 1

// auditActionNames say what each action is, as the page lists it.
var auditActionNames = map[string]string{
	store.AuditTaskCreated:       "Enriched",
	store.AuditBatchCreated:      "Uploaded a batch",
	store.AuditBatchDownloaded:   "Downloaded a batch's results",
	store.AuditPersonExported:    "Exported a person",
	store.AuditPersonErased:      "Erased a person",
	store.AuditSuppressionAdded:  "Suppressed",
	store.AuditSuppressionLifted: "Lifted a suppression",
	store.AuditKeyCreated:        "Created an API key",
	store.AuditKeyRevoked:        "Revoked an API key",
	store.AuditUserAdded:         "Added a user",
	store.AuditUserSignedIn:      "Signed in",
	store.AuditWatchCreated:      "Made a watch",
	store.AuditPurged:            "Deleted entries past retention",
}

// auditActionOption is an action as the filter offers it.
type auditActionOption struct{ Value, Name string }

// auditQuery is the page's filter as the URL carries it: the API's, with days for
// its dates (both included, as the other lists'), kept as sent.
type auditQuery struct {
	Action, Subject, From, To string
}

// Filtered says whether any filter narrows the list.
func (q auditQuery) Filtered() bool {
	return q.Action != "" || q.Subject != "" || q.From != "" || q.To != ""
}

// values is the filter as a URL's query, for the pager's and the download's links.
func (q auditQuery) values() url.Values {
	v := url.Values{}
	for name, value := range map[string]string{"action": q.Action, "subject": q.Subject, "from": q.From, "to": q.To} {
		if value != "" {
			v.Set(name, value)
		}
	}
	return v
}

// filter is the store's filter of q, through the API's checks: to is the last day
// included, so the API's until is the day after it.
func (s *Dashboard) auditFilter(q auditQuery) (store.AuditFilter, error) {
	api := server.AuditQuery{Action: q.Action, Subject: q.Subject, Since: q.From}
	if q.To != "" {
		if t, err := time.Parse(dateLayout, q.To); err == nil {
			api.Until = t.AddDate(0, 0, 1).Format(dateLayout)
		} else {
			api.Until = q.To // refused by the API's check, as sent
		}
	}
	return s.srv.AuditFilter(api)
}

func parseAuditQuery(v url.Values) auditQuery {
	return auditQuery{Action: server.Clip(v.Get("action"), 40), Subject: server.Clip(v.Get("subject"), 2048),
		From: server.Clip(v.Get("from"), 40), To: server.Clip(v.Get("to"), 40)}
}

// auditRow is an entry as the page shows it.
type auditRow struct {
	*store.AuditEntry
	What string // the action, in words
}

type auditPage struct {
	Q                  auditQuery
	Actions            []auditActionOption
	Entries            []auditRow
	Page               int
	PrevLink, NextLink string
	Download           string
	Head               *store.AuditHead
}

func handleAuditPage(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		u := dashUser(r)
		page, err := server.IntParam(r.URL.Query(), "page", 1, 1, maxAuditPage)
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		q := parseAuditQuery(r.URL.Query())
		f, err := s.auditFilter(q)
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		list, more, err := s.db.ListAudit(ctx, u.OrgID, f, page-1, auditPerPage)
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		p := auditPage{Q: q, Page: page}
		for _, a := range store.AuditActions {
			p.Actions = append(p.Actions, auditActionOption{Value: a, Name: auditActionNames[a]})
		}
		for _, e := range list {
			p.Entries = append(p.Entries, auditRow{AuditEntry: e, What: auditActionNames[e.Action]})
		}
		link := func(n int) string {
			v := q.values()
			if n > 1 {
				v.Set("page", strconv.Itoa(n))
			}
			if len(v) == 0 {
				return "/dashboard/audit"
			}
			return "/dashboard/audit?" + v.Encode()
		}
		if page > 1 {
			p.PrevLink = link(page - 1)
		}
		if more && page < maxAuditPage {
			p.NextLink = link(page + 1)
		}
		p.Download = "/dashboard/audit.jsonl"
		if v := q.values(); len(v) > 0 {
			p.Download += "?" + v.Encode()
		}
		heads, err := s.db.AuditHeads(ctx, u.OrgID, false)
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		if len(heads) == 1 {
			p.Head = &heads[0]
		}
		s.render(w, r, http.StatusOK, "audit", view{Title: "Audit log", Section: "audit", Data: p})
	})
}

// handleAuditDownload streams the entries the filter selects as the API's JSON Lines
// export does.
func handleAuditDownload(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, err := s.auditFilter(parseAuditQuery(r.URL.Query()))
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		s.srv.WriteAudit(w, r, dashUser(r).OrgID, f, s.dashError)
	})
}
