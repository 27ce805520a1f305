package sqlite_test

import (
	"database/sql"
	"slices"
	"testing"

	"enrichd/store/sqlite"
)

// TestMissQueryPlans: a task reads its subject's misses, and an answer deletes a
// source's, within the primary key's range; the purge reads the oldest through
// source_misses_missed: none reads the whole table or sorts.
func TestMissQueryPlans(t *testing.T) {
	_, path, _ := openDB(t)
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	wants := map[string][]string{
		"SourceMisses": {"SEARCH source_misses USING PRIMARY KEY (subject=?)"},
		"ForgetMisses": {"SEARCH source_misses USING PRIMARY KEY (subject=? AND source=?)"},
		"PurgeMisses": {"SEARCH source_misses USING PRIMARY KEY (subject=? AND source=? AND org_id=?)",
			"LIST SUBQUERY 2", "SEARCH source_misses USING COVERING INDEX source_misses_missed (missed_at<?)"},
	}
	for name, q := range sqlite.MissQueries {
		plan := explain(t, raw, sqlite.Unlocked(q.Query), q.Args...)
		if !slices.Equal(plan, wants[name]) {
			t.Errorf("%s: plan %q, want %q", name, plan, wants[name])
		}
	}
}
