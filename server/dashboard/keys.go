package dashboard

import (
	"net/http"
	"slices"
	"strings"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/store"
)

// maxKeyName bounds a key's name typed in the dashboard. The store and `enrichd keys
// create --name` take any one line of text, an empty one included, so the dashboard
// does too, within a bound a table cell can show.
const maxKeyName = 100

// keysData is the keys page. NewKey is the plaintext of a key created by this very
// request: it is only ever in the answer to the POST that made it.
type keysData struct {
	Keys    []store.APIKey
	NewKey  string
	NewName string
	MaxName int
}

// renderKeys writes the keys page of the signed-in user's organization, newest first.
func (s *Dashboard) renderKeys(w http.ResponseWriter, r *http.Request, status int, notice string, d keysData) {
	keys, err := s.db.ListKeys(r.Context(), dashUser(r).OrgName)
	if err != nil {
		s.dashError(w, r, err)
		return
	}
	slices.Reverse(keys) // the store lists them oldest first, as `keys list` prints them
	d.Keys, d.MaxName = keys, maxKeyName
	s.render(w, r, status, "keys", view{Title: "API keys", Section: "keys", Notice: notice, Data: d})
}

func handleKeys(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.renderKeys(w, r, http.StatusOK, notice(r), keysData{})
	})
}

// handleCreateKey answers with the page itself rather than a redirect: the new key is
// shown once, in this answer, and never travels in a URL.
func handleCreateKey(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := parseForm(w, r, maxKeyName); err != nil {
			s.dashError(w, r, err)
			return
		}
		name := strings.TrimSpace(r.PostFormValue("name"))
		plain, _, err := s.db.CreateKey(r.Context(), server.ActingOf(r.Context()), dashUser(r).OrgName, name, false)
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		// The notice names no prefix: the first key-like text on the page is the key.
		s.renderKeys(w, r, http.StatusCreated, "Key created.", keysData{NewKey: plain, NewName: name})
	})
}

func handleRevokeKey(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := dashUser(r)
		id := server.PathID(r)
		// RevokeKey looks the key up within the user's organization only: another
		// organization's key is not found, exactly as in the API.
		if err := s.db.RevokeKey(r.Context(), server.ActingOf(r.Context()), u.OrgName, id); err != nil {
			if enrich.KindOf(err) == enrich.KindNotFound {
				err = server.NoSuchKey()
			}
			s.dashError(w, r, err)
			return
		}
		msg := "Key revoked: requests with it are refused from now on."
		if keys, err := s.db.ListKeys(r.Context(), u.OrgName); err == nil {
			for _, k := range keys {
				if k.ID == id {
					msg = "Key " + k.Prefix + "… revoked: requests with it are refused from now on."
				}
			}
		}
		seeOther(w, r, "/dashboard/settings/keys", msg)
	})
}
