package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/matryer/is"
)

// resultsAddUp is ResultsAddUp on the test's database.
func resultsAddUp(t *testing.T, env *Env) int {
	t.Helper()
	return ResultsAddUp(t, env.Raw())
}

// ResultsAddUp checks the invariants of task_results: each row counts exactly the
// tasks that point at it, none is left that no task points at, each is keyed by the
// sha256 of its bytes, and no task points at a row that is not there. It returns how
// many rows there are.
func ResultsAddUp(t *testing.T, raw Querier) int {
	t.Helper()
	for what, q := range map[string]string{
		"miscounted": `SELECT count(*) FROM task_results r WHERE refs != (SELECT count(*) FROM tasks WHERE result_id = r.id)`,
		"orphaned":   `SELECT count(*) FROM task_results WHERE refs = 0`,
		"dangling":   `SELECT count(*) FROM tasks WHERE result_id IS NOT NULL AND result_id NOT IN (SELECT id FROM task_results)`,
	} {
		var n int
		if err := raw.QueryRow(q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("task_results: %d rows %s", n, what)
		}
	}
	// The hash is checked here, not in SQL: the engines' sha256 functions differ.
	rows, err := raw.Query(`SELECT id, hash, data FROM task_results`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id int64
		var hash, data []byte
		if err := rows.Scan(&id, &hash, &data); err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(data); string(hash) != string(sum[:]) {
			t.Errorf("task_results: row %d misfiled: hash %x, sha256 of its data %x", id, hash, sum)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// SettleCompany claims the next task and settles it with a company fetched from a
// source, as a worker does.
func SettleCompany(t *testing.T, db *store.DB, name string) {
	t.Helper()
	ctx := context.Background()
	c, err := db.ClaimTask(ctx, time.Minute)
	if err != nil || c == nil {
		t.Fatal(c, err)
	}
	res := enrich.Result{Company: &enrich.Company{Name: name, EnrichmentStatus: enrich.StatusEnriched, Domain: enrich.Ptr(c.Input.Target)}}
	if ok, err := db.Settle(ctx, c, store.Outcome{Result: &res, Fetched: true}); err != nil || !ok {
		t.Fatal(ok, err)
	}
}

// HexSum is the hex sha256 of s, as request hashes are given.
func HexSum(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// testStoreHitAnswersTheRecordAsItIsNow: a store hit answers the company as the store
// holds it at the time, not as an earlier hit on the same input answered it, after the
// record has been enriched anew between them (on SQLite, answers are kept by input
// from one hit to the next).
func testStoreHitAnswersTheRecordAsItIsNow(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 100, nil)
	is.NoErr(err)
	hitName := func() string {
		t.Helper()
		hit, err := db.CreateTask(ctx, store.BySystem, NewTask(org, "acme.com"))
		is.NoErr(err)
		is.Equal(hit.Task.Status, store.StatusSucceeded)
		var c enrich.Company
		is.NoErr(json.Unmarshal(hit.Task.Data, &c))
		return c.Name
	}

	_, err = db.CreateTask(ctx, store.BySystem, NewTask(org, "acme.com"))
	is.NoErr(err)
	SettleCompany(t, db, "Acme")
	is.Equal(hitName(), "Acme")
	is.Equal(hitName(), "Acme")

	clk.Add(time.Minute)
	refresh := NewTask(org, "acme.com")
	refresh.Freshness = time.Second // the record is older than that: enriched anew
	queued, err := db.CreateTask(ctx, store.BySystem, refresh)
	is.NoErr(err)
	is.Equal(queued.Task.Status, store.StatusQueued)
	SettleCompany(t, db, "Acme Two")
	is.Equal(hitName(), "Acme Two")
	is.Equal(hitName(), "Acme Two")
}

// testTaskReadsKeepTheirBytes settles a task through a worker, answers the same
// company from the store, replays that request and refuses another inside the
// request: each task reads back as it was answered, through every read, and the one
// result the first three share is kept once.
func testTaskReadsKeepTheirBytes(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 100, nil)
	is.NoErr(err)

	miss, err := db.CreateTask(ctx, store.BySystem, NewTask(org, "acme.com"))
	is.NoErr(err)
	is.Equal(miss.Task.Status, store.StatusQueued)
	SettleCompany(t, db, "Acme")
	settled, err := db.GetTask(ctx, org, miss.Task.ID)
	is.NoErr(err)
	is.Equal(settled.Status, store.StatusSucceeded)
	// The bytes a task has always stored: the record as the store gives it, marshaled.
	stored, err := db.FindStored(ctx, enrich.Input{Lookup: enrich.LookupDomain, Target: "acme.com"})
	is.NoErr(err)
	want, err := json.Marshal(stored.Company)
	is.NoErr(err)
	is.Equal(string(settled.Data), string(want))

	clk.Add(time.Minute)
	nt := NewTask(org, "acme.com")
	nt.IdempotencyKey, nt.Endpoint, nt.BodyHash = "k1", "POST /v1/companies/enrich", HexSum(`{"domain":"acme.com"}`)
	hit, err := db.CreateTask(ctx, store.BySystem, nt)
	is.NoErr(err)
	is.Equal(hit.Task.Status, store.StatusSucceeded) // from the store, inside the request
	is.Equal(string(hit.Task.Data), string(want))
	replay, err := db.CreateTask(ctx, store.BySystem, nt)
	is.NoErr(err)
	is.True(replay.Replayed)
	is.Equal(replay.Task, hit.Task)

	refused := NewTask(org, "info@acme.com")
	refused.Input = enrich.Input{Lookup: enrich.LookupEmail, Target: "info@acme.com"}
	refused.Fail = &enrich.TaskError{Code: enrich.CodeNotFound, Message: "a role address"}
	failed, err := db.CreateTask(ctx, store.BySystem, refused)
	is.NoErr(err)
	is.Equal(failed.Task.Status, store.StatusFailed)
	is.Equal(failed.Task.Data, nil)

	answered := map[string]*store.Task{settled.ID: settled, hit.Task.ID: hit.Task, failed.Task.ID: failed.Task}
	for id, task := range answered {
		got, err := db.GetTask(ctx, org, id)
		is.NoErr(err)
		is.Equal(got, task)
	}
	listed, total, err := db.ListTasks(ctx, org, "", 0, 10)
	is.NoErr(err)
	is.Equal(total, int64(3))
	found, _, err := db.FindTasks(ctx, org, store.TaskFilter{})
	is.NoErr(err)
	is.Equal(found, listed)
	for _, task := range listed {
		is.Equal(task, answered[task.ID])
	}
	is.Equal(resultsAddUp(t, env), 1) // the settled task's and the hit's: the same bytes, kept once
	ledgerAddsUp(t, env, org)         // the refusal was charged and refunded
}

// testRetentionDeletesResultsNoTaskShares purges old tasks: a result that only they
// had goes with them, one a recent task shares stays, and goes with the last task.
func testRetentionDeletesResultsNoTaskShares(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 100, nil)
	is.NoErr(err)

	_, err = db.CreateTask(ctx, store.BySystem, NewTask(org, "shared.com"))
	is.NoErr(err)
	SettleCompany(t, db, "Shared")
	oldHit, err := db.CreateTask(ctx, store.BySystem, NewTask(org, "shared.com"))
	is.NoErr(err)
	is.Equal(oldHit.Task.Status, store.StatusSucceeded)
	_, err = db.CreateTask(ctx, store.BySystem, NewTask(org, "alone.com"))
	is.NoErr(err)
	SettleCompany(t, db, "Alone")
	is.Equal(resultsAddUp(t, env), 2)

	clk.Add(100 * 24 * time.Hour)
	nt := NewTask(org, "shared.com")
	nt.Freshness = 365 * 24 * time.Hour // still answered from the store
	recent, err := db.CreateTask(ctx, store.BySystem, nt)
	is.NoErr(err)
	is.Equal(recent.Task.Status, store.StatusSucceeded)
	is.Equal(recent.Task.Data, oldHit.Task.Data)

	purge := func(cutoff time.Time) (tasks int) {
		t.Helper()
		for {
			p, err := db.PurgeSettled(ctx, cutoff, 2)
			is.NoErr(err)
			tasks += p.Tasks
			if p.Tasks < 2 {
				return tasks
			}
		}
	}
	is.Equal(purge(clk.Now().Add(-90*24*time.Hour)), 3)
	is.Equal(resultsAddUp(t, env), 1) // alone.com's went; shared.com's is still read
	got, err := db.GetTask(ctx, org, recent.Task.ID)
	is.NoErr(err)
	is.Equal(got, recent.Task)

	clk.Add(100 * 24 * time.Hour)
	is.Equal(purge(clk.Now().Add(-90*24*time.Hour)), 1)
	is.Equal(resultsAddUp(t, env), 0)
}

// A vendor's record may hold text no index takes whole: a NUL (PostgreSQL keeps none
// in text) or a company name and page of thousands of bytes (a b-tree entry holds
// about 2,700). The task still settles, the record reads back whole, and it is found
// again by its page.
func testARecordWithTextNoIndexTakesWholeIsKept(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	org := NewOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 10, nil)
	is.NoErr(err)
	long := strings.Repeat("Überlang Holdings ", 250) // 4,750 bytes, some of them two to a letter
	page := "https://network.example/company/" + strings.Repeat("x", 3000)
	nt := newPersonTask(org, "jane")
	_, err = db.CreateTask(ctx, store.BySystem, nt)
	is.NoErr(err)
	c, err := db.ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	is.True(c != nil)
	person := &enrich.Person{NetworkURL: enrich.Ptr(nt.Input.Target), FullName: enrich.Ptr("Jane\x00 Doe"),
		EnrichmentStatus: enrich.StatusEnriched, Positions: []enrich.Position{{
			Title: enrich.Ptr("CEO\x00"), CompanyName: enrich.Ptr(long), CompanyNetworkURL: enrich.Ptr(page), IsCurrent: true}}}
	ok, err := db.Settle(ctx, c, store.Outcome{Result: &enrich.Result{Person: person}, Fetched: true})
	is.NoErr(err)
	is.True(ok)

	got, err := db.FindStored(ctx, nt.Input)
	is.NoErr(err)
	is.True(got != nil && got.Person != nil)
	is.Equal(*got.Person.FullName, "Jane\x00 Doe") // the record keeps its text as it came
	is.Equal(*got.Person.Positions[0].CompanyName, long)
	is.Equal(*got.Person.Positions[0].CompanyNetworkURL, page)
	task, err := db.GetTask(ctx, org, c.TaskID)
	is.NoErr(err)
	is.Equal(task.Status, store.StatusSucceeded)

	// A key past what an index takes is cut with a hash of the whole: still one key a value.
	is.True(len(store.Key("company", page)) <= 1000)
	is.True(store.Key("company", page) != store.Key("company", page+"y"))
}
