package cli_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"
	"enrichd/store/storetest"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
)

// migrated is what fillForMigration made that the test reads back after the move.
type migrated struct {
	orgs  []string          // names
	tasks map[string]string // organization id by task id
}

// fillForMigration fills a SQLite deployment through the store: organizations with
// keys, grants (one expiring), a dataset, tasks of every status (a store hit among the
// succeeded, an idempotent one), a Loop with deliveries, a first-start link, users
// with a link and a session.
func fillForMigration(t *testing.T, db *store.DB) migrated {
	t.Helper()
	is := is.New(t)
	ctx := t.Context()
	raw, err := os.ReadFile("../examples/people-and-companies.jsonl")
	is.NoErr(err)
	_, err = db.Import(ctx, strings.NewReader(string(raw)), enrich.Normalizer{NetworkHost: enrich.DefaultNetworkHost})
	is.NoErr(err)
	// The first start's link, printed while nobody could sign in yet.
	first, err := db.NewInstallLink(ctx)
	is.NoErr(err)
	is.True(first != "")

	m := migrated{tasks: map[string]string{}}
	for i, name := range []string{"acme", "globex", "initech"} {
		m.orgs = append(m.orgs, name)
		_, key, err := db.CreateKey(ctx, store.BySystem, name, "ci", true)
		is.NoErr(err)
		org := key.OrgID
		_, _, err = db.CreateKey(ctx, store.BySystem, name, "old", false)
		is.NoErr(err)
		_, err = db.GrantCredits(ctx, name, 100, nil)
		is.NoErr(err)
		soon := db.Now().Add(time.Hour)
		_, err = db.GrantCredits(ctx, name, 5, &soon)
		is.NoErr(err)
		loop, err := db.CreateLoop(ctx, store.NewLoop{OrgID: org, Name: "crm", ObjectType: enrich.ObjectCompany,
			WebhookURL: "https://example.com/hook/" + name, Enabled: true})
		is.NoErr(err)
		_, err = db.CreateTestDelivery(ctx, org, loop.ID)
		is.NoErr(err)
		watched := "watched-" + name + ".example"
		_, err = db.CreateWatch(ctx, store.BySystem, store.NewWatch{OrgID: org, ObjectType: enrich.ObjectCompany,
			Input: enrich.Input{Lookup: enrich.LookupDomain, Target: watched}, RawInput: json.RawMessage(`{"domain":"` + watched + `"}`),
			LoopID: loop.ID, EveryDays: 30, Fields: []string{"employee_count"}, Enabled: true, FirstRunAt: db.Now()})
		is.NoErr(err)
		_, _, err = db.CreateUser(ctx, store.BySystem, name, "admin@"+name+".example", "admin")
		is.NoErr(err)
		u, _, err := db.CreateUser(ctx, store.BySystem, name, "viewer@"+name+".example", "viewer")
		is.NoErr(err)
		_, err = db.CreateSession(ctx, store.BySystem, u.ID, time.Hour)
		is.NoErr(err)
		_, err = db.AddSuppression(ctx, store.BySystem, store.NewSuppression{OrgID: org, Subject: enrich.Subject{Kind: enrich.SubjectEmail, Value: "jane@" + name + ".example"},
			AddedBy: store.AddedBy{Kind: store.AddedByCLI}})
		is.NoErr(err)
		// An erasure of someone the organization holds nothing on: its row, its
		// suppression and its audit entry are copied as any others.
		_, err = db.Erase(ctx, store.BySystem, store.NewErasure{OrgID: org, Subject: enrich.Subject{Kind: enrich.SubjectEmail, Value: "gone@" + name + ".example"},
			By: store.AddedBy{Kind: store.AddedByCLI}})
		is.NoErr(err)

		task := func(domain string, loopID *string, idemKey string) *store.Enqueued {
			t.Helper()
			body, _ := json.Marshal(map[string]string{"domain": domain})
			nt := store.NewTask{OrgID: org, Input: enrich.Input{Lookup: enrich.LookupDomain, Target: domain}, RawInput: body,
				LoopID: loopID, TTL: 10 * time.Minute, MaxBacklog: 1000, Freshness: 30 * 24 * time.Hour}
			if idemKey != "" {
				nt.IdempotencyKey, nt.Endpoint, nt.BodyHash = idemKey, "POST /v1/companies/enrich", strings.Repeat("ab", 32)
			}
			e, err := db.CreateTask(ctx, store.BySystem, nt)
			is.NoErr(err)
			return e
		}
		claim := func() *store.Claim {
			t.Helper()
			c, err := db.ClaimTask(ctx, time.Minute)
			is.NoErr(err)
			is.True(c != nil)
			return c
		}
		domain := name + ".example"
		// Succeeded from a source, with a Loop: the record is stored, a delivery queued.
		task(domain, &loop.ID, "")
		c := claim()
		ok, err := db.Settle(ctx, c, store.Outcome{Fetched: true, Result: &enrich.Result{Company: &enrich.Company{
			Name: strings.ToUpper(name[:1]) + name[1:], EnrichmentStatus: "complete", Domain: &domain}}})
		is.NoErr(err)
		is.True(ok)
		m.tasks[c.TaskID] = c.OrgID
		// Its deliveries acknowledged, as a HubSpot destination acknowledges them, with
		// what it wrote into the CRM kept; and a Loop that writes into HubSpot.
		due, err := db.ClaimDeliveries(ctx, 10, 10, nil, time.Minute)
		is.NoErr(err)
		var acked []store.Attempted
		for _, d := range due {
			acked = append(acked, store.Attempted{Dispatch: d, Attempt: &store.Attempt{At: db.Now(), Ended: db.Now(), StatusCode: 200,
				Summary: "created company 9" + strconv.Itoa(i), Wrote: &store.CRMWrite{ObjectType: "companies", ObjectID: "9" + strconv.Itoa(i),
					Written: map[string]string{"name": "00ff"}}}})
		}
		is.NoErr(db.RecordAttempts(ctx, acked))
		_, err = db.CreateLoop(ctx, store.NewLoop{OrgID: org, Name: "hubspot", ObjectType: enrich.ObjectPerson, Enabled: true,
			HubSpot: &store.HubSpotToken{Sealed: "c2VhbGVkIHRva2Vu", KeyID: "0a1b2c3d", Last4: "…abcd"}, Options: &store.HubSpotOptions{Refresh: true}})
		is.NoErr(err)
		// The same domain again: a store hit, settled inside the request.
		hit := task(domain, nil, "")
		is.Equal(hit.Task.Status, store.StatusSucceeded)
		m.tasks[hit.Task.ID] = org
		// Failed, and refunded.
		task("failing-"+domain, nil, "")
		c = claim()
		ok, err = db.Settle(ctx, c, store.Outcome{Err: &enrich.TaskError{Code: "not_found", Message: "nobody knows it"}})
		is.NoErr(err)
		is.True(ok)
		m.tasks[c.TaskID] = c.OrgID
		// Canceled while queued, and refunded.
		canceled := task("canceled-"+domain, nil, "")
		_, err = db.CancelTask(ctx, org, canceled.Task.ID)
		is.NoErr(err)
		// Running under a lease, and queued behind it (an idempotent one).
		task("running-"+domain, nil, "")
		c = claim()
		m.tasks[c.TaskID] = c.OrgID
		m.tasks[task("queued-"+domain, nil, "key-"+strconv.Itoa(i)).Task.ID] = org
		m.tasks[canceled.Task.ID] = org
		// A batch: a row with its task (a store hit), a row refused, a row pending.
		rowReq := func(d string) store.NewBatchRow {
			return store.NewBatchRow{Values: []string{d, "x"}, Request: json.RawMessage(`{"domain":"` + d + `"}`)}
		}
		b, _, err := db.CreateBatch(ctx, store.BySystem, store.NewBatch{OrgID: org, ObjectType: enrich.ObjectCompany, Name: "crm.csv",
			Columns: []string{"domain", "owner"}, Rows: []store.NewBatchRow{rowReq(domain), rowReq("a-" + domain), rowReq("b-" + domain)},
			CreditsEstimate: 3, IdempotencyKey: "upload-" + name, BodyHash: strings.Repeat("cd", 32)})
		is.NoErr(err)
		body, _ := json.Marshal(map[string]string{"domain": domain})
		row, err := db.CreateTask(ctx, store.BySystem, store.NewTask{OrgID: org, Input: enrich.Input{Lookup: enrich.LookupDomain, Target: domain}, RawInput: body,
			TTL: 10 * time.Minute, MaxBacklog: 1000, Freshness: 30 * 24 * time.Hour, Batch: &store.BatchRowRef{BatchID: b.ID, Row: 1},
			IdempotencyKey: store.RowIdempotencyKey(b.ID, 1), Endpoint: "POST /v1/batches", BodyHash: strings.Repeat("ef", 32)})
		is.NoErr(err)
		is.Equal(row.Task.Status, store.StatusSucceeded)
		m.tasks[row.Task.ID] = org
		is.NoErr(db.FailBatchRow(ctx, b.ID, 2, &enrich.TaskError{Code: "insufficient_credits", Message: "not enough credits"}))
		// Its own fill list for companies, the default for people.
		fill := []string{"slogan", "employee_count"}
		is.NoErr(db.SetFillLists(ctx, org, store.FillUpdate{Company: &fill}))
		// Its own vendor key, sealed as set-key stores it.
		is.NoErr(db.SetSourceKey(ctx, org, "pdl", "c2VhbGVkIGtleQ==", "0a1b2c3d", "…wxyz", true))
		// What its sources cost, with either key, and its budget.
		is.NoErr(db.AddSourceSpend(ctx, org, "pdl", false, db.Now(), store.SourceUse{Calls: 3, Hits: 2, Misses: 1, Credits: 2}))
		is.NoErr(db.AddSourceSpend(ctx, org, "pdl", true, db.Now(), store.SourceUse{Calls: 1, Hits: 1, Credits: 1}))
		is.NoErr(db.SetSourceBudget(ctx, org, "pdl", 500))
		// An ask settled as unknown, and one still on the books, as a process killed while
		// the vendor answered leaves them.
		is.NoErr(db.AddSourceSpend(ctx, org, "apollo", false, db.Now(), store.SourceUse{Calls: 1, Unknown: 1, Credits: 1}))
		pending := store.SourceAsk{OrgID: org, Source: "apollo", Owner: "a process before the move", Calls: 1, Credits: 1}
		booked, err := db.BookSourceAsk(ctx, &pending, 0)
		is.NoErr(err)
		is.True(booked)
		// A company no vendor knew, asked with its own key and with the installation's.
		nobody := enrich.Input{Lookup: enrich.LookupDomain, Target: "nobody-" + domain}
		is.NoErr(db.RememberMiss(ctx, nobody, "pdl", org))
		is.NoErr(db.RememberMiss(ctx, nobody, "apollo", ""))
	}
	is.NoErr(db.SetSourceBudget(ctx, "", "enrichlayer", 20000)) // the installation's
	return m
}

