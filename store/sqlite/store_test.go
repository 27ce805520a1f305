package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"enrichd/store"
	"enrichd/store/sqlite"
	"enrichd/store/storetest"

	"github.com/matryer/is"
	_ "modernc.org/sqlite"
)

func openDB(t testing.TB) (*store.DB, string, *storetest.Clock) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "enrichd.db")
	clk := storetest.NewClock(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	return storetest.Open(t, path, clk), path, clk
}

// The helpers of the conformance suite, by the names these tests have long used.
var (
	newOrg        = storetest.NewOrg
	newTask       = storetest.NewTask
	settleCompany = storetest.SettleCompany
	hexSum        = storetest.HexSum
)

func TestMigrationsAreRecordedAndAppliedOnce(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, path, _ := openDB(t)
	v, err := db.SchemaVersion(ctx)
	is.NoErr(err)
	is.True(v >= 1)
	_, err = db.CreateOrg(ctx, "acme")
	is.NoErr(err)
	is.NoErr(db.Close())

	again, err := store.Open(ctx, path, storetest.Schema(t)) // reopening applies nothing twice
	is.NoErr(err)
	defer again.Close()
	_, err = again.FindOrg(ctx, "acme")
	is.NoErr(err)

	extended := storetest.Schema(t) + "\n-- migration " + "999: out of order\nSELECT 1;\n"
	_, err = store.Open(ctx, filepath.Join(t.TempDir(), "x.db"), extended)
	is.True(err != nil) // a gap in migration numbers is refused
}

