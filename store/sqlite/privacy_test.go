package sqlite_test

import (
	"database/sql"
	"slices"
	"strings"
	"testing"

	"enrichd/store"
	"enrichd/store/sqlite"
)

// TestSubjectQueriesUseTheirIndexes: finding a person's rows reads, table by table of
// the registry, the ranges of the subject hash indexes, never a whole table; the
// suppressions are listed, counted and checked on their own indexes.
func TestSubjectQueriesUseTheirIndexes(t *testing.T) {
	_, path, _ := openDB(t)
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for name, q := range store.SubjectQueries() {
		plan := explain(t, raw, sqlite.Unlocked(q.Query), q.Args...)
		table := strings.Fields(name)[0]
		if slices.ContainsFunc(plan, func(l string) bool { return strings.HasPrefix(l, "SCAN ") }) ||
			!slices.ContainsFunc(plan, func(l string) bool { return strings.HasPrefix(l, "SEARCH t USING") }) {
			t.Errorf("finding %s's rows: plan %q", table, plan)
		}
	}
	wants := map[string][]string{
		"ListSuppressions":  {"SEARCH suppressions USING INDEX suppressions_org_created (org_id=?)"},
		"CountSuppressions": {"SEARCH suppressions USING COVERING INDEX suppressions_org_created (org_id=?)"},
		"Suppressed":        {"SEARCH suppressions USING COVERING INDEX sqlite_autoindex_suppressions_2 (org_id=? AND hash=?)"},
		"LoadSuppressions":  {"SEARCH suppressions USING COVERING INDEX sqlite_autoindex_suppressions_2 (org_id=?)"},
	}
	for name, q := range sqlite.SuppressionQueries {
		plan := explain(t, raw, q.Query, q.Args...)
		if !slices.ContainsFunc(plan, func(l string) bool { return slices.Contains(wants[name], l) }) ||
			slices.ContainsFunc(plan, func(l string) bool {
				return (strings.HasPrefix(l, "SCAN ") && l != "SCAN CONSTANT ROW") || strings.Contains(l, "TEMP B-TREE")
			}) {
			t.Errorf("%s: plan %q, want %q", name, plan, wants[name])
		}
	}
	erasures := map[string]string{
		"ListErasures":       "SEARCH erasures USING INDEX erasures_org_created (org_id=?)",
		"CountErasures":      "SEARCH erasures USING COVERING INDEX erasures_org_created (org_id=?)",
		"GetErasure":         "SEARCH erasures USING INDEX sqlite_autoindex_erasures_1 (id=?)",
		"ErasureEvents":      "SEARCH deliveries USING INDEX deliveries_erasure (erasure_id=?)",
		"IncompleteErasures": "SCAN e USING INDEX erasures_incomplete",
	}
	for name, q := range sqlite.ErasureQueries {
		plan := explain(t, raw, q.Query, q.Args...)
		if !slices.Contains(plan, erasures[name]) || slices.ContainsFunc(plan, func(l string) bool {
			return (strings.HasPrefix(l, "SCAN ") && l != erasures[name]) || strings.Contains(l, "TEMP B-TREE")
		}) {
			t.Errorf("%s: plan %q, want %q", name, plan, erasures[name])
		}
	}
}

// TestAuditQueriesUseTheirIndexes: every list, export, verification and purge of the
// audit log reads the range of an index, in the order it returns, and sorts nothing:
// the subject's for a subject, the action's for an action but enrichments, the
// primary key (the organization's chain, by time) otherwise.
func TestAuditQueriesUseTheirIndexes(t *testing.T) {
	_, path, _ := openDB(t)
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for name, q := range (&store.DB{Driver: (*sqlite.DB)(nil)}).AuditQueries() {
		want := "PRIMARY KEY"
		switch {
		case strings.Contains(name, "subject"):
			want = "INDEX audit_log_subject"
		case strings.Contains(name, "action"):
			want = "INDEX audit_log_org_action"
		}
		plan := explain(t, raw, sqlite.Unlocked(q.Query), q.Args...)
		if len(plan) != 1 || !strings.HasPrefix(plan[0], "SEARCH audit_log USING ") || !strings.Contains(plan[0], want) {
			t.Errorf("%s: plan %q, want a search of %s alone", name, plan, want)
		}
	}
}
