package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"enrichd/enrich"
	"enrichd/store"
)

func emailSubject(s string) enrich.Subject {
	return enrich.Subject{Kind: enrich.SubjectEmail, Value: s}
}

func domainSubject(s string) enrich.Subject {
	return enrich.Subject{Kind: enrich.SubjectDomain, Value: s}
}

func profileSubject(slug string) enrich.Subject {
	return enrich.Subject{Kind: enrich.SubjectProfile, Value: "https://network.example/in/" + slug}
}

func isKind(t *testing.T, err error, kind enrich.Kind, code string) {
	t.Helper()
	var e *enrich.Error
	if !errors.As(err, &e) || e.Kind != kind || (code != "" && e.Code != code) {
		t.Fatalf("want an error of kind %s (%s), got %v", kind, code, err)
	}
}

func suppressed(t *testing.T, db *store.DB, org string, subs ...enrich.Subject) bool {
	t.Helper()
	_, ok, err := db.Suppressed(context.Background(), org, subs...)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// testSuppressionsPerOrganization: an entry holds for its organization alone, the
// installation's for every one; an address is one subject whatever its case or +tag;
// a second entry of a subject, or a bad one, changes nothing; an organization lists
// and lifts its own entries only; an import passes over what is there already.
func testSuppressionsPerOrganization(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	acme, other := NewOrg(t, db, "acme"), NewOrg(t, db, "other")
	keyID, keyName := "key-1", "crm"
	by := store.AddedBy{Kind: store.AddedByKey, ID: &keyID, Name: &keyName}

	s, err := db.AddSuppression(ctx, store.BySystem, store.NewSuppression{OrgID: acme, Subject: emailSubject("Jane.Doe@acme.com"),
		Reason: enrich.Ptr("objected on the phone"), AddedBy: by})
	is.NoErr(err)
	is.Equal(s.Kind, "email")
	is.Equal(s.Hint, "J***@acme.com")
	is.Equal(*s.Reason, "objected on the phone")
	is.Equal(s.AddedBy, by)
	is.True(!s.AllOrgs)
	is.Equal(s.CreatedAt, env.Clock.Now())
	got, err := db.GetSuppression(ctx, acme, s.ID)
	is.NoErr(err)
	is.Equal(got.Hint, s.Hint)

	// Nothing of the address is kept but its hash and the hint.
	var rows int
	is.NoErr(env.Raw().QueryRow(`SELECT count(*) FROM suppressions WHERE hint LIKE '%jane%' OR reason LIKE '%Jane%'`).Scan(&rows))
	is.Equal(rows, 0)

	is.True(suppressed(t, db, acme, emailSubject("jane.doe+news@ACME.com")))
	is.True(!suppressed(t, db, other, emailSubject("jane.doe@acme.com")))
	is.True(!suppressed(t, db, acme, emailSubject("john@acme.com"), domainSubject("acme.com")))

	_, err = db.AddSuppression(ctx, store.BySystem, store.NewSuppression{OrgID: acme, Subject: emailSubject("JANE.DOE@acme.com"), AddedBy: by})
	isKind(t, err, enrich.KindConflict, "suppression_exists")
	for _, bad := range []store.NewSuppression{
		{OrgID: acme, Subject: emailSubject("x@acme.com"), Reason: enrich.Ptr(strings.Repeat("é", store.MaxSuppressionReason+1)), AddedBy: by},
		{OrgID: acme, Subject: emailSubject("x@acme.com"), Reason: enrich.Ptr("a\x00b"), AddedBy: by},
		{OrgID: acme, Subject: enrich.Subject{Kind: "phone", Value: "1"}, AddedBy: by},
		{OrgID: acme, Subject: emailSubject(""), AddedBy: by},
	} {
		_, err := db.AddSuppression(ctx, store.BySystem, bad)
		isKind(t, err, enrich.KindInvalid, "")
	}
	list, total, err := db.ListSuppressions(ctx, acme, 0, 25)
	is.NoErr(err)
	is.Equal(total, int64(1)) // nothing else was added
	is.Equal(len(list), 1)

	// The installation's entry holds for every organization, and only the CLI's scope
	// ("") lists and lifts it.
	env.Clock.Add(time.Second)
	all, err := db.AddSuppression(ctx, store.BySystem, store.NewSuppression{Subject: domainSubject("globex.com"), AddedBy: store.AddedBy{Kind: store.AddedByCLI}})
	is.NoErr(err)
	is.True(all.AllOrgs)
	is.True(suppressed(t, db, acme, domainSubject("globex.com")))
	is.True(suppressed(t, db, other, emailSubject("nobody@example.com"), domainSubject("globex.com")))
	_, total, err = db.ListSuppressions(ctx, acme, 0, 25)
	is.NoErr(err)
	is.Equal(total, int64(1))
	installation, total, err := db.ListSuppressions(ctx, "", 0, 25)
	is.NoErr(err)
	is.Equal(total, int64(1))
	is.Equal(installation[0].ID, all.ID)
	_, err = db.DeleteSuppression(ctx, store.BySystem, acme, all.ID)
	isKind(t, err, enrich.KindNotFound, "not_found")
	_, err = db.GetSuppression(ctx, acme, all.ID)
	isKind(t, err, enrich.KindNotFound, "not_found")

	// Another organization's entry is not found, and stays.
	_, err = db.DeleteSuppression(ctx, store.BySystem, other, s.ID)
	isKind(t, err, enrich.KindNotFound, "not_found")
	_, err = db.DeleteSuppression(ctx, store.BySystem, acme, "no-such-id")
	isKind(t, err, enrich.KindNotFound, "not_found")
	is.True(suppressed(t, db, acme, emailSubject("jane.doe@acme.com")))
	lifted, err := db.DeleteSuppression(ctx, store.BySystem, acme, s.ID)
	is.NoErr(err)
	is.Equal(lifted.ID, s.ID)
	is.True(!suppressed(t, db, acme, emailSubject("jane.doe@acme.com")))
	_, err = db.DeleteSuppression(ctx, store.BySystem, "", all.ID)
	is.NoErr(err)
	is.True(!suppressed(t, db, other, domainSubject("globex.com")))

	// An import passes over what is there, and over its own repeats; newest first in
	// pages.
	_, err = db.AddSuppression(ctx, store.BySystem, store.NewSuppression{OrgID: acme, Subject: emailSubject("p0@acme.com"), AddedBy: by})
	is.NoErr(err)
	var batch []store.NewSuppression
	for i := range 30 {
		batch = append(batch, store.NewSuppression{OrgID: acme, Subject: emailSubject(fmt.Sprintf("p%d@acme.com", i)), AddedBy: by})
	}
	batch = append(batch, batch[3])
	env.Clock.Add(time.Second)
	added, existing, err := db.ImportSuppressions(ctx, store.BySystem, batch)
	is.NoErr(err)
	is.Equal(added, 29)
	is.Equal(existing, 2)
	page0, total, err := db.ListSuppressions(ctx, acme, 0, 25)
	is.NoErr(err)
	is.Equal(total, int64(30))
	is.Equal(len(page0), 25)
	page1, _, err := db.ListSuppressions(ctx, acme, 1, 25)
	is.NoErr(err)
	is.Equal(len(page1), 5)
	is.Equal(page1[4].Hint, "p***@acme.com")
	is.True(!page0[0].CreatedAt.Before(page1[4].CreatedAt))
	is.True(suppressed(t, db, acme, emailSubject("p29@acme.com")))

	tooMany := make([]store.NewSuppression, store.MaxSuppressionImport+1)
	_, _, err = db.ImportSuppressions(ctx, store.BySystem, tooMany)
	isKind(t, err, enrich.KindInvalid, "")
}

// testASuppressionIsSeenByEveryHandle: a suppression added or lifted through one
// handle (another process on the SQLite file, another replica on PostgreSQL) holds
// for the others within moments, though they keep what they read.
func testASuppressionIsSeenByEveryHandle(t *testing.T, env *Env) {
	ctx := context.Background()
	a, b := env.DB, env.Open()
	acme := NewOrg(t, a, "acme")
	jane := emailSubject("jane@acme.com")
	seen := func(db *store.DB, want bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for suppressed(t, db, acme, jane) != want {
			if time.Now().After(deadline) {
				t.Fatalf("the other handle does not see the suppression as %v", want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	seen(b, false) // b has read acme's list, which it keeps
	s, err := a.AddSuppression(ctx, store.BySystem, store.NewSuppression{OrgID: acme, Subject: jane, AddedBy: store.AddedBy{Kind: store.AddedByCLI}})
	if err != nil {
		t.Fatal(err)
	}
	seen(a, true)
	seen(b, true)
	if _, err := a.DeleteSuppression(ctx, store.BySystem, acme, s.ID); err != nil {
		t.Fatal(err)
	}
	seen(b, false)
}

// testAStoreHitAboutASuppressedSubjectFails: a stored record answers an input that
// did not name its subject (the person an address is on record for, the company at a
// page); when that subject is suppressed the task fails not_found, refunded, with no
// data, as if the input had named them.
func testAStoreHitAboutASuppressedSubjectFails(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	acme := NewOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 100, nil)
	is.NoErr(err)
	settle := func(out store.Outcome) {
		t.Helper()
		c, err := db.ClaimTask(ctx, time.Minute)
		if err != nil || c == nil {
			t.Fatal(c, err)
		}
		if ok, err := db.Settle(ctx, c, out); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	// Jane's address is on record (an email lookup resolved it), and Acme's page.
	profile := "https://network.example/in/jane-doe"
	email := store.NewTask{OrgID: acme, Input: enrich.Input{Lookup: enrich.LookupEmail, Target: "jane@acme.com"},
		RawInput: json.RawMessage(`{"email":"jane@acme.com"}`), TTL: 10 * time.Minute, MaxBacklog: 100, Freshness: 30 * 24 * time.Hour}
	_, err = db.CreateTask(ctx, store.BySystem, email)
	is.NoErr(err)
	settle(store.Outcome{Fetched: true, Result: &enrich.Result{Person: &enrich.Person{NetworkURL: &profile, FullName: enrich.Ptr("Jane Doe"),
		Positions: []enrich.Position{{CompanyName: enrich.Ptr("Acme"), IsCurrent: true, Company: &enrich.PositionCompany{Domain: enrich.Ptr("acme.com")}}}}}})
	page := NewTask(acme, "https://network.example/company/acme")
	page.Input.Lookup = enrich.LookupCompanyURL
	_, err = db.CreateTask(ctx, store.BySystem, page)
	is.NoErr(err)
	settle(store.Outcome{Fetched: true, Result: &enrich.Result{Company: &enrich.Company{Name: "Acme", Domain: enrich.Ptr("acme.com"),
		NetworkURL: enrich.Ptr("https://network.example/company/acme")}}})
	_, err = db.CreateTask(ctx, store.BySystem, NewTask(acme, "acme.com"))
	is.NoErr(err)
	hit, err := db.CreateTask(ctx, store.BySystem, page)
	is.NoErr(err)
	is.Equal(hit.Task.Status, store.StatusSucceeded) // answered from the store
	before, err := db.CreditBalance(ctx, "acme")
	is.NoErr(err)

	for _, sub := range []enrich.Subject{profileSubject("jane-doe"), domainSubject("acme.com")} {
		_, err = db.AddSuppression(ctx, store.BySystem, store.NewSuppression{OrgID: acme, Subject: sub, AddedBy: store.AddedBy{Kind: store.AddedByCLI}})
		is.NoErr(err)
	}
	for _, nt := range []store.NewTask{email, page} {
		res, err := db.CreateTask(ctx, store.BySystem, nt)
		is.NoErr(err)
		is.Equal(res.Task.Status, store.StatusFailed)
		is.Equal(res.Task.Error.Code, enrich.CodeNotFound)
		is.True(strings.Contains(res.Task.Error.Message, "suppressed"))
		is.True(!strings.Contains(res.Task.Error.Message, "jane-doe")) // the address's owner is not named
		is.Equal(res.Task.Data, nil)
	}
	after, err := db.CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(after.Balance, before.Balance) // refunded
}

// testSuppressingASubjectPausesItsWatches: a suppression pauses the watches of its
// subject, of its organization only (every organization's for the installation's).
func testSuppressingASubjectPausesItsWatches(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	acme, other := NewOrg(t, db, "acme"), NewOrg(t, db, "other")
	watchJane := func(org string) *store.Watch {
		t.Helper()
		l := newLoop(t, db, org, "people", enrich.ObjectPerson)
		w, err := db.CreateWatch(ctx, store.BySystem, newPersonWatch(org, l.ID, "jane-doe", env.Clock.Now()))
		is.NoErr(err)
		return w
	}
	mine, theirs := watchJane(acme), watchJane(other)
	paused := func(org, id string) bool {
		w, err := db.GetWatch(ctx, org, id)
		is.NoErr(err)
		return w.PausedReason != nil && *w.PausedReason == store.PausedSuppressed && w.NextRunAt == nil
	}
	_, err := db.AddSuppression(ctx, store.BySystem, store.NewSuppression{OrgID: acme, Subject: profileSubject("jane-doe"), AddedBy: store.AddedBy{Kind: store.AddedByCLI}})
	is.NoErr(err)
	is.True(paused(acme, mine.ID))
	is.True(!paused(other, theirs.ID))
	_, err = db.AddSuppression(ctx, store.BySystem, store.NewSuppression{Subject: profileSubject("jane-doe"), AddedBy: store.AddedBy{Kind: store.AddedByCLI}})
	is.NoErr(err)
	is.True(paused(other, theirs.ID))
	due, err := db.DueWatches(ctx, env.Clock.Now().Add(time.Hour), 100, 100)
	is.NoErr(err)
	is.Equal(len(due), 0)

	// A watch made of a suppressed subject, or of an address at a suppressed domain,
	// is made paused.
	_, err = db.AddSuppression(ctx, store.BySystem, store.NewSuppression{OrgID: acme, Subject: domainSubject("initech.com"), AddedBy: store.AddedBy{Kind: store.AddedByCLI}})
	is.NoErr(err)
	l := newLoop(t, db, acme, "more people", enrich.ObjectPerson)
	for _, nw := range []store.NewWatch{newPersonWatch(acme, l.ID, "jane-doe", env.Clock.Now()), {OrgID: acme, ObjectType: enrich.ObjectPerson,
		Input: enrich.Input{Lookup: enrich.LookupEmail, Target: "peter@initech.com"}, RawInput: json.RawMessage(`{"email":"peter@initech.com"}`),
		LoopID: l.ID, EveryDays: 30, Enabled: true}} {
		w, err := db.CreateWatch(ctx, store.BySystem, nw)
		is.NoErr(err)
		is.True(paused(acme, w.ID))
	}
}
