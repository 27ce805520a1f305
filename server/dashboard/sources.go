package dashboard

import (
	"net/http"
	"slices"
	"strings"

	"enrichd/enrich"
	"enrichd/store"
)

// fillSettings is the Settings → Sources page: per object type, the fields the
// sources are asked in turn to fill for the organization's tasks.
type fillSettings struct {
	Lists []fillListView
	// Keys are the organization's own vendor keys, below the lists.
	Keys sourceKeysData
}

// fillListView is one object type's list: every field it can name, which of them the
// organization chose (none: it keeps Default, the server's list).
type fillListView struct {
	Object  string
	Fields  []fillField
	Own     bool     // the organization set a list of its own
	Default []string // serve's --fill-company or --fill-person
}

type fillField struct {
	Name    string
	Checked bool
}

// renderFillSettings writes the page with the organization's lists as stored.
func (s *Dashboard) renderFillSettings(w http.ResponseWriter, r *http.Request, status int, notice string, keys sourceKeysData) {
	own, err := s.db.OrgFillLists(r.Context(), dashUser(r).OrgID)
	if err != nil {
		s.dashError(w, r, err)
		return
	}
	defaults := s.srv.Config().Fill
	d := fillSettings{Keys: keys}
	if err := s.sourceKeys(r, &d.Keys); err != nil {
		s.dashError(w, r, err)
		return
	}
	for _, object := range []string{enrich.ObjectCompany, enrich.ObjectPerson} {
		chosen := own.For(object)
		l := fillListView{Object: object, Own: chosen != nil, Default: defaults.For(object)}
		for _, name := range enrich.FieldsOf(object) {
			l.Fields = append(l.Fields, fillField{Name: name, Checked: slices.Contains(chosen, name)})
		}
		d.Lists = append(d.Lists, l)
	}
	s.render(w, r, status, "sources", view{Title: "Sources", Section: "sources", Notice: notice, Data: d})
}

func handleFillSettings(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.renderFillSettings(w, r, http.StatusOK, notice(r), sourceKeysData{})
	})
}

// maxFieldName bounds a field name sent by the form: longer than every known one.
const maxFieldName = 64

// handleSetFillLists sets both lists from the form's checked boxes: none checked goes
// back to the server's default. A name the object type does not have is refused with
// the known ones, and nothing changes.
func handleSetFillLists(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := parseForm(w, r, maxFieldName); err != nil {
			s.dashError(w, r, err)
			return
		}
		var u store.FillUpdate
		for _, v := range []struct {
			object string
			list   **[]string
		}{{enrich.ObjectCompany, &u.Company}, {enrich.ObjectPerson, &u.Person}} {
			fields, err := enrich.ParseFields(v.object, strings.Join(r.PostForm[v.object], ","))
			if err != nil {
				s.dashError(w, r, err)
				return
			}
			*v.list = &fields
		}
		if err := s.db.SetFillLists(r.Context(), dashUser(r).OrgID, u); err != nil {
			s.dashError(w, r, err)
			return
		}
		seeOther(w, r, "/dashboard/settings/sources", "Fill lists saved: they apply from the next task a worker takes.")
	})
}
