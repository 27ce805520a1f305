package servertest

import (
	"fmt"
	"net/http"
	"testing"
)

// AuditEntries lists the key's organization's whole audit log through the API, newest
// first.
func (e *Env) AuditEntries(query string, headers ...string) []map[string]any {
	e.T.Helper()
	var all []map[string]any
	for page := 0; ; page++ {
		sep := "?"
		if query != "" {
			sep = "?" + query + "&"
		}
		r := e.Do("GET", fmt.Sprintf("/v1/audit%spage=%d&pageSize=100", sep, page), nil, headers...)
		if r.Status != http.StatusOK {
			e.T.Fatalf("GET /v1/audit?%s: %d %s", query, r.Status, r.Raw)
		}
		for _, d := range r.Get("data").([]any) {
			all = append(all, d.(map[string]any))
		}
		if r.Get("has_more") != true {
			return all
		}
	}
}

// ActionsOf counts the entries of each action.
func ActionsOf(entries []map[string]any) map[string]int {
	out := map[string]int{}
	for _, en := range entries {
		out[en["action"].(string)]++
	}
	return out
}

// EntryOf is the one entry of action whose field is value.
func EntryOf(t *testing.T, entries []map[string]any, action, field, value string) map[string]any {
	t.Helper()
	for _, en := range entries {
		if en["action"] == action && en[field] == value {
			return en
		}
	}
	t.Fatalf("no %s entry with %s %q", action, field, value)
	return nil
}

func ActorOf(en map[string]any) (kind string, name any) {
	a := en["actor"].(map[string]any)
	return a["kind"].(string), a["name"]
}
