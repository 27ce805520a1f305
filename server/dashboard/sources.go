package dashboard

import (
	"net/http"
	"slices"
	"strings"

	"enrichd/enrich"
	"enrichd/store"
)

// fillListView is one object type's list: every field it can name, which of them the
// organization chose (none: it keeps Default, the server's list).
type fillListView struct {
	Object  string
	Fields  []fillField
	Own     bool     // the organization set a list of its own
	Chosen  []string // the organization's own list, in its order
	Default []string // serve's --fill-company or --fill-person
}

// InForce is the list the organization's tasks work to: its own, else the default.
func (l fillListView) InForce() []string {
	if l.Own {
		return l.Chosen
	}
	return l.Default
}

type fillField struct {
	Name    string
	Checked bool
}

// fillLists are the organization's lists as stored, beside the server's defaults.
func (s *Dashboard) fillLists(r *http.Request) ([]fillListView, error) {
	own, err := s.db.OrgFillLists(r.Context(), dashUser(r).OrgID)
	if err != nil {
		return nil, err
	}
	defaults := s.srv.Config().Fill
	var lists []fillListView
	for _, object := range []string{enrich.ObjectCompany, enrich.ObjectPerson} {
		chosen := own.For(object)
		l := fillListView{Object: object, Own: chosen != nil, Chosen: chosen, Default: defaults.For(object)}
		for _, name := range enrich.FieldsOf(object) {
			l.Fields = append(l.Fields, fillField{Name: name, Checked: slices.Contains(chosen, name)})
		}
		lists = append(lists, l)
	}
	return lists, nil
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
		seeOther(w, r, "/dashboard/sources", "Fill lists saved: they apply from the next task a worker takes.")
	})
}
