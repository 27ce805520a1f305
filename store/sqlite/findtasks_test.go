package sqlite_test

import (
	"database/sql"
	"maps"
	"regexp"
	"slices"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"
	"enrichd/store/sqlite"
)

func explain(t *testing.T, raw *sql.DB, q string, args ...any) []string {
	t.Helper()
	rows, err := raw.Query("EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	return plan
}

// TestDashboardQueriesUseIndexes checks the plan of every statement FindTasks can run,
// and of the dashboard's other lists: each walks an index, bounded by every filter
// the index can take, and sorts nothing.
func TestDashboardQueriesUseIndexes(t *testing.T) {
	_, path, _ := openDB(t)
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	at := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	cursor := &store.TaskCursor{CreatedAt: at.Add(-time.Hour), ID: "0193a1b2-0000-7000-8000-000000000000"}
	for _, status := range []string{"", store.StatusFailed, store.StatusQueued} {
		for _, objectType := range []string{"", enrich.ObjectPerson} {
			for _, loop := range []string{"", "l"} {
				for _, from := range []time.Time{{}, at.Add(-24 * time.Hour)} {
					for _, to := range []time.Time{{}, at, at.Add(-2 * time.Hour)} {
						for _, before := range []*store.TaskCursor{nil, cursor} {
							f := store.TaskFilter{Status: status, ObjectType: objectType, LoopID: loop, From: from, To: to, Before: before}
							index, bounds := "tasks_org_created", "org_id=?"
							switch {
							case loop != "":
								index, bounds = "tasks_org_loop_created", "org_id=? AND loop_id=?"
							case status == store.StatusQueued:
								index = "tasks_org_queued"
							}
							if !from.IsZero() {
								bounds += " AND created_at>?"
							}
							switch {
							case before != nil && (to.IsZero() || before.CreatedAt.Before(to)):
								bounds += " AND (created_at,id)<(?,?)"
							case !to.IsZero():
								bounds += " AND created_at<?"
							}
							q, args := sqlite.FindTasksQuery("o", f, 50)
							plan := explain(t, raw, q, args...)
							// Each task's result is read by its id, from task_results.
							want := []string{"SEARCH tasks USING INDEX " + index + " (" + bounds + ")",
								"CORRELATED SCALAR SUBQUERY 1", "SEARCH task_results USING INTEGER PRIMARY KEY (rowid=?)"}
							if !slices.Equal(plan, want) {
								t.Errorf("%+v: plan %q, want %q", f, plan, want)
							}
						}
					}
				}
			}
		}
	}
	wants := map[string]string{
		"TaskDeliveries": "SEARCH deliveries USING INDEX deliveries_task (task_id=?)",
		"ListGrants":     "SEARCH credit_grants USING INDEX credit_grants_org (org_id=?)",
		"LedgerPage":     "SEARCH credit_ledger USING INDEX credit_ledger_org (org_id=? AND id<?)",
		"DailyCredits":   "SEARCH credit_days USING PRIMARY KEY (org_id=? AND day>? AND day<?)",
		"CreditBalance":  "SEARCH credit_days USING PRIMARY KEY (org_id=?)",
		"ListKeys":       "SEARCH api_keys USING INDEX api_keys_org (org_id=?)",
	}
	for name, q := range sqlite.DashboardQueries {
		plan := explain(t, raw, q.Query, q.Args...)
		if len(plan) == 0 || plan[0] != wants[name] {
			t.Errorf("%s: plan %q, want %q first", name, plan, wants[name])
		}
		for _, line := range plan[1:] {
			// A task sends one event, so its deliveries are sorted at no cost; every
			// other list is read in the order of its index.
			if name != "TaskDeliveries" || line != "USE TEMP B-TREE FOR ORDER BY" {
				t.Errorf("%s: plan %q", name, plan)
			}
		}
	}
}

var subqueryNumber = regexp.MustCompile(`SUBQUERY \d+`)

// TestTaskQueryPlans checks the plans of the statements migration 8 changed: the task
// reads find each result by its id, the lists newest first walk their ascending index
// backwards without sorting, retention finds the settled tasks by their index,
// and their results and keys through them, by primary keys, and the sweep of
// abandoned tasks finds the running ones by theirs.
func TestTaskQueryPlans(t *testing.T) {
	_, path, _ := openDB(t)
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	result := []string{"CORRELATED SCALAR SUBQUERY", "SEARCH task_results USING INTEGER PRIMARY KEY (rowid=?)"}
	settled := []string{"LIST SUBQUERY", "SEARCH tasks USING INDEX tasks_settled_finished (finished_at<?)"}
	byID := []string{"LIST SUBQUERY", "SEARCH tasks USING INDEX sqlite_autoindex_tasks_1 (id=?)"}
	wants := map[string][]string{
		"GetTask":   append([]string{"SEARCH tasks USING INDEX sqlite_autoindex_tasks_1 (id=?)"}, result...),
		"ListTasks": append([]string{"SEARCH tasks USING INDEX tasks_org_created (org_id=?)"}, result...),
		// The queued tasks have an index of their own; a settled status is checked on
		// the entries of the list's index.
		"ListTasksByStatus": append([]string{"SEARCH tasks USING INDEX tasks_org_queued (org_id=?)"}, result...),
		"ListTasksFailed":   append([]string{"SEARCH tasks USING INDEX tasks_org_created (org_id=?)"}, result...),
		"ListDeliveries":    {"SEARCH deliveries USING INDEX deliveries_loop_created (loop_id=?)"},
		// Every sweep runs it on the single writer: the running tasks' index, not a walk
		// of every task's.
		"AbandonedOrgs": {"SEARCH tasks USING INDEX tasks_running_lease (lease_until<?)", "USE TEMP B-TREE FOR DISTINCT"},
		// A claim walks the organization's queued tasks alone, oldest first, and looks
		// for more by the same index; the line's scan stops at its first or second turn
		// (one of another organization).
		"Claim": {"SEARCH tasks USING INDEX sqlite_autoindex_tasks_1 (id=?)", "SCALAR SUBQUERY",
			"SEARCH tasks USING COVERING INDEX tasks_org_queued (org_id=?)",
			"CORRELATED SCALAR SUBQUERY", "SEARCH more USING COVERING INDEX tasks_org_queued (org_id=?)",
			"CORRELATED SCALAR SUBQUERY", "SCAN queue_turns"},
		// The sweep's update walks the running tasks alone, not the organizations' lists.
		"RequeueAbandoned": {"SEARCH tasks USING INDEX tasks_running_lease (lease_until<?)"},
		"PurgeSettled":     settled[1:],
		"PurgeResults":     append([]string{"SEARCH task_results USING INTEGER PRIMARY KEY (rowid=?)"}, byID...),
		"PurgeKeys": append(append([]string{"SEARCH idempotency_keys USING PRIMARY KEY (org_id=? AND key=?)"}, byID...),
			append(byID, "CREATE BLOOM FILTER")...),
		"PurgeTasks": {"SEARCH tasks USING COVERING INDEX sqlite_autoindex_tasks_1 (id=?)"},
	}
	queries := maps.Clone(sqlite.PlanQueries)
	for name, q := range store.PurgeQueries(2) {
		args := []any{"t1", "t2"}
		if name == "PurgeSettled" {
			args = []any{int64(5), 500}
		}
		queries[name] = struct {
			Query string
			Args  []any
		}{sqlite.Unlocked(q), args}
	}
	for name, q := range queries {
		plan := explain(t, raw, q.Query, q.Args...)
		for i, line := range plan {
			plan[i] = subqueryNumber.ReplaceAllString(line, "SUBQUERY") // numbered in the order SQLite meets them
		}
		if !slices.Equal(plan, wants[name]) {
			t.Errorf("%s: plan %q, want %q", name, plan, wants[name])
		}
	}
}
