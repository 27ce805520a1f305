package storetest

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"enrichd/enrich"
	"enrichd/store"
)

// writtenValueHash is the hash of a value a HubSpot Loop wrote about the person, as the
// workload records it: long enough that no id or hash an export holds has it inside
// by chance (a 4-character one could, and once did).
const writtenValueHash = "5f1e0c7d9a2b4e6f8a1c3e5d7b9f0a2c4e6d8f1b3a5c7e9d0f2b4a6c8e1d3f5a"

// schemaTables reads every table of the database and its columns, as the engine has
// them: what the registry of personal data is held to.
func schemaTables(t *testing.T, raw *Raw) map[string][]string {
	t.Helper()
	q := raw.Pick(`SELECT m.name, p.name FROM sqlite_schema m JOIN pragma_table_info(m.name) p
			WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite\_%' ESCAPE '\'`,
		`SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()`)
	rows, err := raw.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var table, column string
		if err := rows.Scan(&table, &column); err != nil {
			t.Fatal(err)
		}
		out[table] = append(out[table], column)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, cols := range out {
		sort.Strings(cols)
	}
	return out
}

// leadingIndexed reads the columns that lead an index of table: a lookup of one of
// them is a range of that index.
func leadingIndexed(t *testing.T, raw *Raw, table string) map[string]bool {
	t.Helper()
	q := raw.Pick(`SELECT i.name, (SELECT c.name FROM pragma_index_info(i.name) c WHERE c.seqno = 0) FROM pragma_index_list(?) i`,
		`SELECT c.relname, a.attname FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
			JOIN pg_class r ON r.oid = x.indrelid JOIN pg_namespace n ON n.oid = r.relnamespace
			JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum = x.indkey[0]
			WHERE r.relname = ? AND n.nspname = current_schema()`)
	rows, err := raw.Query(q, table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var index string
		var column *string
		if err := rows.Scan(&index, &column); err != nil {
			t.Fatal(err)
		}
		if column != nil {
			out[*column] = true
		}
	}
	return out
}

// testTheRegistryHoldsEveryTableOfTheSchema holds the registry of personal data to the
// schema: every table is in the registry or in NonPersonalTables, never both; a
// registered table's columns are every column it has, each classed (key, personal
// data, subject hash, other); each hash column leads an index. A table or a column
// added without being placed fails here.
func testTheRegistryHoldsEveryTableOfTheSchema(t *testing.T, env *Env) {
	raw := env.Raw()
	tables := schemaTables(t, raw)
	if len(tables) < 20 {
		t.Fatalf("read %d tables of the schema: the query is wrong", len(tables))
	}
	registered := map[string]store.PersonalTable{}
	for _, p := range store.PersonalTables() {
		if _, dup := registered[p.Name]; dup {
			t.Errorf("the registry lists %s twice", p.Name)
		}
		registered[p.Name] = p
		if _, also := store.NonPersonalTables[p.Name]; also {
			t.Errorf("%s is both in the registry of personal data and in NonPersonalTables", p.Name)
		}
		if _, ok := tables[p.Name]; !ok {
			t.Errorf("the registry lists %s, which the schema does not have", p.Name)
		}
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range tables {
			if !yield(n) {
				return
			}
		}
	}) {
		columns := tables[name]
		p, ok := registered[name]
		if !ok {
			if _, ok := store.NonPersonalTables[name]; !ok {
				t.Errorf("table %s (columns %s) is neither in the registry of personal data (store/privacy.go) nor in store.NonPersonalTables: "+
					"if it holds anything of a person looked up (a name, an address, a profile URL, a headline, a record), register it "+
					"with subject hash columns, an index on each and how it is found, exported and erased; else say in NonPersonalTables why not",
					name, strings.Join(columns, ", "))
			}
			continue
		}
		if got, want := columns, p.Columns(); !slices.Equal(got, want) {
			t.Errorf("table %s has the columns %s, but the registry classes %s: class each new column in store/privacy.go "+
				"(Holds if it holds a person's data, which an export shows and an erasure removes; Other if not)",
				name, strings.Join(got, ", "), strings.Join(want, ", "))
		}
		indexed := leadingIndexed(t, raw, name)
		for _, h := range p.Hashes {
			if !indexed[h] {
				t.Errorf("%s.%s, a subject hash column, leads no index: finding a person's rows would read the whole table", name, h)
			}
		}
		if len(p.Hashes) == 0 || len(p.Holds) == 0 {
			t.Errorf("the registry's %s has no hash column or no column of personal data", name)
		}
		if p.Erasure.Action == "" || p.Erasure.Why == "" {
			t.Errorf("the registry's %s does not say what an erasure does to its rows, and why", name)
		}
		if p.Erasure.Action == store.EraseRedact && len(p.Erasure.Redacts) == 0 {
			t.Errorf("the registry's %s redacts no column", name)
		}
		if p.Erase == nil {
			t.Errorf("the registry's %s has no Erase: an erasure would leave its rows (testAnErasureRemovesThePersonFromEveryTable "+
				"writes a row about a person in every table and checks that none is left holding her)", name)
		}
	}
}