// tableCounts counts the rows of every enrichd table through query.
func tableCounts(t *testing.T, tables []string, count func(table string) int64) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, name := range tables {
		out[name] = count(name)
	}
	return out
}

// TestMigrateToPostgres moves a deployment in use (the store stays open on it) into
// PostgreSQL through the real command: every table arrives whole, each organization's
// ledger and balance match, and the PostgreSQL store serves the same tasks and
// balances and numbers new rows past the copied ones. A second migrate into the same
// database is refused and changes nothing.
func TestMigrateToPostgres(t *testing.T) {
	is := is.New(t)
	ctx := t.Context()
	dsn := storetest.PostgresURL(t)
	path := filepath.Join(t.TempDir(), "enrichd.db")
	src, err := store.Open(ctx, path, schema, store.WithSubjectKey(testSubjectKey))
	is.NoErr(err)
	defer src.Close()
	filled := fillForMigration(t, src)

	lite, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	is.NoErr(err)
	defer lite.Close()
	var tables []string
	rows, err := lite.QueryContext(ctx, `SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite%' AND name <> 'schema_migrations'`)
	is.NoErr(err)
	for rows.Next() {
		var n string
		is.NoErr(rows.Scan(&n))
		tables = append(tables, n)
	}
	is.NoErr(rows.Err())
	sqliteCounts := tableCounts(t, tables, func(table string) int64 {
		var n int64
		is.NoErr(lite.QueryRowContext(ctx, `SELECT count(*) FROM `+table).Scan(&n))
		return n
	})
	var statuses int
	is.NoErr(lite.QueryRowContext(ctx, `SELECT count(DISTINCT status) FROM tasks`).Scan(&statuses))
	is.Equal(statuses, 5) // tasks of every status
	for table, n := range sqliteCounts {
		// Only the email lookups' gatherings are left empty by the fill.
		if n == 0 && !strings.HasPrefix(table, "email_") {
			t.Errorf("the fill left table %s empty: the test would not see it copied", table)
		}
	}

	out, errOut, err := runCommand(t, "migrate", "--from", path, "--to", dsn)
	if err != nil {
		t.Fatalf("migrate: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	is.True(strings.Contains(out, "verified: "))
	for table, n := range sqliteCounts {
		line := regexp.MustCompile(`(?m)^\s*` + table + `\s+(\d+)\s+(\d+)\s*$`).FindStringSubmatch(out)
		if line == nil || line[1] != line[2] || line[1] != strconv.FormatInt(n, 10) {
			t.Errorf("the report's row of %s is %q, want %d on both sides:\n%s", table, line, n, out)
		}
	}

	pg, err := pgx.Connect(ctx, dsn)
	is.NoErr(err)
	defer pg.Close(context.WithoutCancel(ctx))
	count := func(table string) int64 {
		var n int64
		is.NoErr(pg.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n))
		return n
	}
	is.Equal(tableCounts(t, tables, count), sqliteCounts) // every table, whole

	// Into the same database again: refused, and nothing changes.
	before := tableCounts(t, tables, count)
	out, _, err = runCommand(t, "migrate", "--from", path, "--to", dsn)
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), "not empty"))
	is.True(strings.Contains(err.Error(), "changed nothing"))
	is.True(!strings.Contains(out, "verified"))
	is.Equal(tableCounts(t, tables, count), before)

	// Every sequence hands out numbers past the rows copied.
	for _, c := range [][3]string{{"credit_grants", "id", "pg_get_serial_sequence('credit_grants', 'id')"},
		{"credit_ledger", "id", "pg_get_serial_sequence('credit_ledger', 'id')"},
		{"records", "id", "pg_get_serial_sequence('records', 'id')"},
		{"task_results", "id", "pg_get_serial_sequence('task_results', 'id')"},
		{"queue_turns", "seq", "'queue_turns_seq'"}} {
		var next, largest int64
		is.NoErr(pg.QueryRow(ctx, `SELECT nextval(`+c[2]+`), (SELECT max(`+c[1]+`) FROM `+c[0]+`)`).Scan(&next, &largest))
		if next <= largest {
			t.Errorf("%s.%s: the next number is %d, not past the %d copied", c[0], c[1], next, largest)
		}
	}

	// The PostgreSQL store reads what SQLite's did, and numbers new rows after the copied.
	dst := openPostgresStore(t, dsn)
	for _, name := range filled.orgs {
		want, err := src.CreditBalance(ctx, name)
		is.NoErr(err)
		got, err := dst.CreditBalance(ctx, name)
		is.NoErr(err)
		is.Equal(got, want)
		is.True(want.Refund > 0 && want.Charged > want.Refund)
		ledger, err := src.CreditLedger(ctx, name)
		is.NoErr(err)
		pgLedger, err := dst.CreditLedger(ctx, name)
		is.NoErr(err)
		is.Equal(pgLedger, ledger)
	}
	for id, org := range filled.tasks {
		want, err := src.GetTask(ctx, org, id)
		is.NoErr(err)
		got, err := dst.GetTask(ctx, org, id)
		is.NoErr(err)
		wantJSON, _ := json.Marshal(want)
		gotJSON, _ := json.Marshal(got)
		is.Equal(string(gotJSON), string(wantJSON)) // the task reads the same
		is.Equal(string(got.Data), string(want.Data))
	}
	// The suppressions hold on PostgreSQL, given the same key file: their hashes are
	// copied as they are.
	acme, err := dst.FindOrg(ctx, "acme")
	is.NoErr(err)
	_, suppressed, err := dst.Suppressed(ctx, acme.ID, enrich.Subject{Kind: enrich.SubjectEmail, Value: "Jane@acme.example"})
	is.NoErr(err)
	is.True(suppressed)
	grantID, err := dst.GrantCredits(ctx, "acme", 7, nil)
	is.NoErr(err) // a new grant's id does not collide with a copied one
	var maxCopied int64
	is.NoErr(lite.QueryRowContext(ctx, `SELECT max(id) FROM credit_grants`).Scan(&maxCopied))
	is.True(grantID > maxCopied)
}

