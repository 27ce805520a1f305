package storetest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/matryer/is"
)

// settleLookup makes a task of org for in and settles it with out: what a worker does.
func settleLookup(t *testing.T, db *store.DB, org string, in enrich.Input, out store.Outcome) {
	t.Helper()
	ctx := context.Background()
	raw, _ := json.Marshal(map[string]string{"target": in.Target})
	nt := store.NewTask{OrgID: org, Input: in, RawInput: raw, TTL: 10 * time.Minute, MaxBacklog: 10000}
	if _, err := db.CreateTask(ctx, store.BySystem, nt); err != nil {
		t.Fatal(err)
	}
	c, err := db.ClaimTask(ctx, time.Minute)
	if err != nil || c == nil || c.Input.Lookup != in.Lookup || c.Input.Target != in.Target {
		t.Fatalf("claimed %+v, %v; want the task for %+v", c, err, in)
	}
	if ok, err := db.Settle(ctx, c, out); err != nil || !ok {
		t.Fatalf("settle: %v, %v", ok, err)
	}
}

// person is a person with a current position at Acme, for the stored records.
func person(slug, name string) *enrich.Person {
	return &enrich.Person{NetworkURL: enrich.Ptr("https://www.linkedin.com/in/" + slug), FullName: enrich.Ptr(name),
		Positions: []enrich.Position{{CompanyName: enrich.Ptr("Acme"), CompanyNetworkURL: enrich.Ptr("https://www.linkedin.com/company/acme"),
			Title: enrich.Ptr("Engineer"), IsCurrent: true}}}
}

