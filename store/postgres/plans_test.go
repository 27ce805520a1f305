package postgres

import (
	"context"
	"strings"
	"testing"

	"enrichd/store"
)

// TestListQueriesUseAnIndex checks that every list and scan query of this half of the
// store can be served by an index: with sequential scans priced out, the plan must
// not read a whole table. (On tables this small the planner would rightly scan them.)
func TestListQueriesUseAnIndex(t *testing.T) {
	db, _ := newTestDB(t)
	ctx := context.Background()
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	type query struct {
		name, sql string
		args      []any
	}
	var queries []query
	for _, q := range []query{
		{"ListKeys", rebind(store.PlannedQueries["ListKeys"]), []any{"o"}},
		{"Authenticate", `SELECT id FROM api_keys WHERE hash = $1`, []any{[]byte("h")}},
		{"ListGrants", rebind(store.PlannedQueries["ListGrants"]), []any{"o"}},
		{"lockGrants", rebind(store.PlannedQueries["lockGrants"]), []any{"o"}},
		{"LedgerPage", rebind(store.PlannedQueries["LedgerPage"]), []any{"o", 10, 50}},
		{"refund", `SELECT grant_id FROM credit_ledger WHERE task_id = $1`, []any{"t"}},
		{"DailyCredits", rebind(store.PlannedQueries["DailyCredits"]), []any{"o", 1, 2}},
		{"CreditBalance", rebind(store.PlannedQueries["CreditBalance"]), []any{"o"}},
		{"ListLoops", `SELECT id FROM loops WHERE org_id = $1 ORDER BY created_at, id`, []any{"o"}},
		{"ListDeliveries", rebind(store.DeliveryStatements["ListDeliveries"].Query), store.DeliveryStatements["ListDeliveries"].Args},
		{"TaskDeliveries", rebind(store.DeliveryStatements["TaskDeliveries"].Query), store.DeliveryStatements["TaskDeliveries"].Args},
		{"due", `SELECT id FROM deliveries WHERE ` + dueWhere + ` ORDER BY next_attempt_at, id LIMIT 10`, []any{1}},
		{"leased", `SELECT loop_id, count(*) FROM deliveries WHERE loop_id = ANY($1) AND status = 'pending' AND lease_until > $2 GROUP BY loop_id`, []any{[]string{"l"}, 1}},
		{"ListUsers", `SELECT id FROM users WHERE org_id = $1 ORDER BY email`, []any{"o"}},
		{"purge sessions", `SELECT hash FROM sessions WHERE last_seen_at < $1`, []any{1}},
		{"purge links", `SELECT hash FROM user_links WHERE expires_at <= $1`, []any{1}},
		{"replicas", `SELECT id FROM replicas WHERE expires_at <= $1`, []any{1}},
		{"purgeBatches", `SELECT id FROM batches WHERE created_at < $1 ORDER BY created_at LIMIT $2`, []any{5, 1}},
		{"findBatchByKey", `SELECT id FROM batches WHERE org_id = $1 AND idempotency_key = $2`, []any{"o", "k"}},
	} {
		queries = append(queries, q)
	}
	for name, q := range store.BatchQueries {
		queries = append(queries, query{name, rebind(q.Query), q.Args})
	}
	for name, q := range store.MissQueries {
		queries = append(queries, query{name, rebind(q.Query), q.Args})
	}
	for name, q := range store.SpendQueries {
		queries = append(queries, query{name, rebind(q.Query), q.Args})
	}
	queries = append(queries, query{"LiveReplicas", liveReplicasQuery, []any{1}})
	for name, q := range store.SuppressionQueries {
		queries = append(queries, query{name, rebind(q.Query), q.Args})
	}
	for name, q := range store.SubjectQueries() {
		queries = append(queries, query{"find " + name, rebind(q.Query), q.Args})
	}
	for name, q := range facade(db).AuditQueries() {
		queries = append(queries, query{name, rebind(q.Query), q.Args})
	}
	for name, q := range store.ErasureQueries {
		queries = append(queries, query{name, rebind(q.Query), q.Args})
	}
	for _, q := range queries {
		var plan strings.Builder
		rows, err := conn.Query(ctx, `EXPLAIN `+q.sql, q.args...)
		if err != nil {
			t.Fatalf("%s: %v", q.name, err)
		}
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan.WriteString(line + "\n")
		}
		if strings.Contains(plan.String(), "Seq Scan") {
			t.Errorf("%s reads a whole table:\n%s", q.name, plan.String())
		}
	}
}