// TestMigrateRefusesWhatItCannotCopy: a --to that is not PostgreSQL, a --from that
// does not exist, and a SQLite file at an older schema are refused before anything is
// connected to or written, the old file left as it was.
func TestMigrateRefusesWhatItCannotCopy(t *testing.T) {
	is := is.New(t)
	ctx := t.Context()
	dir := t.TempDir()

	_, _, err := runCommand(t, "migrate", "--from", filepath.Join(dir, "x.db"), "--to", "/var/lib/enrichd.db")
	is.True(err != nil && strings.Contains(err.Error(), "--to must be a PostgreSQL URL"))

	missing := filepath.Join(dir, "missing.db")
	_, _, err = runCommand(t, "migrate", "--from", missing, "--to", "postgres://nobody:secret@127.0.0.1:1/none")
	is.True(err != nil && strings.Contains(err.Error(), "no database at "+missing))
	_, statErr := os.Stat(missing)
	is.True(os.IsNotExist(statErr)) // not created

	// A file at the schema before the last migration.
	last := strings.LastIndex(schema, "\n-- migration ")
	old := filepath.Join(dir, "old.db")
	db, err := store.Open(ctx, old, schema[:last+1])
	is.NoErr(err)
	_, err = db.CreateOrg(ctx, "acme")
	is.NoErr(err)
	is.NoErr(db.Close())
	before, err := os.ReadFile(old)
	is.NoErr(err)
	_, _, err = runCommand(t, "migrate", "--from", old, "--to", "postgres://nobody:secret@127.0.0.1:1/none")
	if err == nil || !strings.Contains(err.Error(), "Start this release's enrichd serve on it once") {
		t.Fatalf("migrate of an older file: %v", err)
	}
	is.True(strings.Contains(err.Error(), "Start this release's enrichd serve on it once"))
	is.True(!strings.Contains(err.Error(), "secret"))
	after, err := os.ReadFile(old)
	is.NoErr(err)
	is.Equal(after, before) // untouched
}

// openPostgresStore opens dsn through the store, closing it when the test ends.
// testSubjectKey is the subject key the migration's two sides are opened with: the
// same key file goes with the data.
var testSubjectKey = []byte("migrate tests' subject key, 32 b")

func openPostgresStore(t *testing.T, dsn string) *store.DB {
	t.Helper()
	db, err := store.Open(t.Context(), dsn, schema, store.WithSubjectKey(testSubjectKey))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