// personWorkload writes, for the organization, a row about Jane Doe in every table of
// the registry: an ambiguous email lookup's gathering, a profile lookup settled with
// her record through a Loop (record, keys, positions, result, delivery), a store hit,
// a batch row, a source's miss, a watch and a suppression. It returns the hashes of her
// address and profile.
func personWorkload(t *testing.T, env *Env, org string) []enrich.SubjectHash {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	const address = "Jane.Doe@acme.com"
	profile := "https://network.example/in/jane-doe"
	jane := &enrich.Person{NetworkURL: enrich.Ptr(profile), FullName: enrich.Ptr("Jane Doe"), Headline: enrich.Ptr("Head of Rockets"),
		Positions: []enrich.Position{{Title: enrich.Ptr("Head of Rockets"), CompanyName: enrich.Ptr("Acme"), IsCurrent: true,
			Company: &enrich.PositionCompany{Name: enrich.Ptr("Acme"), Domain: enrich.Ptr("acme.com")}}}}
	claimAndSettle := func(out store.Outcome) {
		t.Helper()
		c, err := db.ClaimTask(ctx, time.Minute)
		if err != nil || c == nil {
			t.Fatal(c, err)
		}
		if ok, err := db.Settle(ctx, c, out); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}

	email := store.NewTask{OrgID: org, Input: enrich.Input{Lookup: enrich.LookupEmail, Target: address}, RawInput: json.RawMessage(`{"email":"` + address + `"}`),
		TTL: 10 * time.Minute, MaxBacklog: 10000, Freshness: 30 * 24 * time.Hour}
	_, err := db.CreateTask(ctx, store.BySystem, email)
	is.NoErr(err)
	two := 2
	claimAndSettle(store.Outcome{Err: &enrich.TaskError{Code: enrich.CodeAmbiguous, Message: "two fit", Candidates: &two},
		KeepGathered: 30 * 24 * time.Hour,
		Gathered: &enrich.Gathering{Address: enrich.AddressKey(address), GatheredAt: env.Clock.Now(), Company: &enrich.Company{Name: "Acme"},
			Candidates: []enrich.Candidate{
				{Person: jane, Method: "resolved", Pattern: "first.last", RetrievedAt: env.Clock.Now()},
				{Person: &enrich.Person{NetworkURL: enrich.Ptr("https://network.example/in/janet-doe"), FullName: enrich.Ptr("Janet Doe")},
					Method: "resolved", Pattern: "first.last", RetrievedAt: env.Clock.Now()},
			}}})

	loop := newLoop(t, db, org, "crm-"+org[:8], enrich.ObjectPerson)
	byProfile := newPersonTask(org, "jane-doe")
	byProfile.LoopID = &loop.ID
	_, err = db.CreateTask(ctx, store.BySystem, byProfile)
	is.NoErr(err)
	claimAndSettle(store.Outcome{Result: &enrich.Result{Person: jane}, Fetched: true})
	// The Loop's delivery, acknowledged by a CRM that was written her contact.
	sent, err := db.ClaimDeliveries(ctx, 1, 1, nil, time.Minute)
	is.NoErr(err)
	is.Equal(len(sent), 1)
	at := env.Clock.Now()
	is.NoErr(db.RecordAttempts(ctx, []store.Attempted{{Dispatch: sent[0], Attempt: &store.Attempt{At: at, Ended: at, StatusCode: 200,
		Summary: "created contact 501", Wrote: &store.CRMWrite{ObjectType: "contacts", ObjectID: "501", Written: map[string]string{"jobtitle": writtenValueHash}}}}}))
	hit, err := db.CreateTask(ctx, store.BySystem, newPersonTask(org, "jane-doe"))
	is.NoErr(err)
	is.Equal(hit.Task.Status, store.StatusSucceeded) // a store hit

	req, _ := json.Marshal(map[string]string{"networkUrl": profile})
	b, _, err := db.CreateBatch(ctx, store.BySystem, store.NewBatch{OrgID: org, ObjectType: enrich.ObjectPerson, Name: "people.csv",
		Columns: []string{"networkUrl", "name"}, CreditsEstimate: 1,
		Rows: []store.NewBatchRow{{Values: []string{profile, "Jane Doe"}, Request: req,
			Subject: enrich.Subject{Kind: enrich.SubjectProfile, Value: profile}, SubjectOK: true}}})
	is.NoErr(err)
	is.Equal(b.Rows, 1)

	is.NoErr(db.RememberMiss(ctx, enrich.Input{Lookup: enrich.LookupPersonURL, Target: profile}, "pdl", ""))
	_, err = db.CreateWatch(ctx, store.BySystem, store.NewWatch{OrgID: org, ObjectType: enrich.ObjectPerson,
		Input: enrich.Input{Lookup: enrich.LookupPersonURL, Target: profile}, RawInput: json.RawMessage(`{"networkUrl":"` + profile + `"}`),
		LoopID: loop.ID, EveryDays: 30, Enabled: true})
	is.NoErr(err)
	_, err = db.AddSuppression(ctx, store.BySystem, store.NewSuppression{OrgID: org, Subject: enrich.Subject{Kind: enrich.SubjectEmail, Value: address},
		Reason: enrich.Ptr("asked us"), AddedBy: store.AddedBy{Kind: store.AddedByCLI}})
	is.NoErr(err)

	h := db.Subjects()
	return []enrich.SubjectHash{
		h.Hash(enrich.Subject{Kind: enrich.SubjectEmail, Value: address}),
		h.Hash(enrich.Subject{Kind: enrich.SubjectProfile, Value: profile}),
	}
}

