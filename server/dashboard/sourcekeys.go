package dashboard

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"enrichd/enrich"
	"enrichd/server"
)

// maxVendorKey bounds a vendor key typed in the dashboard, as `enrichd sources
// set-key` bounds what it reads.
const maxVendorKey = 4 << 10

// sourceKeyRow is one vendor source on Settings → Sources: whose key it uses for the
// organization, shown by its last 4 characters only.
type sourceKeyRow struct {
	Name          string
	Check         string // the call that checks a key, and its cost
	Own           bool
	Last4         string
	AllowFallback bool
	Failing       bool
	FailingReason string
	FailingAt     *time.Time
	UpdatedAt     time.Time
}

type sourceKeysData struct {
	Sources  []sourceKeyRow
	Secrets  bool // serve has a secret key file: keys can be stored
	MaxKey   int
	Rejected string // the source whose key this answer refused, whose form shows why
	Problem  string
}

// sourceKeys fills d with the organization's keys, per source this server asks with
// one: Settings → Sources shows them below the fill lists.
func (s *Dashboard) sourceKeys(r *http.Request, d *sourceKeysData) error {
	keys, err := s.db.OrgSourceKeys(r.Context(), dashUser(r).OrgID)
	if err != nil {
		return err
	}
	for _, name := range s.srv.KeyedSources() {
		row := sourceKeyRow{Name: name, Check: server.SourceKeyCheck[name]}
		for _, k := range keys {
			if k.Source == name {
				row.Own, row.Last4, row.AllowFallback, row.UpdatedAt = true, k.Last4, k.AllowFallback, k.UpdatedAt
				row.Failing, row.FailingReason, row.FailingAt = k.Failing(), k.FailingReason, k.FailingAt
			}
		}
		d.Sources = append(d.Sources, row)
	}
	d.Secrets, d.MaxKey = s.srv.Config().Secrets != nil, maxVendorKey
	return nil
}

// sourceName is the :source of the URL, if it names a source the organization can set
// a key for.
func (s *Dashboard) sourceName(r *http.Request) (string, error) {
	name := server.PathParam(r, "source")
	for _, n := range s.srv.KeyedSources() {
		if n == name {
			return name, nil
		}
	}
	return "", &enrich.Error{Kind: enrich.KindNotFound, Code: "not_found", Message: "This server asks no such source with an API key."}
}

// handleSetSourceKey checks the key with the vendor and stores it sealed. A key the
// vendor refuses is answered on the page itself, never echoed back.
func handleSetSourceKey(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, err := s.sourceName(r)
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		if err := parseForm(w, r, maxVendorKey); err != nil {
			s.dashError(w, r, err)
			return
		}
		key := strings.TrimSpace(r.PostFormValue("key"))
		fallback := r.PostFormValue("allow_fallback") == "on"
		problem := ""
		switch {
		case key == "":
			problem = "Paste the key first."
		case strings.ContainsFunc(key, func(c rune) bool { return c <= ' ' || c == 0x7f }):
			problem = "The key has spaces or control characters in it: paste the key alone."
		default:
			err = s.srv.SetSourceKey(r.Context(), dashUser(r).OrgID, name, key, fallback)
			var e *enrich.Error
			switch {
			case err == nil:
				seeOther(w, r, "/dashboard/sources", name+": your organization now uses its own key, checked with the vendor.")
				return
			case errors.As(err, &e) && (e.Kind == enrich.KindUnprocessable || e.Kind == enrich.KindUnavailable):
				problem = e.Message
			default:
				s.dashError(w, r, err)
				return
			}
		}
		s.renderSources(w, r, http.StatusUnprocessableEntity, "", sourceKeysData{Rejected: name, Problem: problem})
	})
}

func handleClearSourceKey(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, err := s.sourceName(r)
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		if _, err := s.db.ClearSourceKey(r.Context(), dashUser(r).OrgID, name); err != nil {
			s.dashError(w, r, err)
			return
		}
		seeOther(w, r, "/dashboard/sources", name+": your organization uses the installation's key again.")
	})
}
