package storetest

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"enrichd/enrich"
	"enrichd/store"
)

// byKey is an API key acting, as the server's authentication names one.
func byKey(keyID, name, requestID string) store.By {
	return store.By{Actor: store.Actor{Kind: store.ActorKey, ID: &keyID, Name: &name}, RequestID: requestID}
}

// auditOf lists every entry of the organization, newest first.
func auditOf(t *testing.T, db *store.DB, orgID string) []*store.AuditEntry {
	t.Helper()
	var all []*store.AuditEntry
	for page := 0; ; page++ {
		list, more, err := db.ListAudit(context.Background(), orgID, store.AuditFilter{}, page, store.MaxAuditPage)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, list...)
		if !more {
			return all
		}
	}
}

// chainOf verifies the organization's chain alone.
func chainOf(t *testing.T, db *store.DB, orgID string) store.AuditChain {
	t.Helper()
	chains, err := db.VerifyAudit(context.Background(), orgID, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(chains) != 1 {
		t.Fatalf("%d chains for one organization", len(chains))
	}
	return chains[0]
}

// testTheAuditLogRecordsEachActInItsOrganizationsChain: enrichments, keys made and
// revoked, users added and signed in, suppressions added and lifted are each an entry
// of their organization's chain, by whom the context says acts, in order, each
// chained to the one before; a subject is kept as sent, a suppression's by its hash
// alone; another organization's acts are in its own chain.
func testTheAuditLogRecordsEachActInItsOrganizationsChain(t *testing.T, env *Env) {
	is := is.New(t)
	db := env.DB
	acme, other := NewOrg(t, db, "acme"), NewOrg(t, db, "other")
	for _, org := range []string{"acme", "other"} {
		_, err := db.GrantCredits(context.Background(), org, 100, nil)
		is.NoErr(err)
	}
	ctx, by := context.Background(), byKey("key-1", "Zapier", "req-1")

	queued, err := db.CreateTask(ctx, by, NewTask(acme, "acme.com"))
	is.NoErr(err)
	env.Clock.Add(time.Second)
	person := newPersonTask(acme, "jane-doe")
	person.RawInput = json.RawMessage(`{"networkUrl":"linkedin.com/in/Jane-Doe"}`)
	hit, err := db.CreateTask(context.Background(), byKey("key-1", "Zapier", "req-2"), person)
	is.NoErr(err)
	_, err = db.CreateTask(context.Background(), byKey("key-9", "Other's", "req-3"), NewTask(other, "other.com"))
	is.NoErr(err)

	cli := store.ByOperator
	env.Clock.Add(time.Second)
	plain, key, err := db.CreateKey(context.Background(), cli, "acme", "crm", false)
	is.NoErr(err)
	is.NoErr(db.RevokeKey(context.Background(), cli, "acme", key.ID))
	is.NoErr(db.RevokeKey(context.Background(), cli, "acme", key.ID)) // revoked already: nothing to record
	u, _, err := db.CreateUser(context.Background(), cli, "acme", "ops@acme.com", store.RoleViewer)
	is.NoErr(err)
	_, err = db.CreateSession(context.Background(), store.BySystem, u.ID, time.Hour)
	is.NoErr(err)
	sup, err := db.AddSuppression(ctx, by, store.NewSuppression{OrgID: acme, Subject: enrich.Subject{Kind: enrich.SubjectEmail, Value: "jane@acme.com"},
		AddedBy: store.AddedBy{Kind: store.AddedByKey, ID: enrich.Ptr("key-1"), Name: enrich.Ptr("Zapier")}})
	is.NoErr(err)
	_, err = db.DeleteSuppression(ctx, by, acme, sup.ID)
	is.NoErr(err)

	entries := auditOf(t, db, acme)
	var actions []string
	for i, e := range entries {
		actions = append([]string{e.Action}, actions...)
		is.Equal(e.Seq, int64(len(entries)-i)) // numbered from 1, newest first
		if i+1 < len(entries) {
			is.Equal(e.PrevHash, entries[i+1].Hash) // chained to the one before
		}
	}
	is.Equal(actions, []string{store.AuditTaskCreated, store.AuditTaskCreated, store.AuditKeyCreated, store.AuditKeyRevoked,
		store.AuditUserAdded, store.AuditUserSignedIn, store.AuditSuppressionAdded, store.AuditSuppressionLifted})
	first := entries[len(entries)-1]
	is.Equal(first.PrevHash, strings.Repeat("00", 32))
	is.Equal(*first.Subject, "acme.com")
	is.Equal(*first.TaskID, queued.Task.ID)
	is.Equal(first.Credits, int64(1))
	is.Equal(*first.RequestID, "req-1")
	is.Equal(first.Actor.Kind, store.ActorKey)
	is.Equal(*first.Actor.ID, "key-1")
	is.Equal(*first.Actor.Name, "Zapier")
	is.True(first.At.Equal(queued.Task.CreatedAt))
	h := db.Subjects()
	domain := h.Hash(enrich.Subject{Kind: enrich.SubjectDomain, Value: "acme.com"})
	is.Equal(*first.SubjectHash, hex.EncodeToString(domain[:]))

	second := entries[len(entries)-2]
	is.Equal(*second.Subject, "linkedin.com/in/Jane-Doe") // as sent, not as normalized
	is.Equal(*second.TaskID, hit.Task.ID)
	profile := h.Hash(enrich.Subject{Kind: enrich.SubjectProfile, Value: "https://network.example/in/jane-doe"})
	is.Equal(*second.SubjectHash, hex.EncodeToString(profile[:]))

	keyMade, revoked := entries[5], entries[4]
	is.Equal(*keyMade.ObjectID, key.ID)
	is.Equal(keyMade.Actor.Kind, store.ActorCLI)
	is.Equal(*revoked.ObjectID, key.ID)
	is.True(strings.Contains(string(keyMade.Detail), `"name":"crm"`))
	is.True(strings.Contains(string(keyMade.Detail), `"prefix":"`+key.Prefix+`"`))
	is.True(!strings.Contains(string(keyMade.Detail), plain[len(key.Prefix):])) // never the key

	added, signedIn := entries[3], entries[2]
	is.Equal(*added.ObjectID, u.ID)
	is.Equal(signedIn.Actor.Kind, store.ActorUser) // a sign-in is the user's own act
	is.Equal(*signedIn.Actor.ID, u.ID)
	is.Equal(*signedIn.Actor.Name, "ops@acme.com")

	supAdded, lifted := entries[1], entries[0]
	is.Equal(supAdded.Subject, nil) // never in clear: the list keeps hashes alone
	jane := h.Hash(enrich.Subject{Kind: enrich.SubjectEmail, Value: "jane@acme.com"})
	is.Equal(*supAdded.SubjectHash, hex.EncodeToString(jane[:]))
	is.Equal(*supAdded.ObjectID, sup.ID)
	is.Equal(*supAdded.Actor.Name, "Zapier")
	is.Equal(*lifted.SubjectHash, hex.EncodeToString(jane[:]))
	is.Equal(*lifted.RequestID, "req-1")

	others := auditOf(t, db, other)
	is.Equal(len(others), 1)
	is.Equal(others[0].Seq, int64(1))
	is.Equal(*others[0].Subject, "other.com")

	chains, err := db.VerifyAudit(context.Background(), "", true)
	is.NoErr(err)
	is.Equal(len(chains), 2)
	for _, c := range chains {
		is.Equal(c.Bad, nil)
		is.Equal(c.Head.Seq, c.Entries)
	}
}

// testTheAuditLogIsListedByEachFilterAndPaged: the list is filtered by action, by
// subject (its hash), by a time range, and paged newest first; the export gives the
// same entries oldest first, chunk after chunk, up to its bound.
func testTheAuditLogIsListedByEachFilterAndPaged(t *testing.T, env *Env) {
	is := is.New(t)
	db := env.DB
	acme := NewOrg(t, db, "acme")
	_, err := db.GrantCredits(context.Background(), "acme", 10_000, nil)
	is.NoErr(err)
	ctx, by := context.Background(), byKey("key-1", "Zapier", "")
	start := env.Clock.Now()
	for i := range 30 {
		_, err := db.CreateTask(ctx, by, NewTask(acme, fmt.Sprintf("c%02d.com", i)))
		is.NoErr(err)
		env.Clock.Add(time.Minute)
	}
	_, err = db.CreateTask(ctx, by, NewTask(acme, "c05.com")) // the same subject again
	is.NoErr(err)
	_, _, err = db.CreateKey(ctx, by, "acme", "crm", false)
	is.NoErr(err)

	page0, more, err := db.ListAudit(context.Background(), acme, store.AuditFilter{}, 0, 10)
	is.NoErr(err)
	is.True(more)
	is.Equal(len(page0), 10)
	is.Equal(page0[0].Action, store.AuditKeyCreated)
	is.Equal(page0[0].Seq, int64(32))
	last, more, err := db.ListAudit(context.Background(), acme, store.AuditFilter{}, 3, 10)
	is.NoErr(err)
	is.True(!more)
	is.Equal(len(last), 2)
	is.Equal(last[1].Seq, int64(1))

	keys, _, err := db.ListAudit(context.Background(), acme, store.AuditFilter{Action: store.AuditKeyCreated}, 0, 10)
	is.NoErr(err)
	is.Equal(len(keys), 1)

	h := db.Subjects().Hash(enrich.Subject{Kind: enrich.SubjectDomain, Value: "c05.com"})
	about, _, err := db.ListAudit(context.Background(), acme, store.AuditFilter{SubjectHash: h[:]}, 0, 10)
	is.NoErr(err)
	is.Equal(len(about), 2)
	is.Equal(about[0].Seq, int64(31))
	is.Equal(about[1].Seq, int64(6))
	about, _, err = db.ListAudit(context.Background(), acme, store.AuditFilter{SubjectHash: h[:], Action: store.AuditKeyCreated}, 0, 10)
	is.NoErr(err)
	is.Equal(len(about), 0)

	// From the 10th minute, before the 20th: ten entries.
	window := store.AuditFilter{Since: start.Add(10 * time.Minute), Until: start.Add(20 * time.Minute)}
	in, _, err := db.ListAudit(context.Background(), acme, window, 0, 100)
	is.NoErr(err)
	is.Equal(len(in), 10)
	is.Equal(in[0].Seq, int64(20))
	is.Equal(in[9].Seq, int64(11))
	window.Action = store.AuditTaskCreated
	in, _, err = db.ListAudit(context.Background(), acme, window, 0, 100)
	is.NoErr(err)
	is.Equal(len(in), 10)

	var seqs []int64
	n, err := db.ExportAudit(context.Background(), acme, store.AuditFilter{}, 0, func(e *store.AuditEntry) error {
		seqs = append(seqs, e.Seq)
		return nil
	})
	is.NoErr(err)
	is.Equal(n, 32)
	for i, s := range seqs {
		is.Equal(s, int64(i+1)) // oldest first
	}
	seqs = nil
	n, err = db.ExportAudit(context.Background(), acme, window, 4, func(e *store.AuditEntry) error {
		seqs = append(seqs, e.Seq)
		return nil
	})
	is.NoErr(err)
	is.Equal(n, 4) // up to its bound
	is.Equal(seqs, []int64{11, 12, 13, 14})
}

// testTheAuditChainHoldsUnderManyWriters: two handles (two processes on the SQLite
// file, two replicas on PostgreSQL) enriching for one organization at once append to
// its chain one after the other: every place taken once, each entry chained to the
// one before.
func testTheAuditChainHoldsUnderManyWriters(t *testing.T, env *Env) {
	is := is.New(t)
	acme := NewOrg(t, env.DB, "acme")
	_, err := env.DB.GrantCredits(context.Background(), "acme", 10_000, nil)
	is.NoErr(err)
	handles := []*store.DB{env.DB, env.Open()}
	const each = 40
	var wg sync.WaitGroup
	errs := make(chan error, len(handles)*4*each)
	for hi, db := range handles {
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					if _, err := db.CreateTask(context.Background(), byKey("k", "k", ""), NewTask(acme, fmt.Sprintf("h%d-w%d-%d.com", hi, w, i))); err != nil {
						errs <- err
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	c := chainOf(t, env.DB, acme)
	is.Equal(c.Bad, nil)
	is.Equal(c.Entries, int64(len(handles)*4*each))
	is.Equal(c.Head.Seq, c.Entries)
}

// auditTamperings are changes another program makes to an organization's chain
// behind enrichd's back, each with the place of the first bad entry VerifyAudit must
// name and a word of what it says. Each chain is of five tasks, of x1.com ... x5.com.
var auditTamperings = []struct {
	name  string
	stmts []string
	bad   int64
	says  string
}{
	{"credits changed", []string{`UPDATE audit_log SET credits = 0 WHERE org_id = ? AND seq = 3`}, 3, "changed"},
	{"subject changed", []string{`UPDATE audit_log SET subject = 'evil.com' WHERE org_id = ? AND seq = 2`}, 2, "subject"},
	{"actor changed, another hash put in", []string{`UPDATE audit_log SET actor_name = 'Nobody',
		hash = (SELECT hash FROM audit_log WHERE org_id = ? AND seq = 5) WHERE org_id = ? AND seq = 4`}, 4, "changed"},
	{"hash changed", []string{`UPDATE audit_log SET hash = prev_hash WHERE org_id = ? AND seq = 2`}, 2, "changed"},
	{"entry removed", []string{`DELETE FROM audit_log WHERE org_id = ? AND seq = 3`}, 3, "missing"},
	{"last removed", []string{`DELETE FROM audit_log WHERE org_id = ? AND seq = 5`}, 5, "missing"},
	{"first removed", []string{`DELETE FROM audit_log WHERE org_id = ? AND seq = 1`}, 1, "missing"},
	{"subject blanked", []string{`UPDATE audit_log SET subject = NULL WHERE org_id = ? AND seq = 2`}, 2, "erasure"},
	{"oldest cut without retention", []string{
		`DELETE FROM audit_log WHERE org_id = ? AND seq <= 2`,
		`UPDATE audit_heads SET base_seq = 2, base_at = (SELECT at FROM audit_log WHERE org_id = audit_heads.org_id AND seq = 3),
			base_hash = (SELECT prev_hash FROM audit_log WHERE org_id = audit_heads.org_id AND seq = 3) WHERE org_id = ?`,
	}, 3, "retention"},
}

// testAuditVerifyNamesTheFirstBadEntry: a row of the log changed or removed with
// another client of the database (database/sql, as another program would) breaks its
// chain, and the verification names the first bad entry; the other chains still hold.
func testAuditVerifyNamesTheFirstBadEntry(t *testing.T, env *Env) {
	is := is.New(t)
	db := env.DB
	raw := env.Raw()
	orgs := map[string]string{}
	for i, c := range append(auditTamperings, struct {
		name  string
		stmts []string
		bad   int64
		says  string
	}{name: "untouched"}) {
		name := fmt.Sprintf("org%d", i)
		orgs[c.name] = NewOrg(t, db, name)
		_, err := db.GrantCredits(context.Background(), name, 100, nil)
		is.NoErr(err)
		for n := 1; n <= 5; n++ {
			_, err := db.CreateTask(context.Background(), byKey("k", "Zapier", ""), NewTask(orgs[c.name], fmt.Sprintf("x%d.com", n)))
			is.NoErr(err)
		}
	}
	for _, c := range auditTamperings {
		org := orgs[c.name]
		for _, stmt := range c.stmts {
			args := []any{org}
			if strings.Count(stmt, "?") == 2 {
				args = append(args, org)
			}
			if _, err := raw.Exec(stmt, args...); err != nil {
				t.Fatal(c.name, err)
			}
		}
	}
	chains, err := db.VerifyAudit(context.Background(), "", true)
	is.NoErr(err)
	byOrg := map[string]store.AuditChain{}
	for _, ch := range chains {
		byOrg[ch.OrgID] = ch
	}
	for _, c := range auditTamperings {
		ch := byOrg[orgs[c.name]]
		if ch.Bad == nil {
			t.Errorf("%s: the chain verified", c.name)
			continue
		}
		if ch.Bad.Seq != c.bad || !strings.Contains(ch.Bad.Problem, c.says) {
			t.Errorf("%s: bad entry %d (%s), want %d saying %q", c.name, ch.Bad.Seq, ch.Bad.Problem, c.bad, c.says)
		}
	}
	is.Equal(byOrg[orgs["untouched"]].Bad, nil)
	is.Equal(byOrg[orgs["untouched"]].Entries, int64(5))

	// A head removed: its entries show as added behind enrichd's back.
	_, err = raw.Exec(`DELETE FROM audit_heads WHERE org_id = ?`, orgs["untouched"])
	is.NoErr(err)
	c := chainOf(t, db, orgs["untouched"])
	is.True(c.Bad != nil)
	is.Equal(c.Bad.Seq, int64(1))
}

// testAnErasureBlanksTheAuditSubjectAndTheChainHolds: the registry's erasure of the
// audit log blanks the subject of the entries about the person, which stay, found by
// the subject's hash; the chain holds once the erasure is itself recorded after them,
// and a subject blanked with no erasure after it is named.
func testAnErasureBlanksTheAuditSubjectAndTheChainHolds(t *testing.T, env *Env) {
	is := is.New(t)
	db := env.DB
	acme := NewOrg(t, db, "acme")
	_, err := db.GrantCredits(context.Background(), "acme", 100, nil)
	is.NoErr(err)
	hashes := personWorkload(t, env, acme)
	_, err = db.CreateTask(context.Background(), byKey("k", "k", ""), NewTask(acme, "acme.com"))
	is.NoErr(err)

	entry, ok := store.PersonalTableByName("audit_log")
	is.True(ok)
	is.True(entry.Erase != nil)
	erasing := &store.Erasing{ID: "e", OrgID: acme, Hashes: hashes, Now: env.Clock.Now(), Removed: map[string]int64{}}
	err = db.Write(context.Background(), func(tx store.Tx) error {
		return entry.Erase(context.Background(), tx, entry, erasing)
	})
	is.NoErr(err)
	n := erasing.Removed["audit_log"]
	is.True(n >= 4) // the email lookup, the profile lookup, the store hit, the watch
	is.Equal(erasing.AuditChains, []string{acme})

	found, err := db.FindSubject(context.Background(), acme, false, hashes)
	is.NoErr(err)
	var rows []map[string]any
	for _, f := range found {
		if f.Table == "audit_log" {
			rows = f.Rows
		}
	}
	is.True(len(rows) >= 5) // the suppression's entry too, which had no subject in clear
	for _, r := range rows {
		is.Equal(r["subject"], nil)
	}
	var erased int
	for _, e := range auditOf(t, db, acme) {
		if e.Erased {
			erased++
			is.True(e.SubjectHash != nil)
		}
		if e.Subject != nil {
			is.Equal(*e.Subject, "acme.com") // the company's entry is not the person's
		}
	}
	is.Equal(int64(erased), n)

	c := chainOf(t, db, acme)
	is.True(c.Bad != nil) // blanked, and no erasure recorded
	is.True(strings.Contains(c.Bad.Problem, "erasure"))

	is.NoErr(db.RecordAudit(context.Background(), store.BySystem, store.NewAuditEntry{OrgID: acme, Action: store.AuditPersonErased, SubjectHash: hashes[0][:]}))
	c = chainOf(t, db, acme)
	is.Equal(c.Bad, nil)
	is.Equal(c.Erased, n)
}

// testAuditRetentionLeavesAVerifiableCheckpoint: the oldest entries go once past the
// audit's retention, a day past it at the least, chain by chain; the chain is verified
// from the checkpoint left, the cut is itself an entry, and a cut made behind
// enrichd's back with the checkpoint moved too is still named.
func testAuditRetentionLeavesAVerifiableCheckpoint(t *testing.T, env *Env) {
	is := is.New(t)
	db := env.DB
	acme, other := NewOrg(t, db, "acme"), NewOrg(t, db, "other")
	for _, org := range []string{"acme", "other"} {
		_, err := db.GrantCredits(context.Background(), org, 100, nil)
		is.NoErr(err)
	}
	for i := range 5 {
		_, err := db.CreateTask(context.Background(), byKey("k", "k", ""), NewTask(acme, fmt.Sprintf("old%d.com", i)))
		is.NoErr(err)
	}
	env.Clock.Add(400 * 24 * time.Hour)
	for i := range 3 {
		_, err := db.CreateTask(context.Background(), byKey("k", "k", ""), NewTask(acme, fmt.Sprintf("new%d.com", i)))
		is.NoErr(err)
	}
	_, err := db.CreateTask(context.Background(), byKey("k", "k", ""), NewTask(other, "other.com"))
	is.NoErr(err)

	// Within a day of the cutoff nothing goes: chains are cut once a day, not at
	// every round.
	n, err := db.PurgeAudit(context.Background(), env.Clock.Now().Add(-400*24*time.Hour+time.Hour), 500)
	is.NoErr(err)
	is.Equal(n, 0)

	cutoff := env.Clock.Now().Add(-365 * 24 * time.Hour)
	n, err = db.PurgeAudit(context.Background(), cutoff, 2) // two at a time
	is.NoErr(err)
	is.Equal(n, 2)
	for n == 2 {
		n, err = db.PurgeAudit(context.Background(), cutoff, 2)
		is.NoErr(err)
	}
	entries := auditOf(t, db, acme)
	var actions []string
	for _, e := range entries {
		is.True(!e.At.Before(cutoff))
		actions = append(actions, e.Action)
	}
	is.Equal(actions, []string{store.AuditPurged, store.AuditPurged, store.AuditPurged, store.AuditTaskCreated, store.AuditTaskCreated, store.AuditTaskCreated})
	is.Equal(entries[0].Actor.Kind, store.ActorSystem)
	is.True(strings.Contains(string(entries[0].Detail), `"through":5`))

	c := chainOf(t, db, acme)
	is.Equal(c.Bad, nil)
	is.Equal(c.Head.BaseSeq, int64(5))
	is.Equal(c.FirstSeq, int64(6))
	is.Equal(c.Entries, int64(6))
	is.Equal(len(auditOf(t, db, other)), 1) // too young to go

	// The oldest remaining entry cut behind enrichd's back, the checkpoint moved to it.
	raw := env.Raw()
	_, err = raw.Exec(`UPDATE audit_heads SET base_seq = 6, base_at = (SELECT at FROM audit_log WHERE org_id = ? AND seq = 6),
		base_hash = (SELECT hash FROM audit_log WHERE org_id = ? AND seq = 6) WHERE org_id = ?`, acme, acme, acme)
	is.NoErr(err)
	_, err = raw.Exec(`DELETE FROM audit_log WHERE org_id = ? AND seq = 6`, acme)
	is.NoErr(err)
	c = chainOf(t, db, acme)
	is.True(c.Bad != nil)
	is.True(strings.Contains(c.Bad.Problem, "retention"))
}

// testAnErasureIsRecordedInEveryChainItBlanks: an erasure blanks the subject of every
// entry about the person (by the profile asked and the address found for her), keeps
// the entries, found by hash, and records itself, by whoever asked, after them: the
// chain verifies. The operator's erasure of every organization records itself in the
// installation's chain and in each organization's chain it blanked, each of which
// verifies; an organization whose entries it did not touch gets no entry.
func testAnErasureIsRecordedInEveryChainItBlanks(t *testing.T, env *Env) {
	is := is.New(t)
	db := env.DB
	acme, other, bystander := NewOrg(t, db, "acme"), NewOrg(t, db, "other"), NewOrg(t, db, "bystander")
	for _, org := range []string{"acme", "other", "bystander"} {
		_, err := db.GrantCredits(context.Background(), org, 100, nil)
		is.NoErr(err)
	}
	profile, resolved, _ := erasedWorkload(t, env, acme)
	_, err := db.CreateTask(context.Background(), byKey("k", "k", ""), NewTask(acme, "acme.com"))
	is.NoErr(err)
	_, err = db.CreateTask(context.Background(), byKey("k", "k", ""), NewTask(bystander, "acme.com"))
	is.NoErr(err)
	// Hers are the entries about her profile and the address found for her: the
	// address she was one candidate for is another subject, erased on its own.
	hers := map[string]bool{}
	for _, sub := range []enrich.Subject{profile, resolved} {
		h := db.Subjects().Hash(sub)
		hers[hex.EncodeToString(h[:])] = true
	}
	about := func(org string) (clear, blanked int) {
		for _, e := range auditOf(t, db, org) {
			if e.Subject != nil && e.SubjectHash != nil && hers[*e.SubjectHash] {
				clear++
			}
			if e.Erased {
				blanked++
			}
		}
		return clear, blanked
	}
	clear, _ := about(acme)
	is.True(clear >= 4) // her lookups by profile and address, the store hit, the watch

	user, email := "u1", "dpo@acme.example"
	er, err := db.Erase(context.Background(), store.By{Actor: store.Actor{Kind: store.ActorUser, ID: &user, Name: &email}, RequestID: "req-1"},
		store.NewErasure{OrgID: acme, Subject: profile, By: store.AddedBy{Kind: store.AddedByCLI}})
	is.NoErr(err)
	is.True(er.Removed["audit_log"] >= 4)
	clear, blanked := about(acme)
	is.Equal(clear, 0)
	is.Equal(int64(blanked), er.Removed["audit_log"])
	entries := auditOf(t, db, acme)
	last := entries[0]
	is.Equal(last.Action, store.AuditPersonErased)
	is.Equal(*last.ObjectID, er.ID)
	is.Equal(last.Subject, nil) // by hash alone
	hash := db.Subjects().Hash(profile)
	is.Equal(*last.SubjectHash, hex.EncodeToString(hash[:]))
	is.Equal(last.Actor.Kind, store.ActorUser)
	is.Equal(*last.Actor.Name, email)
	is.Equal(*last.RequestID, "req-1")
	for _, e := range entries {
		if e.Subject != nil {
			is.True(*e.Subject == "acme.com" || *e.Subject == "Jane.Doe@acme.com") // the company's, and the other address's
		}
	}
	byAddress, _, err := db.ListAudit(context.Background(), acme, store.AuditFilter{SubjectHash: func() []byte {
		h := db.Subjects().Hash(resolved)
		return h[:]
	}()}, 0, 100)
	is.NoErr(err)
	is.True(len(byAddress) > 0) // still found by the address's hash
	for _, e := range byAddress {
		is.True(e.Erased)
	}
	c := chainOf(t, db, acme)
	is.Equal(c.Bad, nil)
	is.Equal(c.Erased, er.Removed["audit_log"])

	// Every organization's: the installation's chain, and other's, which looked her up.
	_, err = db.CreateTask(context.Background(), byKey("k2", "k2", ""), newPersonTask(other, "jane-doe"))
	is.NoErr(err)
	before := len(auditOf(t, db, bystander))
	all, err := db.Erase(context.Background(), store.ByOperator,
		store.NewErasure{AllOrgs: true, Subject: profile, By: store.AddedBy{Kind: store.AddedByCLI}})
	is.NoErr(err)
	for _, org := range []string{"", other} {
		list := auditOf(t, db, org)
		is.True(len(list) > 0)
		is.Equal(list[0].Action, store.AuditPersonErased)
		is.Equal(*list[0].ObjectID, all.ID)
		is.Equal(list[0].Actor.Kind, store.ActorCLI)
	}
	is.Equal(len(auditOf(t, db, bystander)), before)
	clear, _ = about(other)
	is.Equal(clear, 0)
	chains, err := db.VerifyAudit(context.Background(), "", true)
	is.NoErr(err)
	for _, ch := range chains {
		if ch.Bad != nil {
			t.Errorf("the chain of %q: %+v", ch.OrgID, *ch.Bad)
		}
	}
}

// testAnExportIsRecordedAndListsThePersonsEntries: an export lists the organization's
// audit entries about the person (who looked her up, and how), oldest first, and is
// itself recorded, by whoever asked; another organization's export shows none of
// them and is recorded in its own chain alone.
func testAnExportIsRecordedAndListsThePersonsEntries(t *testing.T, env *Env) {
	is := is.New(t)
	db := env.DB
	acme, other := NewOrg(t, db, "acme"), NewOrg(t, db, "other")
	_, err := db.GrantCredits(context.Background(), "acme", 100, nil)
	is.NoErr(err)
	profile, _, _ := erasedWorkload(t, env, acme)
	before := len(auditOf(t, db, acme))

	x, err := db.ExportPerson(context.Background(), byKey("key-1", "crm", "req-7"), acme, false, profile)
	is.NoErr(err)
	is.True(len(x.Audit) >= 4)
	var prev time.Time
	for _, e := range x.Audit {
		at := e["at"].(time.Time)
		is.True(!at.Before(prev)) // oldest first
		prev = at
		is.Equal(e["org_id"], acme)
		is.True(e["action"] == store.AuditTaskCreated || e["action"] == store.AuditWatchCreated)
	}
	for _, task := range x.Tasks { // each says who made it: here the tests' setup, outside any request
		is.Equal(task["by"].(map[string]any)["kind"], store.ActorSystem)
	}
	entries := auditOf(t, db, acme)
	is.Equal(len(entries), before+1)
	last := entries[0]
	is.Equal(last.Action, store.AuditPersonExported)
	is.Equal(*last.Subject, profile.Value)
	is.Equal(last.Actor.Kind, store.ActorKey)
	is.Equal(*last.Actor.Name, "crm")
	is.Equal(*last.RequestID, "req-7")
	is.Equal(chainOf(t, db, acme).Bad, nil)

	theirs, err := db.ExportPerson(context.Background(), byKey("key-2", "theirs", ""), other, false, profile)
	is.NoErr(err)
	is.Equal(len(theirs.Audit), 0)
	is.Equal(len(auditOf(t, db, acme)), before+1)
	mine := auditOf(t, db, other)
	is.Equal(mine[0].Action, store.AuditPersonExported)

	// A second export shows the first.
	again, err := db.ExportPerson(context.Background(), store.BySystem, acme, false, profile)
	is.NoErr(err)
	is.Equal(again.Audit[len(again.Audit)-1]["action"], store.AuditPersonExported)
}

// testAuditVerifyHoldsWhileTheChainGrowsAndIsCut: a verification while the chain is
// appended to (serve running, another replica) and cut by retention reads one
// consistent view of each chain: the entries written or purged during its walk are
// not reported as added or removed behind enrichd's back.
func testAuditVerifyHoldsWhileTheChainGrowsAndIsCut(t *testing.T, env *Env) {
	ctx := context.Background()
	db := env.DB
	acme := NewOrg(t, db, "acme")
	record := func(db *store.DB) error {
		return db.RecordAudit(ctx, store.BySystem, store.NewAuditEntry{OrgID: acme, Action: store.AuditBatchDownloaded})
	}
	for range 2500 { // more than one chunk of the walk
		if err := record(db); err != nil {
			t.Fatal(err)
		}
	}
	env.Clock.Add(400 * 24 * time.Hour) // the first entries past retention
	cutoff := env.Clock.Now().Add(-365 * 24 * time.Hour)
	other := env.Open()
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, work := range []func() error{
		func() error { return record(other) },
		func() error { _, err := other.PurgeAudit(ctx, cutoff, 7); return err },
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if err := work(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	defer func() { stop.Store(true); wg.Wait() }()
	for i := range 5 {
		chains, err := db.VerifyAudit(ctx, acme, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range chains {
			if c.Bad != nil {
				t.Fatalf("verification %d: a healthy chain reported as tampered with: %+v", i, *c.Bad)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	c := chainOf(t, db, acme)
	if c.Bad != nil || c.Head.BaseSeq == 0 {
		t.Fatalf("after the writers stopped: %+v", c)
	}
}