// recordRows counts the rows a stored record has in each table, found by one of its
// keys: the record, its keys, its positions.
func recordRows(t *testing.T, raw *Raw, recordID int64) [3]int {
	t.Helper()
	var n [3]int
	for i, q := range []string{`SELECT count(*) FROM records WHERE id = ?`, `SELECT count(*) FROM record_keys WHERE record_id = ?`,
		`SELECT count(*) FROM positions WHERE record_id = ?`} {
		if err := raw.QueryRow(q, recordID).Scan(&n[i]); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

func recordID(t *testing.T, raw *Raw, key string) int64 {
	t.Helper()
	var id int64
	if err := raw.QueryRow(`SELECT record_id FROM record_keys WHERE key = ?`, key).Scan(&id); err != nil {
		t.Fatalf("record of %s: %v", key, err)
	}
	return id
}

// testStoredRecordsNotRefreshedAreDeleted stores companies and people, some refreshed
// since, moves the clock past the retention window and purges in small batches: the
// records no source refreshed within it go, with every key (domains, an alias, a
// profile, an address) and position, whoever they were kept for; those refreshed
// since, and the dataset's, stay.
func testStoredRecordsNotRefreshedAreDeleted(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk, raw := env.DB, env.Clock, env.Raw()
	org := NewOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 100, nil)
	is.NoErr(err)
	const year = 365 * 24 * time.Hour
	fetched := func(res enrich.Result, private bool) store.Outcome {
		return store.Outcome{Result: &res, Fetched: true, Trace: enrich.Trace{Private: private}}
	}
	company := func(name, domain string) enrich.Result {
		return enrich.Result{Company: &enrich.Company{Name: name, Domain: enrich.Ptr(domain)}}
	}

	// Kept at t0: a company found by an alias of its domain, a person found by address
	// (with that address as a key, and positions), a person fetched with the
	// organization's own key, a company to be refreshed later, and an imported person.
	in := enrich.Input{Lookup: enrich.LookupDomain, Target: "acme.io"}
	settleLookup(t, db, org, in, fetched(company("Acme", "acme.com"), false))
	in = enrich.Input{Lookup: enrich.LookupEmail, Target: "jane.doe@acme.com"}
	settleLookup(t, db, org, in, fetched(enrich.Result{Person: person("jane-doe", "Jane Doe")}, false))
	in = enrich.Input{Lookup: enrich.LookupPersonURL, Target: "https://www.linkedin.com/in/john-roe"}
	settleLookup(t, db, org, in, fetched(enrich.Result{Person: person("john-roe", "John Roe")}, true))
	in = enrich.Input{Lookup: enrich.LookupDomain, Target: "initech.com"}
	settleLookup(t, db, org, in, fetched(company("Initech", "initech.com"), false))
	_, err = db.Import(ctx, strings.NewReader(`{"type":"person","network_url":"https://www.linkedin.com/in/ann-lee","full_name":"Ann Lee","positions":[{"company_name":"Acme","is_current":true}]}`), enrich.Normalizer{})
	is.NoErr(err)

	old := map[string]int64{}
	for _, key := range []string{"domain:acme.com", "person:https://www.linkedin.com/in/jane-doe", "person:https://www.linkedin.com/in/john-roe"} {
		old[key] = recordID(t, raw, key)
	}
	is.Equal(recordRows(t, raw, old["domain:acme.com"]), [3]int{1, 2, 0})                             // acme.com, acme.io
	is.Equal(recordRows(t, raw, old["person:https://www.linkedin.com/in/jane-doe"]), [3]int{1, 2, 1}) // the profile, the address
	is.Equal(recordRows(t, raw, old["person:https://www.linkedin.com/in/john-roe"]), [3]int{1, 1, 1})
	dataset := recordID(t, raw, "person:https://www.linkedin.com/in/ann-lee")
	held, err := db.Holdings(ctx)
	is.NoErr(err)
	is.Equal([4]int64{held.StoredCompanies, held.StoredPeople, held.DatasetCompanies, held.DatasetPeople}, [4]int64{2, 2, 0, 1})

	// Two years on, Initech is refreshed and Globex stored; a year and a day later the
	// records of t0 have gone three years without a refresh.
	clk.Add(2 * year)
	in = enrich.Input{Lookup: enrich.LookupDomain, Target: "initech.com"}
	settleLookup(t, db, org, in, fetched(company("Initech Corp", "initech.com"), false))
	in = enrich.Input{Lookup: enrich.LookupDomain, Target: "globex.com"}
	settleLookup(t, db, org, in, fetched(company("Globex", "globex.com"), false))
	clk.Add(year + 24*time.Hour)

	cutoff := clk.Now().Add(-3 * year)
	total := 0
	for rounds := 0; ; rounds++ {
		n, err := db.PurgeRecords(ctx, cutoff, 2)
		is.NoErr(err)
		is.True(n <= 2) // each batch stays small
		total += n
		if n < 2 {
			break
		}
		is.True(rounds < 5)
	}
	is.Equal(total, 3)
	for key, id := range old {
		is.Equal(recordRows(t, raw, id), [3]int{}) // the record, its keys and positions: none left
		var keys int
		is.NoErr(raw.QueryRow(`SELECT count(*) FROM record_keys WHERE key = ?`, key).Scan(&keys))
		is.Equal(keys, 0)
	}
	gone, err := db.FindStored(ctx, enrich.Input{Lookup: enrich.LookupDomain, Target: "acme.io"})
	is.NoErr(err)
	is.Equal(gone, nil)
	byAddress, err := db.Held().PersonByEmail(ctx, "jane.doe@acme.com")
	is.NoErr(err)
	is.Equal(byAddress, nil)
	private, _, err := db.FindStoredFor(ctx, org, enrich.Input{Lookup: enrich.LookupPersonURL, Target: "https://www.linkedin.com/in/john-roe"})
	is.NoErr(err)
	is.Equal(private, nil)

	for domain, name := range map[string]string{"initech.com": "Initech Corp", "globex.com": "Globex"} {
		kept, err := db.FindStored(ctx, enrich.Input{Lookup: enrich.LookupDomain, Target: domain})
		is.NoErr(err)
		is.Equal(kept.Company.Name, name) // refreshed within the window: kept
	}
	is.Equal(recordRows(t, raw, dataset), [3]int{1, 1, 1}) // the team's import is not the store's to delete
	held, err = db.Holdings(ctx)
	is.NoErr(err)
	is.Equal([4]int64{held.StoredCompanies, held.StoredPeople, held.DatasetCompanies, held.DatasetPeople}, [4]int64{2, 0, 0, 1})

	n, err := db.PurgeRecords(ctx, cutoff, 2)
	is.NoErr(err)
	is.Equal(n, 0) // nothing more to delete

	// A record deleted is fetched and stored anew, keys and all.
	in = enrich.Input{Lookup: enrich.LookupDomain, Target: "acme.io"}
	settleLookup(t, db, org, in, fetched(company("Acme", "acme.com"), false))
	again, err := db.FindStored(ctx, enrich.Input{Lookup: enrich.LookupDomain, Target: "acme.io"})
	is.NoErr(err)
	is.Equal(again.Company.Name, "Acme")
}

// testGatheringsPastTheirWindowAreDeleted keeps what two ambiguous email lookups
// gathered, a week apart, and the person a hint picked among the first: the purge past
// the window deletes the first gathering with its candidates, other people's profiles,
// in small batches, and leaves the second and the record of the person picked.
func testGatheringsPastTheirWindowAreDeleted(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 100, nil)
	is.NoErr(err)
	acme := &enrich.Company{Name: "Acme", Domain: enrich.Ptr("acme.com")}
	gathering := func(address string, slugs ...string) *enrich.Gathering {
		g := &enrich.Gathering{Address: address, Company: acme, GatheredAt: clk.Now()}
		for _, slug := range slugs {
			g.Candidates = append(g.Candidates, enrich.Candidate{Person: person(slug, slug), Method: enrich.MatchResolved,
				Pattern: "flast", Source: "pdl", RetrievedAt: clk.Now()})
		}
		return g
	}
	ambiguous := &enrich.TaskError{Code: enrich.CodeAmbiguous, Message: "fits several"}

	jsmith := enrich.Input{Lookup: enrich.LookupEmail, Target: "jsmith@acme.com"}
	first := gathering("jsmith@acme.com", "jane-smith", "jack-smith", "john-smith")
	settleLookup(t, db, org, jsmith, store.Outcome{Err: ambiguous, Gathered: first, KeepGathered: 30 * 24 * time.Hour})
	// A retry with a hint picks Jack: stored under his profile, the gathering kept for
	// other hints.
	jack := first.Candidates[1]
	picked := *jack.Person
	picked.EmailMatch = &enrich.EmailMatch{Method: enrich.MatchResolved, Email: "jsmith@acme.com", Pattern: enrich.Ptr("flast")}
	jsmith.Hints = enrich.Hints{FullName: "Jack Smith"}
	settleLookup(t, db, org, jsmith, store.Outcome{Result: &enrich.Result{Person: &picked}, Fetched: true, FetchedAt: jack.RetrievedAt,
		TieBroken: true, Gathered: first, KeepGathered: 30 * 24 * time.Hour})

	clk.Add(6 * 24 * time.Hour)
	jdoe := enrich.Input{Lookup: enrich.LookupEmail, Target: "jdoe@acme.com"}
	settleLookup(t, db, org, jdoe, store.Outcome{Err: ambiguous, Gathered: gathering("jdoe@acme.com", "jane-doe", "john-doe"),
		KeepGathered: 30 * 24 * time.Hour})
	held, err := db.Holdings(ctx)
	is.NoErr(err)
	is.Equal([2]int64{held.EmailGatherings, held.EmailCandidates}, [2]int64{2, 5})

	clk.Add(2 * 24 * time.Hour)
	cutoff := clk.Now().Add(-7 * 24 * time.Hour)
	gatherings, candidates, err := db.PurgeGatherings(ctx, cutoff, 1)
	is.NoErr(err)
	is.Equal([2]int{gatherings, candidates}, [2]int{1, 3})
	gatherings, candidates, err = db.PurgeGatherings(ctx, cutoff, 1)
	is.NoErr(err)
	is.Equal([2]int{gatherings, candidates}, [2]int{0, 0}) // the second is within the window

	g, err := db.Gathering(ctx, "jsmith@acme.com", time.Time{})
	is.NoErr(err)
	is.Equal(g, nil)
	g, err = db.Gathering(ctx, "jdoe@acme.com", time.Time{})
	is.NoErr(err)
	is.Equal(len(g.Candidates), 2)
	held, err = db.Holdings(ctx)
	is.NoErr(err)
	is.Equal([2]int64{held.EmailGatherings, held.EmailCandidates}, [2]int64{1, 2})

	// The person picked is a stored record like any other: retention of candidates
	// leaves it.
	kept, err := db.FindStored(ctx, enrich.Input{Lookup: enrich.LookupPersonURL, Target: "https://www.linkedin.com/in/jack-smith"})
	is.NoErr(err)
	is.Equal(*kept.Person.FullName, "jack-smith")
	is.Equal(held.StoredPeople, int64(1))
}

