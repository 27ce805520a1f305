package sqlite_test

import (
	"database/sql"
	"slices"
	"testing"

	"enrichd/store/sqlite"
)

// TestSpendQueryPlans: GET /v1/sources and the budgets read an organization's spend
// within the primary key's range and its asks on the books through source_asks_org;
// an installation's budget sums through the partial indexes of the installation's
// keys; a settling takes its ask by the primary key and the sweep the oldest asks
// through source_asks_booked: none reads a whole table or sorts.
func TestSpendQueryPlans(t *testing.T) {
	_, path, _ := openDB(t)
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	wants := map[string][]string{
		"SourceSpend": {"SEARCH source_spend USING PRIMARY KEY (org_id=?)"},
		"SourceAsks":  {"SEARCH source_asks USING INDEX source_asks_org (org_id=?)"},
		"SourceCaps":  {"SEARCH source_budgets USING PRIMARY KEY (org_id=? AND source=?)"},
		"OrgMonth": {"SCAN CONSTANT ROW",
			"SCALAR SUBQUERY 1", "SEARCH source_spend USING PRIMARY KEY (org_id=? AND source=? AND day>?)",
			"SCALAR SUBQUERY 2", "SEARCH source_asks USING INDEX source_asks_org (org_id=? AND source=? AND day>?)"},
		"InstallationMonth": {"SCAN CONSTANT ROW",
			"SCALAR SUBQUERY 1", "SEARCH source_spend USING INDEX source_spend_installation (source=? AND day>?)",
			"SCALAR SUBQUERY 2", "SEARCH source_asks USING INDEX source_asks_installation (source=? AND day>?)"},
		"AddToSourceAsk":     {"SEARCH source_asks USING PRIMARY KEY (id=?)"},
		"SettleSourceAsk":    {"SEARCH source_asks USING PRIMARY KEY (id=?)"},
		"DeadSourceAskSweep": {"SEARCH source_asks USING INDEX source_asks_booked (booked_at<?)"},
	}
	for name, q := range sqlite.SpendQueries {
		plan := explain(t, raw, sqlite.Unlocked(q.Query), q.Args...)
		if !slices.Equal(plan, wants[name]) {
			t.Errorf("%s: plan %q, want %q", name, plan, wants[name])
		}
	}
}
