package dashboard

import (
	"errors"
	"math"
	"mime"
	"net/http"
	"strings"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/store"
)

// The Suppressions page: the organization's list of people and companies never to
// enrich. Adding one, a CSV of them, or lifting one goes through the checks and store
// methods of /v1/suppressions, so an entry made here is exactly one made by the API.

// suppressionsPerPage is how many entries the page lists at once.
const suppressionsPerPage = 50

// maxSuppressionsPage is the last page the pager goes to, as deep as the API's lists go.
const maxSuppressionsPage = server.MaxPageOffset/suppressionsPerPage + 1

// suppressionForm is what the add form shows again: the values just sent and why
// they were refused.
type suppressionForm struct {
	Kind, Value, Reason string
	Error               string
}

type suppressionsPage struct {
	Suppressions       []*store.Suppression
	Total              int64
	Page, Pages        int
	PrevPage, NextPage int
	Add                suppressionForm
	ImportError        string
	Refused            []enrich.RowError
	MaxReason          int
}

func handleSuppressionsPage(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page, err := server.IntParam(r.URL.Query(), "page", 1, 1, maxSuppressionsPage)
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		s.renderSuppressions(w, r, http.StatusOK, page, suppressionsPage{Add: suppressionForm{Kind: "email"}}, notice(r))
	})
}

func (s *Dashboard) renderSuppressions(w http.ResponseWriter, r *http.Request, status, page int, p suppressionsPage, note string) {
	list, total, err := s.db.ListSuppressions(r.Context(), dashUser(r).OrgID, page-1, suppressionsPerPage)
	if err != nil {
		s.dashError(w, r, err)
		return
	}
	p.Suppressions, p.Total, p.Page, p.MaxReason = list, total, page, store.MaxSuppressionReason
	p.Pages = max(1, int(math.Ceil(float64(total)/suppressionsPerPage)))
	if page > 1 {
		p.PrevPage = min(page-1, p.Pages)
	}
	if page < p.Pages && page < maxSuppressionsPage {
		p.NextPage = page + 1
	}
	s.render(w, r, status, "suppressions", view{Title: "Suppressions", Section: "suppressions", Notice: note, Data: p})
}

// suppressionBy is the signed-in user, as who added an entry.
func suppressionBy(r *http.Request) store.AddedBy {
	u := dashUser(r)
	return store.AddedBy{Kind: store.AddedByUser, ID: &u.ID, Name: &u.Email}
}

// handleAddSuppressions adds one entry (the form) or every row of a CSV file (the
// upload form, multipart), as POST /v1/suppressions does either.
func handleAddSuppressions(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mediaType == "multipart/form-data" {
			s.importSuppressions(w, r)
			return
		}
		form := suppressionForm{Kind: "email"}
		sup, err := func() (*store.Suppression, error) {
			if err := parseForm(w, r, 4*store.MaxSuppressionReason); err != nil {
				return nil, err
			}
			form = suppressionForm{Kind: r.PostFormValue("kind"), Value: strings.TrimSpace(r.PostFormValue("value")),
				Reason: strings.TrimSpace(r.PostFormValue("reason"))}
			var req server.SuppressionRequest
			value := &form.Value
			switch form.Kind {
			case "email":
				req.Email = value
			case "networkUrl":
				req.NetworkURL = value
			case "domain":
				req.Domain = value
			default:
				form.Kind = "email"
				return nil, enrich.Errorf(enrich.KindInvalid, "Choose what to suppress: an email address, a profile URL or a domain.")
			}
			if form.Value == "" {
				return nil, enrich.Errorf(enrich.KindInvalid, "Enter the address, profile URL or domain to suppress.")
			}
			if form.Reason != "" {
				req.Reason = &form.Reason
			}
			return s.srv.AddSuppression(r.Context(), dashUser(r).OrgID, req, suppressionBy(r))
		}()
		if err != nil {
			status, msg, ok := loopRefusal(w, err)
			if !ok {
				s.dashError(w, r, err)
				return
			}
			form.Error = msg
			s.renderSuppressions(w, r, status, 1, suppressionsPage{Add: form}, "")
			return
		}
		seeOther(w, r, "/dashboard/suppressions", sup.Hint+" is suppressed: it is never enriched again for your organization, and its watches are paused.")
	})
}

// importSuppressions adds every row of an uploaded CSV file, or none, listing the
// refused rows.
func (s *Dashboard) importSuppressions(w http.ResponseWriter, r *http.Request) {
	refuse := func(err error) {
		var e *enrich.Error
		if !errors.As(err, &e) || e.Kind == enrich.KindInternal || e.Kind == enrich.KindUnavailable {
			s.dashError(w, r, err)
			return
		}
		s.renderSuppressions(w, r, server.StatusOf[e.Kind], 1, suppressionsPage{Add: suppressionForm{Kind: "email"}, ImportError: e.Message, Refused: e.Rows}, "")
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxUploadForm)
	if err := r.ParseMultipartForm(maxUploadForm); err != nil {
		refuse(enrich.Errorf(enrich.KindInvalid, "Choose a CSV file of at most %d MiB.", store.MaxBatchBytes>>20))
		return
	}
	defer r.MultipartForm.RemoveAll()
	file, _, err := r.FormFile("file")
	if err != nil {
		refuse(enrich.Errorf(enrich.KindInvalid, "Choose a CSV file to upload."))
		return
	}
	content, err := readFilePart(file)
	if err != nil {
		refuse(err)
		return
	}
	u := dashUser(r)
	list, err := server.ReadSuppressionsCSV(s.srv.Config().NetworkHost, u.OrgID, content, suppressionBy(r))
	if err != nil {
		refuse(err)
		return
	}
	added, existing, err := s.db.ImportSuppressions(r.Context(), server.ActingOf(r.Context()), list)
	if err != nil {
		refuse(err)
		return
	}
	msg := plural(int64(added), "suppression", "suppressions") + " added"
	if existing > 0 {
		msg += "; " + plural(int64(existing), "row was", "rows were") + " suppressed already"
	}
	seeOther(w, r, "/dashboard/suppressions", msg+".")
}

// handleLiftSuppression lifts one of the organization's entries, as DELETE
// /v1/suppressions/{id} does.
func handleLiftSuppression(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sup, err := s.db.DeleteSuppression(r.Context(), server.ActingOf(r.Context()), dashUser(r).OrgID, server.PathID(r))
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		seeOther(w, r, "/dashboard/suppressions", "The suppression of "+sup.Hint+" is lifted: it may be enriched again. Watches it paused stay paused until resumed.")
	})
}
