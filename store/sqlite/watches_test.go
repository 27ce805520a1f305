package sqlite_test

import (
	"database/sql"
	"slices"
	"strings"
	"testing"

	"enrichd/store/sqlite"
)

// TestWatchQueryPlans: the watch lists walk their index without sorting, the
// scheduler reads only the due index's range, and the month's spend only the watch
// tasks' index: none of them reads a whole table.
func TestWatchQueryPlans(t *testing.T) {
	_, path, _ := openDB(t)
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	wants := map[string][]string{
		"ListWatches":      {"SEARCH watches USING INDEX watches_org_created (org_id=?)"},
		"ListLoopWatches":  {"SEARCH watches USING INDEX watches_org_loop_created (org_id=? AND loop_id=?)"},
		"CountWatches":     {"SEARCH watches USING COVERING INDEX watches_org_created (org_id=?)"},
		"CountLoopWatches": {"SEARCH watches USING COVERING INDEX watches_org_loop_created (org_id=? AND loop_id=?)"},
		"WatchSpend":       {"SEARCH tasks USING INDEX tasks_org_watch_created (org_id=? AND created_at>?)"},
	}
	for name, q := range sqlite.WatchQueries {
		plan := explain(t, raw, q.Query, q.Args...)
		if name == "DueWatches" {
			// The window sorts the due rows by organization; what it reads is the due
			// index's range, never the table's every row.
			if !slices.ContainsFunc(plan, func(l string) bool {
				return strings.Contains(l, "SEARCH watches USING INDEX watches_due (next_run_at<?)")
			}) || slices.ContainsFunc(plan, func(l string) bool { return strings.HasPrefix(l, "SCAN watches") }) {
				t.Errorf("%s: plan %q", name, plan)
			}
			continue
		}
		if !slices.Equal(plan, wants[name]) {
			t.Errorf("%s: plan %q, want %q", name, plan, wants[name])
		}
	}
}
