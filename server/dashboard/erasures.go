package dashboard

import (
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"time"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/store"
)

// The Erasures page: erase a person from everything the organization holds (after a
// confirmation), list the erasures made, and download what is held on a person as
// JSON. Each goes through the checks and store methods of /v1/erasures and
// /v1/people/export, so an erasure made here is exactly one made by the API.

// erasuresPerPage is how many erasures the page lists at once.
const erasuresPerPage = 50

// maxErasuresPage is the last page the pager goes to, as deep as the API's lists go.
const maxErasuresPage = server.MaxPageOffset/erasuresPerPage + 1

// personForm is a person named in one of the page's forms: what was sent and why it
// was refused.
type personForm struct {
	Kind, Value string
	Error       string
}

type erasuresPage struct {
	Erasures           []*store.Erasure
	Total              int64
	Page, Pages        int
	PrevPage, NextPage int
	Erase, Export      personForm
	// Confirm is the person an erasure was asked for, to confirm: its hint.
	Confirm string
	// Tables are the registry's that an erasure removes rows of, in its order, for the
	// counts of what each erasure removed.
	Tables []erasedTable
}

// erasedTable is a table of the registry as the page names its rows: one, many.
type erasedTable struct{ Name, One, Many string }

// rowsOf names a table's rows for a count of them: "1 task", "2 batch rows".
func rowsOf(table string) erasedTable {
	if table == "audit_log" { // its rows are entries, whose subject an erasure blanks
		return erasedTable{Name: table, One: "audit entry", Many: "audit entries"}
	}
	many := strings.ReplaceAll(table, "_", " ")
	one := strings.TrimSuffix(many, "s")
	switch {
	case strings.HasSuffix(many, "ies"):
		one = strings.TrimSuffix(many, "ies") + "y"
	case strings.HasSuffix(many, "sses"), strings.HasSuffix(many, "ches"):
		one = strings.TrimSuffix(many, "es")
	}
	return erasedTable{Name: table, One: one, Many: many}
}

func handleErasuresPage(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page, err := server.IntParam(r.URL.Query(), "page", 1, 1, maxErasuresPage)
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		s.renderErasures(w, r, http.StatusOK, page, erasuresPage{Erase: personForm{Kind: "email"}, Export: personForm{Kind: "email"}}, notice(r))
	})
}

func (s *Dashboard) renderErasures(w http.ResponseWriter, r *http.Request, status, page int, p erasuresPage, note string) {
	list, total, err := s.db.ListErasures(r.Context(), dashUser(r).OrgID, page-1, erasuresPerPage)
	if err != nil {
		s.dashError(w, r, err)
		return
	}
	p.Erasures, p.Total, p.Page = list, total, page
	p.Pages = max(1, int(math.Ceil(float64(total)/erasuresPerPage)))
	if page > 1 {
		p.PrevPage = min(page-1, p.Pages)
	}
	if page < p.Pages && page < maxErasuresPage {
		p.NextPage = page + 1
	}
	for _, t := range store.PersonalTables() {
		if t.Erasure.Action != store.EraseKeep {
			p.Tables = append(p.Tables, rowsOf(t.Name))
		}
	}
	s.render(w, r, status, "erasures", view{Title: "Erasures", Section: "erasures", Notice: note, Data: p})
}

// personRequest reads the person a form names: its kind (email or networkUrl) and its
// value.
func personRequest(r *http.Request) (personForm, server.ErasureRequest, error) {
	form := personForm{Kind: r.PostFormValue("kind"), Value: strings.TrimSpace(r.PostFormValue("value"))}
	var req server.ErasureRequest
	switch form.Kind {
	case "email":
		req.Email = &form.Value
	case "networkUrl":
		req.NetworkURL = &form.Value
	default:
		form.Kind = "email"
		return form, req, enrich.Errorf(enrich.KindInvalid, "Choose how to name the person: an email address or a profile URL.")
	}
	if form.Value == "" {
		return form, req, enrich.Errorf(enrich.KindInvalid, "Enter the person's address or profile URL.")
	}
	return form, req, nil
}

// handleErase erases a person once confirmed: the form's first post shows what will
// be erased and asks again; the second, with confirm=yes, erases, as POST
// /v1/erasures does.
func handleErase(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := parseForm(w, r, 8<<10); err != nil {
			s.dashError(w, r, err)
			return
		}
		form, req, err := personRequest(r)
		if err == nil && r.PostFormValue("confirm") != "yes" {
			// Checked as the erasure will be, and shown masked, to confirm.
			var ne store.NewErasure
			if ne, err = server.CheckErasure(s.srv.Config().NetworkHost, dashUser(r).OrgID, req, erasureBy(r)); err == nil {
				s.renderErasures(w, r, http.StatusOK, 1, erasuresPage{Erase: form, Export: personForm{Kind: "email"}, Confirm: ne.Subject.Hint()}, "")
				return
			}
		}
		var er *store.Erasure
		if err == nil {
			er, err = s.srv.Erase(r.Context(), dashUser(r).OrgID, req, erasureBy(r))
		}
		if err != nil {
			status, msg, ok := loopRefusal(w, err)
			if !ok {
				s.dashError(w, r, err)
				return
			}
			form.Error = msg
			s.renderErasures(w, r, status, 1, erasuresPage{Erase: form, Export: personForm{Kind: "email"}}, "")
			return
		}
		told := ""
		if n := len(er.Loops); n > 0 {
			told = " " + plural(int64(n), "Loop that was sent them is", "Loops that were sent them are") + " being told."
		}
		seeOther(w, r, "/dashboard/erasures", er.Hint+" is erased from everything your organization holds, and suppressed."+told)
	})
}

// erasureBy is the signed-in user, as who asked for an erasure.
func erasureBy(r *http.Request) store.AddedBy {
	u := dashUser(r)
	return store.AddedBy{Kind: store.AddedByUser, ID: &u.ID, Name: &u.Email}
}

// handleExport answers a download of everything the organization holds on a person,
// as GET /v1/people/export does.
func handleExport(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := parseForm(w, r, 8<<10); err != nil {
			s.dashError(w, r, err)
			return
		}
		form, req, err := personRequest(r)
		var x *store.PersonExport
		if err == nil {
			x, err = s.srv.ExportPerson(r.Context(), dashUser(r).OrgID, req)
		}
		if err != nil {
			status, msg, ok := loopRefusal(w, err)
			if !ok {
				s.dashError(w, r, err)
				return
			}
			form.Error = msg
			s.renderErasures(w, r, status, 1, erasuresPage{Erase: personForm{Kind: "email"}, Export: form}, "")
			return
		}
		body, err := json.MarshalIndent(x, "", "  ")
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Disposition", `attachment; filename="person-export-`+s.db.Now().UTC().Format(time.DateOnly)+`.json"`)
		w.WriteHeader(http.StatusOK)
		w.Write(append(body, '\n'))
	})
}