func tablesOf(found []store.SubjectRows) []string {
	var names []string
	for _, f := range found {
		names = append(names, f.Table)
	}
	sort.Strings(names)
	return names
}

// testEveryRowAboutAPersonIsFoundBySubject writes a row about one person in every
// table of the registry and finds every one by her hashes: the organization's own rows
// and the shared ones, never another organization's; and no row is left unhashed.
func testEveryRowAboutAPersonIsFoundBySubject(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	acme, other := NewOrg(t, db, "acme"), NewOrg(t, db, "other")
	for _, org := range []string{"acme", "other"} {
		_, err := db.GrantCredits(ctx, org, 100, nil)
		is.NoErr(err)
	}
	hashes := personWorkload(t, env, acme)

	found, err := db.FindSubject(ctx, acme, false, hashes)
	is.NoErr(err)
	var all []string
	for _, p := range store.PersonalTables() {
		if p.Name != "erasures" { // no erasure yet: testAnErasureRemovesThePersonFromEveryTable
			all = append(all, p.Name)
		}
	}
	sort.Strings(all)
	is.Equal(tablesOf(found), all) // a row in every table of the registry

	byTable := map[string][]map[string]any{}
	for _, f := range found {
		byTable[f.Table] = f.Rows
	}
	is.Equal(len(byTable["tasks"]), 3)            // the email lookup, the profile lookup, the store hit
	is.Equal(len(byTable["email_candidates"]), 2) // both gathered for her address: they go with it
	for _, c := range byTable["email_candidates"] {
		is.True((c["person"] == nil) == (fmt.Sprint(c["ord"]) != "0")) // but only Jane's profile is shown
	}
	is.Equal(len(byTable["record_keys"]), 1) // her profile's key (the address was ambiguous)
	is.Equal(len(byTable["positions"]), 1)
	export, err := json.Marshal(found)
	is.NoErr(err)
	is.True(strings.Contains(string(export), "Head of Rockets")) // the export shows the data
	is.True(!strings.Contains(string(export), "janet-doe"))      // and nobody else's

	// Another organization finds the shared rows (the store serves it Jane too), none
	// of acme's own.
	theirs, err := db.FindSubject(ctx, other, false, hashes)
	is.NoErr(err)
	is.Equal(tablesOf(theirs), []string{"email_candidates", "email_gatherings", "positions", "record_keys", "records", "source_misses"})
	everyone, err := db.FindSubject(ctx, "", true, hashes)
	is.NoErr(err)
	is.Equal(tablesOf(everyone), all)

	// Someone else finds nothing.
	nobody, err := db.FindSubject(ctx, acme, false, []enrich.SubjectHash{db.Subjects().Hash(enrich.Subject{Kind: enrich.SubjectEmail, Value: "john@acme.com"})})
	is.NoErr(err)
	is.Equal(len(nobody), 0)

	unhashed, err := db.Unhashed(ctx)
	is.NoErr(err)
	for table, n := range unhashed {
		if n != 0 {
			t.Errorf("%s has %d rows without subject hashes", table, n)
		}
	}
}