// TestListQueriesUseIndexes checks with EXPLAIN QUERY PLAN that the queries behind
// lists, claims and sweeps are served by an index instead of scanning or sorting.
func TestListQueriesUseIndexes(t *testing.T) {
	_, path, _ := openDB(t)
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	queries := map[string]string{
		"list":            `SELECT id FROM tasks WHERE org_id = 'o' ORDER BY created_at DESC, id DESC LIMIT 25`,
		"list by status":  `SELECT id FROM tasks WHERE org_id = 'o' AND status = 'queued' ORDER BY created_at DESC, id DESC LIMIT 25`,
		"count by status": `SELECT count(*) FROM tasks WHERE org_id = 'o' AND status = 'queued'`,
		"next turn":       `SELECT org_id FROM queue_turns ORDER BY seq LIMIT 1`,
		"last turn":       `SELECT max(seq) FROM queue_turns`,
		"claim":           `SELECT id FROM tasks WHERE org_id = 'o' AND status = 'queued' ORDER BY created_at, id LIMIT 1`,
		"expiry":          `SELECT id FROM tasks WHERE status IN ('queued', 'running') AND expires_at <= 5`,
		"leases":          `SELECT id FROM tasks WHERE status = 'running' AND lease_until < 5`,
		"ledger":          `SELECT id FROM credit_ledger WHERE org_id = 'o' ORDER BY id`,
		"task ledger":     `SELECT id FROM credit_ledger WHERE task_id = 't'`,
		"loops":           `SELECT id FROM loops WHERE org_id = 'o' ORDER BY created_at, id`,
		"deliveries":      `SELECT id FROM deliveries WHERE loop_id = 'l' ORDER BY created_at DESC, id DESC LIMIT 25`,
		"delivery count":  `SELECT count(*) FROM deliveries WHERE loop_id = 'l'`,
		"due deliveries": `SELECT id, loop_id, next_attempt_at FROM deliveries WHERE status = 'pending' AND next_attempt_at <= 5
			AND (lease_until IS NULL OR lease_until <= 5) AND loop_id NOT IN (SELECT value FROM json_each('[]'))
			ORDER BY next_attempt_at LIMIT 256`,
		"staff by page": `SELECT r.id, r.data FROM positions p JOIN records r ON r.id = p.record_id
			WHERE p.company_network_url = 'u' AND p.is_current = 1 AND r.origin = 'store' LIMIT 500`,
		"staff by domain": `SELECT r.id, r.data FROM positions p JOIN records r ON r.id = p.record_id
			WHERE p.company_domain = 'acme.com' AND p.is_current = 1 AND r.origin = 'dataset' LIMIT 500`,
		"staff by name": `SELECT r.id, r.data FROM positions p JOIN records r ON r.id = p.record_id
			WHERE p.company_name = 'Acme' COLLATE NOCASE AND p.is_current = 1 AND r.origin = 'store' LIMIT 500`,
		"gathering":           `SELECT company FROM email_gatherings WHERE address = 'a@acme.com' AND gathered_at >= 5`,
		"gathered candidates": `SELECT person FROM email_candidates WHERE address = 'a@acme.com' ORDER BY ord`,
		"old gatherings":      `SELECT address FROM email_gatherings WHERE gathered_at < 5`,
		"retention: tasks": `SELECT id FROM tasks WHERE status IN ('succeeded', 'failed', 'canceled') AND finished_at < 5
			ORDER BY finished_at LIMIT 500`,
		"retention: deliveries": `SELECT id FROM deliveries WHERE status IN ('succeeded', 'failed') AND last_attempt_at < 5
			ORDER BY last_attempt_at LIMIT 500`,
		"batches":            `SELECT id FROM batches WHERE org_id = 'o' ORDER BY created_at DESC, id DESC LIMIT 25 OFFSET 25`,
		"batch results":      `SELECT row_number, vals FROM batch_rows WHERE batch_id = 'b' AND row_number > 500 ORDER BY row_number LIMIT 500`,
		"batch counts":       `SELECT r.row_number, t.status FROM batch_rows r LEFT JOIN tasks t ON t.id = r.task_id WHERE r.batch_id = 'b'`,
		"pending batch":      `SELECT batch_id FROM batch_rows WHERE task_id IS NULL AND error IS NULL AND batch_id > 'a' ORDER BY batch_id LIMIT 1`,
		"pending rows":       `SELECT row_number, request FROM batch_rows WHERE batch_id = 'b' AND task_id IS NULL AND error IS NULL ORDER BY row_number LIMIT 200`,
		"batch by key":       `SELECT id FROM batches WHERE org_id = 'o' AND idempotency_key = 'k'`,
		"retention: batches": `SELECT id FROM batches WHERE created_at < 5 ORDER BY created_at LIMIT 1`,
		"retention: keys": `SELECT key FROM idempotency_keys WHERE (org_id, key) IN (SELECT org_id, idempotency_key FROM tasks
			WHERE status IN ('succeeded', 'failed', 'canceled') AND finished_at < 5 ORDER BY finished_at LIMIT 500)`,
	}
	// The batches' statements as the store runs them, but for the counts' GROUP BY,
	// which sorts the few statuses of one batch's rows.
	for _, name := range []string{"BatchResults", "BatchFailures", "skippedRows", "nextPendingBatch", "pendingRows",
		"nextPendingCompany", "pendingCompanies"} {
		q := store.BatchQueries[name]
		joined := strings.Join(explain(t, raw, q.Query, q.Args...), "; ")
		if !strings.Contains(joined, "USING") || strings.Contains(joined, "TEMP B-TREE") || strings.Contains(joined, "SCAN ") {
			t.Errorf("%s: plan %q does not use an index without sorting", name, joined)
		}
	}
	for _, name := range []string{"batchCounts", "batchCompanyCounts"} {
		q := store.BatchQueries[name]
		joined := strings.Join(explain(t, raw, q.Query, q.Args...), "; ")
		if !strings.Contains(joined, "SEARCH r USING PRIMARY KEY (batch_id=?)") {
			t.Errorf("%s: plan %q does not read the batch's rows by its key", name, joined)
		}
	}
	for name, q := range queries {
		plan := explain(t, raw, q)
		joined := strings.Join(plan, "; ")
		if !strings.Contains(joined, "USING") || strings.Contains(joined, "TEMP B-TREE") || strings.Contains(joined, "SCAN tasks") && !strings.Contains(joined, "INDEX") {
			t.Errorf("%s: plan %q does not use an index without sorting", name, joined)
		}
	}
}

// engine is the SQLite driver under db, for the hooks its tests reach through
// export_test.go.
func engine(db *store.DB) *sqlite.DB { return db.Driver.(*sqlite.DB) }