// testHoldingsCountEveryKind counts what an installation holds of each kind.
func testHoldingsCountEveryKind(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	org := NewOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 100, nil)
	is.NoErr(err)
	held, err := db.Holdings(ctx)
	is.NoErr(err)
	is.Equal(held, store.Holdings{OwnKeys: map[string]int64{}}) // nothing yet

	loop, err := db.CreateLoop(ctx, store.NewLoop{OrgID: org, Name: "crm", ObjectType: "company", Enabled: true, WebhookURL: "https://example.com/hook"})
	is.NoErr(err)
	nt := NewTask(org, "acme.com")
	nt.LoopID = &loop.ID
	_, err = db.CreateTask(ctx, store.BySystem, nt)
	is.NoErr(err)
	c, err := db.ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	_, err = db.Settle(ctx, c, store.Outcome{Result: &enrich.Result{Company: &enrich.Company{Name: "Acme", Domain: enrich.Ptr("acme.com")}}, Fetched: true})
	is.NoErr(err)
	_, err = db.CreateTask(ctx, store.BySystem, NewTask(org, "globex.com")) // queued
	is.NoErr(err)
	_, err = db.CreateTestDelivery(ctx, org, loop.ID)
	is.NoErr(err)
	is.NoErr(db.RememberMiss(ctx, enrich.Input{Lookup: enrich.LookupDomain, Target: "nobody.example"}, "pdl", ""))
	is.NoErr(db.SetSourceKey(ctx, org, "pdl", "sealed", "key-id", "…1234", false))
	_, err = db.CreateLoop(ctx, store.NewLoop{OrgID: org, Name: "hubspot", ObjectType: "company", Enabled: true,
		HubSpot: &store.HubSpotToken{Sealed: "c2VhbGVkIHRva2Vu", KeyID: "0a1b2c3d", Last4: "…abcd"}, Options: &store.HubSpotOptions{}})
	is.NoErr(err)

	held, err = db.Holdings(ctx)
	is.NoErr(err)
	is.Equal(held, store.Holdings{StoredCompanies: 1, Tasks: 2, Deliveries: 2, PendingDeliveries: 2, Loops: 2, HubSpotLoops: 1, SourceMisses: 1,
		AuditEntries: 2, OwnKeys: map[string]int64{"pdl": 1}}) // an entry for each task
}