// testAnotherKeyIsRefused: a handle given another subject key than the one the
// database was first opened with is refused, with a message that says so: its hashes
// would find no row and hold no suppression.
func testAnotherKeyIsRefused(t *testing.T, env *Env) {
	ctx := context.Background()
	_, err := store.Open(ctx, env.DSN, Schema(t), store.WithSubjectKey([]byte("another key, thirty-two bytes!!!")))
	if err == nil || !strings.Contains(err.Error(), "another secret key file") {
		t.Fatalf("opened with another key: %v", err)
	}
	again := env.Open() // the right key still opens it
	if again.Subjects() == nil {
		t.Fatal("opened without its subjects")
	}
}

// downgradeSubjects takes the database back to the schema before subjects were
// hashed: the hash columns, their indexes and the suppressions dropped, the erasures and the audit log
// that came after them dropped, the migrations forgotten. It returns, by table and row
// key, the hashes the rows had.
func downgradeSubjects(t *testing.T, env *Env) map[string]string {
	t.Helper()
	raw := env.Raw()
	before := hashSnapshot(t, env)
	// The migrations that came after undone first: fewer index entries a task, HubSpot
	// destinations, the audit log, erasures.
	for _, stmt := range []string{
		`DROP INDEX tasks_org_queued`,
		`DROP INDEX tasks_org_created`,
		`CREATE INDEX tasks_org_created ON tasks(org_id, created_at, id)`,
		`CREATE INDEX tasks_org_status_created ON tasks(org_id, status, created_at, id)`,
		`CREATE INDEX tasks_org_type_created ON tasks(org_id, object_type, created_at, id)`,
		`DELETE FROM schema_migrations WHERE version = (SELECT max(version) FROM schema_migrations)`,
		`DROP TABLE hubspot_writes`,
		`ALTER TABLE deliveries DROP COLUMN summary`,
		`ALTER TABLE loops DROP COLUMN destination_kind`,
		`ALTER TABLE loops DROP COLUMN hubspot_token`,
		`ALTER TABLE loops DROP COLUMN hubspot_token_key_id`,
		`ALTER TABLE loops DROP COLUMN hubspot_token_last4`,
		`ALTER TABLE loops DROP COLUMN hubspot_options`,
		`DELETE FROM schema_migrations WHERE version = (SELECT max(version) FROM schema_migrations)`,
		`DROP TABLE audit_log`,
		`DROP TABLE audit_heads`,
		raw.Pick(`SELECT 1`, `DROP FUNCTION audit_log_head()`),
		`DELETE FROM schema_migrations WHERE version = (SELECT max(version) FROM schema_migrations)`,
		`DROP TABLE erasures`,
		`DROP INDEX deliveries_erasure`,
		`ALTER TABLE deliveries DROP COLUMN erasure_id`,
		`ALTER TABLE tasks DROP COLUMN erased_at`,
		`DELETE FROM schema_migrations WHERE version = (SELECT max(version) FROM schema_migrations)`,
	} {
		if _, err := raw.Exec(stmt); err != nil {
			t.Fatal(stmt, err)
		}
	}
	for _, p := range store.PersonalTables() {
		if p.Name == "suppressions" || p.Name == "erasures" || p.Name == "audit_log" || p.Name == "hubspot_writes" {
			continue
		}
		indexes := []string{p.Name + "_subject", p.Name + "_answer", p.Name + "_unhashed"}
		if p.Name == "source_misses" {
			indexes[0] = "source_misses_subject_hash"
		}
		for _, ix := range indexes {
			if _, err := raw.Exec(`DROP INDEX IF EXISTS ` + ix); err != nil {
				t.Fatal(ix, err)
			}
		}
		for _, col := range p.Hashes {
			if _, err := raw.Exec(`ALTER TABLE ` + p.Name + ` DROP COLUMN ` + col); err != nil {
				t.Fatal(p.Name, col, err)
			}
		}
	}
	for _, stmt := range []string{
		`DROP TABLE suppressions`,
		`DROP TABLE subject_key`,
		raw.Pick(`SELECT 1`, `DROP FUNCTION suppressions_changed()`),
		`DELETE FROM schema_migrations WHERE version = (SELECT max(version) FROM schema_migrations)`,
	} {
		if _, err := raw.Exec(stmt); err != nil {
			t.Fatal(stmt, err)
		}
	}
	return before
}

