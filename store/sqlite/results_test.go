package sqlite_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"
	"enrichd/store/storetest"

	"github.com/matryer/is"
)

// resultsAddUp is storetest.ResultsAddUp on the database file at path.
func resultsAddUp(t *testing.T, path string) int {
	t.Helper()
	raw, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	return storetest.ResultsAddUp(t, raw)
}

// TestNoIndexIsDescending keeps DESC out of the schema's indexes: new rows land at the
// left edge of one, where split pages stay half empty, and SQLite walks an ascending
// index backwards for a descending order all the same.
func TestNoIndexIsDescending(t *testing.T) {
	_, path, _ := openDB(t)
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rows, err := raw.Query(`SELECT m.name, x.name FROM sqlite_schema m, pragma_index_xinfo(m.name) x
		WHERE m.type = 'index' AND x.key AND x.desc`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var index, column string
		if err := rows.Scan(&index, &column); err != nil {
			t.Fatal(err)
		}
		t.Errorf("index %s orders %s DESC", index, column)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestMigration8KeepsWhatTasksRead fills a database at migration 7 with tasks as that
// schema kept them (results inline, some alike; idempotency bindings as hex text, with
// and without their endpoint) and opens it with the whole schema: every task reads
// the same, the results are kept once, the keys still replay and still refuse what
// they refused, and retention still finds them.
func TestMigration8KeepsWhatTasksRead(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	before, _, ok := strings.Cut(storetest.Schema(t), "\n-- migration 8:")
	is.True(ok)
	path := filepath.Join(t.TempDir(), "enrichd.db")
	clk := storetest.NewClock(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	old, err := store.Open(ctx, path, before)
	is.NoErr(err)
	old.Now = clk.Now
	org, err := old.CreateOrg(ctx, "acme")
	is.NoErr(err)
	is.NoErr(old.Close())

	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	is.NoErr(err)
	defer raw.Close()
	// A Loop and its deliveries as that schema kept them (the store of today writes
	// columns it did not have).
	loop := struct{ ID string }{"0193a1b2-0000-7000-8000-0000000000a1"}
	_, err = raw.Exec(`INSERT INTO loops (id, org_id, name, slug, object_type, operation, enabled, webhook_url, secret, created_at, updated_at)
		VALUES (?, ?, 'crm', 'crm', 'company', 'enrich', 1, 'https://example.com/hook', 'whsec_x', ?, ?)`,
		loop.ID, org.ID, clk.Now().UnixMilli(), clk.Now().UnixMilli())
	is.NoErr(err)
	var deliveries []string
	for i := range 3 {
		id := fmt.Sprintf("0193a1b2-0000-7000-8000-0000000000b%d", i)
		_, err = raw.Exec(`INSERT INTO deliveries (id, loop_id, org_id, event, payload, status, next_attempt_at, created_at)
			VALUES (?, ?, ?, 'test', '{"event":"test","task":null,"data":null,"error":null}', 'pending', ?, ?)`,
			id, loop.ID, org.ID, clk.Now().UnixMilli(), clk.Now().UnixMilli())
		is.NoErr(err)
		deliveries = append([]string{id}, deliveries...) // newest first
		clk.Add(time.Millisecond)
	}
	acme := `{"name":"Acme","enrichment_status":"enriched","domain":"acme.com","about":"Caf\u00e9 \u0026 co"}`
	beta := `{"name":"Beta","enrichment_status":"enriched","domain":"beta.com"}`
	at := clk.Now().UnixMilli()
	type row struct {
		id, status, target string
		key, binding       string // the idempotency key and its body_hash, as migration 7 kept them
		started, finished  bool
		result, taskErr    string
		loop               bool
	}
	rows := []row{
		{id: "0193a1b2-0000-7000-8000-000000000001", status: "succeeded", target: "acme.com", started: true, finished: true, result: acme},
		{id: "0193a1b2-0000-7000-8000-000000000002", status: "succeeded", target: "acme.com", finished: true, result: acme,
			key: "k-new", binding: "POST /v1/companies/enrich " + hexSum("body")},
		{id: "0193a1b2-0000-7000-8000-000000000003", status: "succeeded", target: "beta.com", finished: true, result: beta,
			key: "k-legacy", binding: hexSum("legacy body")},
		{id: "0193a1b2-0000-7000-8000-000000000004", status: "failed", target: "gone.com", started: true, finished: true,
			taskErr: `{"code":"not_found","message":"no such company"}`},
		{id: "0193a1b2-0000-7000-8000-000000000005", status: "queued", target: "later.com", key: "k-odd", binding: "h-later.com"},
		{id: "0193a1b2-0000-7000-8000-000000000006", status: "succeeded", target: "acme.com", finished: true, result: acme, loop: true},
	}
	want := map[string]*store.Task{}
	for i, r := range rows {
		created := at + int64(i)
		task := &store.Task{ID: r.id, ObjectType: "company", Operation: "enrich", Status: r.status,
			Input: json.RawMessage(`{"domain":"` + r.target + `"}`), Target: r.target, CreditsCharged: 1,
			CreatedAt: time.UnixMilli(created).UTC(), QueuedAt: enrich.Ptr(time.UnixMilli(created).UTC()),
			ExpiresAt: time.UnixMilli(created + 600_000).UTC(), OrgID: org.ID, Lookup: enrich.LookupDomain}
		var started, finished, key, loopID, result, taskErr any
		if r.started {
			task.StartedAt = enrich.Ptr(time.UnixMilli(created + 1).UTC())
			started = created + 1
		}
		if r.finished {
			task.FinishedAt = enrich.Ptr(time.UnixMilli(created + 2).UTC())
			finished = created + 2
		}
		if r.key != "" {
			task.IdempotencyKey, key = &r.key, r.key
		}
		if r.loop {
			task.LoopID, loopID = &loop.ID, loop.ID
		}
		if r.result != "" {
			task.Data, result = json.RawMessage(r.result), r.result
		}
		if r.taskErr != "" {
			task.Error, taskErr = &enrich.TaskError{Code: "not_found", Message: "no such company"}, r.taskErr
		}
		want[r.id] = task
		_, err := raw.Exec(`INSERT INTO tasks (id, org_id, object_type, operation, status, lookup, input, target, credits_charged,
			loop_id, idempotency_key, created_at, queued_at, started_at, finished_at, expires_at, attempts, result, error)
			VALUES (?, ?, 'company', 'enrich', ?, 'domain', ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)`,
			r.id, org.ID, r.status, string(task.Input), r.target, loopID, key, created, created, started, finished,
			created+600_000, result, taskErr)
		is.NoErr(err)
		if r.key != "" {
			_, err = raw.Exec(`INSERT INTO idempotency_keys (org_id, key, body_hash, task_id, created_at) VALUES (?, ?, ?, ?, ?)`,
				org.ID, r.key, r.binding, r.id, created)
			is.NoErr(err)
		}
	}

	db := storetest.Open(t, path, clk)
	v, err := db.SchemaVersion(ctx)
	is.NoErr(err)
	is.True(v >= 8)
	for id, task := range want {
		got, err := db.GetTask(ctx, org.ID, id)
		is.NoErr(err)
		is.Equal(got, task)
	}
	listed, total, err := db.ListTasks(ctx, org.ID, "", 0, 10)
	is.NoErr(err)
	is.Equal(total, int64(len(rows)))
	for i, task := range listed {
		is.Equal(task, want[rows[len(rows)-1-i].id]) // newest first
	}
	page, n, err := db.ListDeliveries(ctx, org.ID, loop.ID, 0, 10)
	is.NoErr(err)
	is.Equal(n, int64(3))
	for i, d := range page {
		is.Equal(d.ID, deliveries[i]) // newest first, from the rebuilt index
	}

	is.Equal(resultsAddUp(t, path), 2) // acme's three tasks share one
	var refs int
	is.NoErr(raw.QueryRow(`SELECT refs FROM task_results WHERE data = ?`, acme).Scan(&refs))
	is.Equal(refs, 3)
	var columns string
	is.NoErr(raw.QueryRow(`SELECT group_concat(name, ',') FROM pragma_table_info('tasks')`).Scan(&columns))
	is.True(!strings.Contains(columns, "operation") && !strings.Contains(columns, ",result,"))
	var check string
	is.NoErr(raw.QueryRow(`PRAGMA integrity_check`).Scan(&check))
	is.Equal(check, "ok")
	var orphans int
	is.NoErr(raw.QueryRow(`SELECT count(*) FROM pragma_foreign_key_check`).Scan(&orphans))
	is.Equal(orphans, 0)

	// The bindings are bytes now, and decide as they did.
	var endpoint sql.NullString
	var hash []byte
	is.NoErr(raw.QueryRow(`SELECT endpoint, body_hash FROM idempotency_keys WHERE key = 'k-new'`).Scan(&endpoint, &hash))
	is.Equal(endpoint.String, "POST /v1/companies/enrich")
	is.Equal(hex.EncodeToString(hash), hexSum("body"))
	is.NoErr(raw.QueryRow(`SELECT endpoint, body_hash FROM idempotency_keys WHERE key = 'k-legacy'`).Scan(&endpoint, &hash))
	is.True(!endpoint.Valid)
	is.Equal(len(hash), sha256.Size)
	replay := func(key, endpoint, body string) (*store.Enqueued, error) {
		nt := newTask(org.ID, "acme.com")
		nt.IdempotencyKey, nt.Endpoint, nt.BodyHash = key, endpoint, body
		return db.CreateTask(ctx, store.BySystem, nt)
	}
	for _, c := range []struct{ key, endpoint, body, task, refusal string }{
		{key: "k-new", endpoint: "POST /v1/companies/enrich", body: hexSum("body"), task: rows[1].id},
		{key: "k-new", endpoint: "POST /v1/companies/enrich", body: hexSum("other"), refusal: "on POST /v1/companies/enrich with a different request body"},
		{key: "k-new", endpoint: "POST /v1/people/enrich", body: hexSum("other"), refusal: "first used on POST /v1/companies/enrich, not on POST /v1/people/enrich"},
		{key: "k-legacy", endpoint: "POST /v1/companies/enrich", body: hexSum("legacy body"), task: rows[2].id},
		{key: "k-legacy", endpoint: "POST /v1/companies/enrich", body: hexSum("other"), refusal: "first used with another request"},
		{key: "k-odd", endpoint: "POST /v1/companies/enrich", body: "h-later.com", task: rows[4].id}, // not a sha256: kept as it was
	} {
		res, err := replay(c.key, c.endpoint, c.body)
		if c.refusal != "" {
			is.Equal(enrich.KindOf(err), enrich.KindUnprocessable)
			is.True(strings.Contains(err.Error(), c.refusal))
			continue
		}
		is.NoErr(err)
		is.True(res.Replayed)
		is.Equal(res.Task, want[c.task])
	}

	// The tasks table was made anew: its triggers count and keep as before.
	clk.Add(time.Second) // after the tasks above
	_, err = db.GrantCredits(ctx, "acme", 5, nil)
	is.NoErr(err)
	fresh, err := db.CreateTask(ctx, store.BySystem, newTask(org.ID, "new.com"))
	is.NoErr(err)
	queued, err := db.CountTasks(ctx, org.ID, store.StatusQueued)
	is.NoErr(err)
	is.Equal(queued, int64(2))
	settleCompany(t, db, "Later") // the oldest queued: later.com, keyed k-odd
	queued, err = db.CountTasks(ctx, org.ID, store.StatusQueued)
	is.NoErr(err)
	is.Equal(queued, int64(1))
	is.Equal(resultsAddUp(t, path), 3)

	// Retention finds the keys through their tasks, and the results go with the last
	// task that had them.
	clk.Add(100 * 24 * time.Hour)
	p, err := db.PurgeSettled(ctx, clk.Now(), 100)
	is.NoErr(err)
	is.Equal(p.Tasks, 6) // all but the queued one
	is.Equal(resultsAddUp(t, path), 0)
	var keys int
	is.NoErr(raw.QueryRow(`SELECT count(*) FROM idempotency_keys`).Scan(&keys))
	is.Equal(keys, 0)
	listed, total, err = db.ListTasks(ctx, org.ID, "", 0, 10)
	is.NoErr(err)
	is.Equal(total, int64(1))
	is.Equal(listed, []*store.Task{fresh.Task})
}