// testRowsFromBeforeAreHashedAsTheyWouldBeNow writes a row about a person in every
// table, takes the database back to the schema before subjects were hashed, and
// opens it again with the key: the migration adds the columns, the backfill hashes
// every row exactly as it was hashed when written, and nothing is left unhashed.
func testRowsFromBeforeAreHashedAsTheyWouldBeNow(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	acme := NewOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 100, nil)
	is.NoErr(err)
	hashes := personWorkload(t, env, acme)
	// A test event and a company's page name nobody: hashed empty, not left NULL.
	l := newLoop(t, db, acme, "companies", enrich.ObjectCompany)
	_, err = db.CreateTestDelivery(ctx, acme, l.ID)
	is.NoErr(err)
	page := NewTask(acme, "https://network.example/company/acme")
	page.Input.Lookup = enrich.LookupCompanyURL
	_, err = db.CreateTask(ctx, store.BySystem, page)
	is.NoErr(err)

	before := downgradeSubjects(t, env)
	is.True(len(before) > 15)

	// Opened without the key, the columns are back but nothing is hashed: rows about
	// people are not found, and writing them is refused.
	var opts []store.Option
	if !env.Postgres() {
		opts = append(opts, store.WithReaders(2))
	}
	keyless, err := store.Open(ctx, env.DSN, Schema(t), opts...)
	is.NoErr(err)
	keyless.Now = env.Clock.Now
	unhashed, err := keyless.Unhashed(ctx)
	is.NoErr(err)
	is.True(unhashed["tasks"] > 0)
	_, err = keyless.CreateTask(ctx, store.BySystem, NewTask(acme, "acme.com"))
	is.True(errors.Is(err, store.ErrNoSubjectKey))
	is.NoErr(keyless.Close())

	reopened := env.Open() // with the key: hashed as it opens
	unhashed, err = reopened.Unhashed(ctx)
	is.NoErr(err)
	for table, n := range unhashed {
		if n != 0 {
			t.Errorf("%s has %d rows left without subject hashes", table, n)
		}
	}
	after := hashSnapshot(t, env)
	for key, want := range before {
		if got := after[key]; got != want {
			t.Errorf("%s: hashed %s by the backfill, %s when written", key, got, want)
		}
	}
	found, err := reopened.FindSubject(ctx, acme, false, hashes)
	is.NoErr(err)
	is.True(len(found) >= 10) // every table but the suppressions, which did not exist
}

// hashSnapshot reads the hashes of every row of the registry's tables (but the
// suppressions), by table and row key.
func hashSnapshot(t *testing.T, env *Env) map[string]string {
	t.Helper()
	raw := env.Raw()
	out := map[string]string{}
	for _, p := range store.PersonalTables() {
		// Suppressions, erasures, the audit log and HubSpot's writes came with hashing or
		// after it: their rows are written with their hashes, never backfilled.
		if p.Name == "suppressions" || p.Name == "erasures" || p.Name == "audit_log" || p.Name == "hubspot_writes" {
			continue
		}
		rows, err := raw.Query(`SELECT ` + strings.Join(p.Key, ", ") + `, ` + strings.Join(p.Hashes, ", ") + ` FROM ` + p.Name)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			vals := make([]any, len(p.Key)+len(p.Hashes))
			ptrs := make([]any, len(vals))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			var hs []string
			for _, v := range vals[len(p.Key):] {
				b, _ := v.([]byte)
				if v == nil {
					hs = append(hs, "NULL")
				} else {
					hs = append(hs, hex.EncodeToString(b))
				}
			}
			out[p.Name+fmt.Sprint(vals[:len(p.Key)]...)] = strings.Join(hs, "/")
		}
		rows.Close()
	}
	return out
}
