package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"
	"enrichd/watch"

	"github.com/matryer/is"
)

func newCompanyWatch(orgID, loopID, domain string, firstRun time.Time) store.NewWatch {
	raw, _ := json.Marshal(map[string]string{"domain": domain})
	return store.NewWatch{OrgID: orgID, ObjectType: enrich.ObjectCompany, Input: enrich.Input{Lookup: enrich.LookupDomain, Target: domain},
		RawInput: raw, LoopID: loopID, EveryDays: 30, Enabled: true, FirstRunAt: firstRun}
}

func newPersonWatch(orgID, loopID, handle string, firstRun time.Time) store.NewWatch {
	url := "https://network.example/in/" + handle
	raw, _ := json.Marshal(map[string]string{"networkUrl": url})
	return store.NewWatch{OrgID: orgID, ObjectType: enrich.ObjectPerson, Input: enrich.Input{Lookup: enrich.LookupPersonURL, Target: url},
		RawInput: raw, LoopID: loopID, EveryDays: 30, Enabled: true, FirstRunAt: firstRun}
}

// watchTask is the task a scheduler enqueues for w: never a store hit, no Loop of its own.
func watchTask(w *store.Watch) store.NewTask {
	return store.NewTask{OrgID: w.OrgID, Input: enrich.Input{Lookup: w.Lookup, Target: w.Target}, RawInput: w.Input,
		WatchID: &w.ID, TTL: 10 * time.Minute, MaxBacklog: 10000, Freshness: 0}
}

func mustWatch(t testing.TB, db *store.DB, nw store.NewWatch) *store.Watch {
	t.Helper()
	w, err := db.CreateWatch(context.Background(), store.BySystem, nw)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func errCode(err error) string {
	var e *enrich.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func errMessage(err error) string {
	var e *enrich.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return ""
}

// testWatchesCreateGetListUpdateDelete: a watch is kept as created, listed newest
// first in pages (all, or a Loop's), changed field by field, and deleted.
func testWatchesCreateGetListUpdateDelete(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	loopA := newLoop(t, db, org, "a", enrich.ObjectCompany)
	loopB := newLoop(t, db, org, "b", enrich.ObjectCompany)
	first := clk.Now().Add(17 * time.Minute)

	nw := newCompanyWatch(org, loopA.ID, "acme.com", first)
	nw.Fields, nw.NotifyUnchanged = []string{"employee_count", "name"}, true
	w, err := db.CreateWatch(ctx, store.BySystem, nw)
	is.NoErr(err)
	is.Equal(w.ObjectType, enrich.ObjectCompany)
	is.Equal(string(w.Input), `{"domain":"acme.com"}`)
	is.Equal(w.LoopID, loopA.ID)
	is.Equal(w.EveryDays, 30)
	is.Equal(w.Fields, []string{"employee_count", "name"})
	is.True(w.NotifyUnchanged && w.Enabled)
	is.Equal(*w.NextRunAt, first)
	is.Equal(w.LastRunAt, nil)
	is.Equal(w.LastTaskID, nil)
	is.Equal(w.PausedReason, nil)
	is.Equal(w.CreatedAt, clk.Now())

	got, err := db.GetWatch(ctx, org, w.ID)
	is.NoErr(err)
	is.Equal(got, w) // what a read gives is what the create returned

	// A disabled watch has no next run; fields nil watches every field.
	clk.Add(time.Millisecond)
	off := newCompanyWatch(org, loopB.ID, "globex.com", first)
	off.Enabled = false
	w2 := mustWatch(t, db, off)
	is.Equal(w2.NextRunAt, nil)
	is.Equal(w2.Fields, nil)
	clk.Add(time.Millisecond)
	w3 := mustWatch(t, db, newCompanyWatch(org, loopA.ID, "initech.com", first))

	page, total, err := db.ListWatches(ctx, org, store.WatchFilter{Page: 0, PageSize: 2})
	is.NoErr(err)
	is.Equal(total, int64(3))
	is.Equal(len(page), 2)
	is.Equal(page[0].ID, w3.ID) // newest first
	is.Equal(page[1].ID, w2.ID)
	page, total, err = db.ListWatches(ctx, org, store.WatchFilter{Page: 1, PageSize: 2})
	is.NoErr(err)
	is.Equal(total, int64(3))
	is.Equal(len(page), 1)
	is.Equal(page[0], w)
	page, total, err = db.ListWatches(ctx, org, store.WatchFilter{LoopID: loopA.ID, PageSize: 10})
	is.NoErr(err)
	is.Equal(total, int64(2))
	is.Equal([]string{page[0].ID, page[1].ID}, []string{w3.ID, w.ID})
	page, total, err = db.ListWatches(ctx, org, store.WatchFilter{LoopID: "no-such-loop"})
	is.NoErr(err)
	is.Equal(total, int64(0))
	is.Equal(len(page), 0)

	// Changes, one at a time.
	clk.Add(time.Second)
	days, fields, notify := 7, []string(nil), false
	w, err = db.UpdateWatch(ctx, org, w.ID, store.WatchPatch{EveryDays: &days, Fields: &fields, NotifyUnchanged: &notify})
	is.NoErr(err)
	is.Equal(w.EveryDays, 7)
	is.Equal(w.Fields, nil)
	is.True(!w.NotifyUnchanged)
	is.Equal(*w.NextRunAt, first) // not re-planned: the caller did not say
	is.Equal(w.UpdatedAt, clk.Now())
	w, err = db.UpdateWatch(ctx, org, w.ID, store.WatchPatch{LoopID: &loopB.ID})
	is.NoErr(err)
	is.Equal(w.LoopID, loopB.ID)
	disabled := false
	w, err = db.UpdateWatch(ctx, org, w.ID, store.WatchPatch{Enabled: &disabled})
	is.NoErr(err)
	is.True(!w.Enabled)
	is.Equal(w.NextRunAt, nil)
	enabled, next := true, clk.Now().Add(5*time.Minute)
	w, err = db.UpdateWatch(ctx, org, w.ID, store.WatchPatch{Enabled: &enabled, NextRunAt: &next})
	is.NoErr(err)
	is.True(w.Enabled)
	is.Equal(*w.NextRunAt, next)
	got, err = db.GetWatch(ctx, org, w.ID)
	is.NoErr(err)
	is.Equal(got, w)

	is.NoErr(db.DeleteWatch(ctx, org, w.ID))
	_, err = db.GetWatch(ctx, org, w.ID)
	is.Equal(enrich.KindOf(err), enrich.KindNotFound)
	is.Equal(errMessage(err), "watch not found")
	is.Equal(enrich.KindOf(db.DeleteWatch(ctx, org, w.ID)), enrich.KindNotFound)
	_, total, err = db.ListWatches(ctx, org, store.WatchFilter{})
	is.NoErr(err)
	is.Equal(total, int64(2))
}

// testWatchesOfAnotherOrganizationAreNotFound: another organization's watch, and its
// Loop, are 404 whatever is asked of them.
func testWatchesOfAnotherOrganizationAreNotFound(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org, other := NewOrg(t, db, "acme"), NewOrg(t, db, "other")
	mine := newLoop(t, db, org, "mine", enrich.ObjectCompany)
	theirs := newLoop(t, db, other, "theirs", enrich.ObjectCompany)
	w := mustWatch(t, db, newCompanyWatch(org, mine.ID, "acme.com", clk.Now()))

	_, err := db.GetWatch(ctx, other, w.ID)
	is.Equal(enrich.KindOf(err), enrich.KindNotFound)
	days := 14
	_, err = db.UpdateWatch(ctx, other, w.ID, store.WatchPatch{EveryDays: &days})
	is.Equal(enrich.KindOf(err), enrich.KindNotFound)
	is.Equal(enrich.KindOf(db.DeleteWatch(ctx, other, w.ID)), enrich.KindNotFound)
	is.Equal(enrich.KindOf(db.DeferWatch(ctx, other, w.ID, clk.Now())), enrich.KindNotFound)
	is.Equal(enrich.KindOf(db.WatchScheduled(ctx, other, w.ID, "t", clk.Now(), clk.Now())), enrich.KindNotFound)
	list, total, err := db.ListWatches(ctx, other, store.WatchFilter{})
	is.NoErr(err)
	is.Equal(total, int64(0))
	is.Equal(len(list), 0)
	list, total, err = db.ListWatches(ctx, other, store.WatchFilter{LoopID: mine.ID})
	is.NoErr(err)
	is.Equal(total, int64(0))
	is.Equal(len(list), 0)

	// Another organization's Loop, to create a watch for or to move one to.
	_, err = db.CreateWatch(ctx, store.BySystem, newCompanyWatch(org, theirs.ID, "acme.com", clk.Now()))
	is.Equal(enrich.KindOf(err), enrich.KindNotFound)
	is.Equal(errMessage(err), "loop not found")
	_, err = db.UpdateWatch(ctx, org, w.ID, store.WatchPatch{LoopID: &theirs.ID})
	is.Equal(enrich.KindOf(err), enrich.KindNotFound)
	got, err := db.GetWatch(ctx, org, w.ID)
	is.NoErr(err)
	is.Equal(got.LoopID, mine.ID)
	is.Equal(got.EveryDays, 30)
}

// testWatchRefusals: a second watch of one input for one Loop is 409 watch_exists; a
// Loop of the other object type, every_days out of bounds, an unknown field are 400
// naming the field, and create nothing.
func testWatchRefusals(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	companies := newLoop(t, db, org, "companies", enrich.ObjectCompany)
	companies2 := newLoop(t, db, org, "companies-2", enrich.ObjectCompany)
	people := newLoop(t, db, org, "people", enrich.ObjectPerson)
	w := mustWatch(t, db, newCompanyWatch(org, companies.ID, "acme.com", clk.Now()))

	_, err := db.CreateWatch(ctx, store.BySystem, newCompanyWatch(org, companies.ID, "acme.com", clk.Now()))
	is.Equal(enrich.KindOf(err), enrich.KindConflict)
	is.Equal(errCode(err), "watch_exists")
	// The same input for another Loop is another watch; moving it onto the first's Loop
	// is the duplicate again.
	w2 := mustWatch(t, db, newCompanyWatch(org, companies2.ID, "acme.com", clk.Now()))
	_, err = db.UpdateWatch(ctx, org, w2.ID, store.WatchPatch{LoopID: &companies.ID})
	is.Equal(errCode(err), "watch_exists")
	// Patching a watch with its own Loop is no conflict with itself.
	_, err = db.UpdateWatch(ctx, org, w.ID, store.WatchPatch{LoopID: &companies.ID})
	is.NoErr(err)

	_, err = db.CreateWatch(ctx, store.BySystem, newCompanyWatch(org, people.ID, "globex.com", clk.Now()))
	is.Equal(enrich.KindOf(err), enrich.KindInvalid)
	is.True(strings.Contains(errMessage(err), "loop_id"))
	_, err = db.UpdateWatch(ctx, org, w.ID, store.WatchPatch{LoopID: &people.ID})
	is.Equal(enrich.KindOf(err), enrich.KindInvalid)
	is.True(strings.Contains(errMessage(err), "loop_id"))

	for _, days := range []int{0, 6, 366} {
		nw := newCompanyWatch(org, companies.ID, "initech.com", clk.Now())
		nw.EveryDays = days
		_, err = db.CreateWatch(ctx, store.BySystem, nw)
		is.Equal(enrich.KindOf(err), enrich.KindInvalid)
		is.True(strings.Contains(errMessage(err), "every_days"))
		_, err = db.UpdateWatch(ctx, org, w.ID, store.WatchPatch{EveryDays: &days})
		is.True(strings.Contains(errMessage(err), "every_days"))
	}
	nw := newCompanyWatch(org, companies.ID, "initech.com", clk.Now())
	nw.Fields = []string{"employee_count", "positions"} // a person's field, not a company's
	_, err = db.CreateWatch(ctx, store.BySystem, nw)
	is.Equal(enrich.KindOf(err), enrich.KindInvalid)
	is.True(strings.Contains(errMessage(err), "fields"))
	nw.Fields = make([]string, store.MaxWatchFields+1)
	for i := range nw.Fields {
		nw.Fields[i] = "name"
	}
	_, err = db.CreateWatch(ctx, store.BySystem, nw)
	is.True(strings.Contains(errMessage(err), "fields"))
	bad := []string{"updated_at"} // volatile: never compared, so never watched
	_, err = db.UpdateWatch(ctx, org, w.ID, store.WatchPatch{Fields: &bad})
	is.True(strings.Contains(errMessage(err), "fields"))

	_, total, err := db.ListWatches(ctx, org, store.WatchFilter{})
	is.NoErr(err)
	is.Equal(total, int64(2)) // the refusals created nothing
	got, err := db.GetWatch(ctx, org, w.ID)
	is.NoErr(err)
	is.Equal(got.EveryDays, 30)
	is.Equal(got.Fields, nil)
}

// testWatchImportHasPerRowResults: an import creates its good rows; each bad row (a
// duplicate, within the import too; another organization's Loop; a Loop of the other
// type) fails alone with its own error.
func testWatchImportHasPerRowResults(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org, other := NewOrg(t, db, "acme"), NewOrg(t, db, "other")
	loop := newLoop(t, db, org, "companies", enrich.ObjectCompany)
	people := newLoop(t, db, org, "people", enrich.ObjectPerson)
	theirs := newLoop(t, db, other, "theirs", enrich.ObjectCompany)
	existing := mustWatch(t, db, newCompanyWatch(org, loop.ID, "old.com", clk.Now()))

	rows := []store.NewWatch{
		newCompanyWatch(org, loop.ID, "a.com", clk.Now()),
		newCompanyWatch(org, loop.ID, "a.com", clk.Now()),
		newCompanyWatch(org, loop.ID, "old.com", clk.Now()),
		newCompanyWatch(org, theirs.ID, "b.com", clk.Now()),
		newCompanyWatch(org, people.ID, "c.com", clk.Now()),
		newPersonWatch(org, people.ID, "jane", clk.Now()),
	}
	results, err := db.CreateWatches(ctx, store.BySystem, rows)
	is.NoErr(err)
	is.Equal(len(results), len(rows))
	is.NoErr(results[0].Err)
	is.Equal(results[0].Watch.Target, "a.com")
	is.Equal(errCode(results[1].Err), "watch_exists")
	is.Equal(results[1].Watch, nil)
	is.Equal(errCode(results[2].Err), "watch_exists")
	is.Equal(enrich.KindOf(results[3].Err), enrich.KindNotFound)
	is.Equal(enrich.KindOf(results[4].Err), enrich.KindInvalid)
	is.NoErr(results[5].Err)
	is.Equal(results[5].Watch.ObjectType, enrich.ObjectPerson)

	list, total, err := db.ListWatches(ctx, org, store.WatchFilter{PageSize: 10})
	is.NoErr(err)
	is.Equal(total, int64(3))
	ids := map[string]bool{}
	for _, w := range list {
		ids[w.ID] = true
	}
	is.True(ids[existing.ID] && ids[results[0].Watch.ID] && ids[results[5].Watch.ID])

	_, err = db.CreateWatches(ctx, store.BySystem, make([]store.NewWatch, store.MaxWatchImport+1))
	is.Equal(enrich.KindOf(err), enrich.KindInvalid)
	is.True(strings.Contains(errMessage(err), "watches"))
}

// testDueWatchesAreClaimedOnce: two handles asking for the due watches at the same
// time never get the same one (on PostgreSQL one of them may get none); what they claimed is not due again until
// store.WatchRetry has passed without a WatchScheduled. Only enabled, unpaused, due
// watches are handed out, each with the next_run_at it was due at.
func testDueWatchesAreClaimedOnce(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	a, b, clk := env.DB, env.Open(), env.Clock
	org := NewOrg(t, a, "acme")
	loop := newLoop(t, a, org, "companies", enrich.ObjectCompany)
	start := clk.Now()
	const n = 40
	dueAt := map[string]time.Time{}
	for i := range n {
		w := mustWatch(t, a, newCompanyWatch(org, loop.ID, fmt.Sprintf("d%d.com", i), start.Add(time.Duration(i)*time.Second)))
		dueAt[w.ID] = *w.NextRunAt
	}
	off := newCompanyWatch(org, loop.ID, "off.com", start)
	off.Enabled = false
	mustWatch(t, a, off)
	later := mustWatch(t, a, newCompanyWatch(org, loop.ID, "later.com", start.Add(time.Hour)))
	clk.Add(time.Minute)
	now := clk.Now()

	// Rounds until everything due was handed out: on PostgreSQL a handle that finds the
	// other scheduling gets nothing that round, by design.
	seen := map[string]int{}
	for round := 0; len(seen) < n && round < 4*n; round++ {
		var gotA, gotB []store.DueWatch
		var errA, errB error
		together(
			func() { gotA, errA = a.DueWatches(ctx, now, 7, 100) },
			func() { gotB, errB = b.DueWatches(ctx, now, 7, 100) },
		)
		is.NoErr(errA)
		is.NoErr(errB)
		for _, d := range append(gotA, gotB...) {
			seen[d.Watch.ID]++
			is.Equal(*d.Watch.NextRunAt, dueAt[d.Watch.ID]) // the time it was due, to plan the next from
		}
	}
	is.Equal(len(seen), n) // every due watch, and only those
	for id, times := range seen {
		if times != 1 {
			t.Errorf("watch %s handed out %d times", id, times)
		}
	}
	is.Equal(seen[later.ID], 0)

	again, err := a.DueWatches(ctx, now, 100, 100)
	is.NoErr(err)
	is.Equal(len(again), 0)
	// Scheduled ones move on to their next run; the others come back after the retry.
	var scheduled string
	for id := range seen {
		scheduled = id
		is.NoErr(a.WatchScheduled(ctx, org, id, "task-1", now, now.Add(30*24*time.Hour)))
		break
	}
	w, err := a.GetWatch(ctx, org, scheduled)
	is.NoErr(err)
	is.Equal(*w.LastTaskID, "task-1")
	is.Equal(*w.LastRunAt, now)
	is.Equal(*w.NextRunAt, now.Add(30*24*time.Hour))
	clk.Add(store.WatchRetry)
	back, err := a.DueWatches(ctx, clk.Now(), 100, 100)
	is.NoErr(err)
	is.Equal(len(back), n-1)
	for _, d := range back {
		is.True(d.Watch.ID != scheduled)
		is.Equal(*d.Watch.NextRunAt, dueAt[d.Watch.ID]) // due as first claimed (AClaimNeverRecordedKeepsItsDueTime)
	}
	// A paused or disabled watch is never due, and keeps no next run when its task is
	// recorded meanwhile.
	disabled := false
	_, err = a.UpdateWatch(ctx, org, back[0].Watch.ID, store.WatchPatch{Enabled: &disabled})
	is.NoErr(err)
	is.NoErr(a.WatchScheduled(ctx, org, back[0].Watch.ID, "task-2", clk.Now(), clk.Now().Add(time.Hour)))
	w, err = a.GetWatch(ctx, org, back[0].Watch.ID)
	is.NoErr(err)
	is.Equal(w.NextRunAt, nil)
	is.Equal(*w.LastTaskID, "task-2")
	clk.Add(2 * time.Hour)
	due, err := a.DueWatches(ctx, clk.Now(), 100, 100)
	is.NoErr(err)
	for _, d := range due {
		is.True(d.Watch.ID != back[0].Watch.ID)
	}
}

// testDueWatchesPerOrganization: one organization's many due watches do not hold up
// another's: at most perOrg of each, oldest due first, at most limit in all.
func testDueWatchesPerOrganization(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	big, small := NewOrg(t, db, "big"), NewOrg(t, db, "small")
	bigLoop := newLoop(t, db, big, "companies", enrich.ObjectCompany)
	smallLoop := newLoop(t, db, small, "companies", enrich.ObjectCompany)
	start := clk.Now()
	for i := range 25 {
		mustWatch(t, db, newCompanyWatch(big, bigLoop.ID, fmt.Sprintf("b%d.com", i), start.Add(time.Duration(i)*time.Second)))
	}
	for i := range 3 {
		// Due after every one of big's.
		mustWatch(t, db, newCompanyWatch(small, smallLoop.ID, fmt.Sprintf("s%d.com", i), start.Add(time.Minute+time.Duration(i)*time.Second)))
	}
	clk.Add(time.Hour)
	due, err := db.DueWatches(ctx, clk.Now(), 200, 10)
	is.NoErr(err)
	is.Equal(len(due), 13)
	perOrg := map[string]int{}
	var last time.Time
	for _, d := range due {
		perOrg[d.Watch.OrgID]++
		is.True(!d.Watch.NextRunAt.Before(last)) // oldest due first
		last = *d.Watch.NextRunAt
	}
	is.Equal(perOrg[big], 10)
	is.Equal(perOrg[small], 3)
	is.Equal(*due[0].Watch.NextRunAt, start) // big's oldest
	due, err = db.DueWatches(ctx, clk.Now(), 4, 10)
	is.NoErr(err)
	is.Equal(len(due), 4)
	for _, d := range due {
		is.Equal(d.Watch.OrgID, big)
	}
}

// settlePerson claims the next task and settles it as a worker does: with person (a
// Person's JSON) fetched from the source, or served from the store when !fetched.
func settlePerson(t *testing.T, db *store.DB, person string, fetched bool) string {
	t.Helper()
	ctx := context.Background()
	c, err := db.ClaimTask(ctx, time.Minute)
	if err != nil || c == nil {
		t.Fatal(c, err)
	}
	var p enrich.Person
	if err := json.Unmarshal([]byte(person), &p); err != nil {
		t.Fatal(err)
	}
	p.NetworkURL = &c.Input.Target
	if ok, err := db.Settle(ctx, c, store.Outcome{Result: &enrich.Result{Person: &p}, Fetched: fetched}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	return c.TaskID
}

func failTask(t *testing.T, db *store.DB, code string) string {
	t.Helper()
	ctx := context.Background()
	c, err := db.ClaimTask(ctx, time.Minute)
	if err != nil || c == nil {
		t.Fatal(c, err)
	}
	if ok, err := db.Settle(ctx, c, store.Outcome{Err: &enrich.TaskError{Code: code, Message: "x"}}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	return c.TaskID
}

// testSettleAppliesWatchSettled: the first run of a watch sets its baseline and sends
// nothing; a changed employer sends exactly one person.job_changed with the diff; a
// stored record served in place of a fresh one changes nothing; two not_found in a
// row pause the watch. Every run is charged like any task.
func testSettleAppliesWatchSettled(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 100, nil)
	is.NoErr(err)
	loop := newLoop(t, db, org, "people", enrich.ObjectPerson)
	w := mustWatch(t, db, newPersonWatch(org, loop.ID, "jane", clk.Now()))
	const (
		atAcme   = `{"full_name":"Jane Doe","positions":[{"company_name":"Acme","company_network_url":"https://network.example/company/acme","title":"Engineer","is_current":true,"start_date":"2021-03-01"}]}`
		atGlobex = `{"full_name":"Jane Doe","positions":[{"company_name":"Globex","company_network_url":"https://network.example/company/globex","title":"CTO","is_current":true,"start_date":"2026-10-01"},{"company_name":"Acme","company_network_url":"https://network.example/company/acme","title":"Engineer","is_current":false,"start_date":"2021-03-01","end_date":"2026-09-01"}]}`
	)
	raw := env.Raw()
	baseline := func() string {
		var b *string
		is.NoErr(raw.QueryRow(`SELECT baseline FROM watches WHERE id = ?`, w.ID).Scan(&b))
		if b == nil {
			return ""
		}
		return *b
	}

	// The first run: the baseline, no event.
	first, err := db.CreateTask(ctx, store.BySystem, watchTask(w))
	is.NoErr(err)
	is.Equal(first.Task.Status, store.StatusQueued) // never a store hit
	is.Equal(*first.Task.WatchID, w.ID)
	is.Equal(first.Task.LoopID, nil)
	settlePerson(t, db, atAcme, true)
	is.True(strings.Contains(baseline(), `"Acme"`))
	ds, err := db.TaskDeliveries(ctx, org, first.Task.ID)
	is.NoErr(err)
	is.Equal(len(ds), 0)
	task, err := db.GetTask(ctx, org, first.Task.ID)
	is.NoErr(err)
	is.Equal(*task.WatchID, w.ID)

	// The same person again: nothing sent.
	clk.Add(30 * 24 * time.Hour)
	same, err := db.CreateTask(ctx, store.BySystem, watchTask(w))
	is.NoErr(err)
	settlePerson(t, db, atAcme, true)
	ds, err = db.TaskDeliveries(ctx, org, same.Task.ID)
	is.NoErr(err)
	is.Equal(len(ds), 0)

	// A stored record served because the source failed is no new reading.
	served, err := db.CreateTask(ctx, store.BySystem, watchTask(w))
	is.NoErr(err)
	settlePerson(t, db, atGlobex, false)
	is.True(!strings.Contains(baseline(), `"Globex"`))
	ds, err = db.TaskDeliveries(ctx, org, served.Task.ID)
	is.NoErr(err)
	is.Equal(len(ds), 0)

	// A new employer: exactly one person.job_changed, with the diff.
	moved, err := db.CreateTask(ctx, store.BySystem, watchTask(w))
	is.NoErr(err)
	settlePerson(t, db, atGlobex, true)
	ds, err = db.TaskDeliveries(ctx, org, moved.Task.ID)
	is.NoErr(err)
	is.Equal(len(ds), 1)
	is.Equal(ds[0].Event, store.EventJobChanged)
	is.Equal(ds[0].LoopID, loop.ID)
	is.True(strings.Contains(baseline(), `"Globex"`))
	_, payload, err := db.GetDelivery(ctx, org, ds[0].ID)
	is.NoErr(err)
	var body struct {
		Event string `json:"event"`
		Watch struct {
			ID     string `json:"id"`
			LoopID string `json:"loop_id"`
		} `json:"watch"`
		Task struct {
			ID      string `json:"id"`
			WatchID string `json:"watch_id"`
			Status  string `json:"status"`
		} `json:"task"`
		Changes []watch.Change `json:"changes"`
		Data    struct {
			FullName string `json:"full_name"`
		} `json:"data"`
	}
	is.NoErr(json.Unmarshal(payload, &body))
	var fromTo struct{ From, To *watch.Employer }
	is.NoErr(json.Unmarshal(payload, &fromTo))
	is.Equal(body.Event, store.EventJobChanged)
	is.Equal(body.Watch.ID, w.ID)
	is.Equal(body.Watch.LoopID, loop.ID)
	is.Equal(body.Task.ID, moved.Task.ID)
	is.Equal(body.Task.WatchID, w.ID)
	is.Equal(body.Task.Status, store.StatusSucceeded)
	is.Equal(*fromTo.From.CompanyName, "Acme")
	is.Equal(*fromTo.To.CompanyName, "Globex")
	is.Equal(*fromTo.To.Title, "CTO")
	is.Equal(body.Data.FullName, "Jane Doe")
	paths := []string{}
	for _, c := range body.Changes {
		paths = append(paths, c.Path)
	}
	is.Equal(paths, []string{
		"positions[https://network.example/company/acme@2021-03-01].end_date",
		"positions[https://network.example/company/acme@2021-03-01].is_current",
		"positions[https://network.example/company/globex@2026-10-01]",
	})

	// A failure that is not not_found changes nothing; two not_found in a row pause.
	for _, code := range []string{enrich.CodeProviderUnavailable, enrich.CodeNotFound} {
		_, err = db.CreateTask(ctx, store.BySystem, watchTask(w))
		is.NoErr(err)
		failTask(t, db, code)
	}
	got, err := db.GetWatch(ctx, org, w.ID)
	is.NoErr(err)
	is.Equal(got.PausedReason, nil)
	is.Equal(got.NotFoundStreak, 1)
	is.True(got.NextRunAt != nil)
	_, err = db.CreateTask(ctx, store.BySystem, watchTask(w))
	is.NoErr(err)
	failTask(t, db, enrich.CodeNotFound)
	got, err = db.GetWatch(ctx, org, w.ID)
	is.NoErr(err)
	is.Equal(*got.PausedReason, store.PausedNotFound)
	is.Equal(got.NotFoundStreak, 2)
	is.Equal(got.NextRunAt, nil)
	is.True(strings.Contains(baseline(), `"Globex"`)) // a failure keeps what was kept
	// Resuming clears the pause and the streak.
	enabled, next := true, clk.Now().Add(time.Minute)
	got, err = db.UpdateWatch(ctx, org, w.ID, store.WatchPatch{Enabled: &enabled, NextRunAt: &next})
	is.NoErr(err)
	is.Equal(got.PausedReason, nil)
	is.Equal(got.NotFoundStreak, 0)
	is.Equal(*got.NextRunAt, next)

	// Every run was charged: 1 + 1 + 1 + 1 + 3 failures refunded.
	b, err := db.CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(b.Charged, int64(7))
	is.Equal(b.Refund, int64(3))
	is.Equal(b.Balance, int64(96))
}

// testNotifyUnchangedAndDeletedWatches: a watch that asks for it is told of an
// unchanged result; a company's changed field sends record.changed; a task whose watch
// was deleted settles as any task and sends nothing.
func testNotifyUnchangedAndDeletedWatches(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 100, nil)
	is.NoErr(err)
	loop := newLoop(t, db, org, "companies", enrich.ObjectCompany)
	nw := newCompanyWatch(org, loop.ID, "acme.com", clk.Now())
	nw.NotifyUnchanged = true
	w := mustWatch(t, db, nw)
	settle := func(name string) []*store.Delivery {
		t.Helper()
		created, err := db.CreateTask(ctx, store.BySystem, watchTask(w))
		is.NoErr(err)
		SettleCompany(t, db, name)
		ds, err := db.TaskDeliveries(ctx, org, created.Task.ID)
		is.NoErr(err)
		return ds
	}
	is.Equal(len(settle("Acme")), 0) // the baseline
	ds := settle("Acme")
	is.Equal(len(ds), 1)
	is.Equal(ds[0].Event, store.EventRecordUnchanged)
	ds = settle("Acme Inc")
	is.Equal(len(ds), 1)
	is.Equal(ds[0].Event, store.EventRecordChanged)
	_, payload, err := db.GetDelivery(ctx, org, ds[0].ID)
	is.NoErr(err)
	var body struct{ Changes []watch.Change }
	is.NoErr(json.Unmarshal(payload, &body))
	is.Equal(len(body.Changes), 1)
	is.Equal(body.Changes[0].Path, "name")
	is.Equal(string(body.Changes[0].Before), `"Acme"`)
	is.Equal(string(body.Changes[0].After), `"Acme Inc"`)

	created, err := db.CreateTask(ctx, store.BySystem, watchTask(w))
	is.NoErr(err)
	is.NoErr(db.DeleteWatch(ctx, org, w.ID))
	SettleCompany(t, db, "Globex")
	task, err := db.GetTask(ctx, org, created.Task.ID)
	is.NoErr(err)
	is.Equal(task.Status, store.StatusSucceeded)
	is.Equal(*task.WatchID, w.ID) // a deleted watch leaves its tasks
	ds, err = db.TaskDeliveries(ctx, org, created.Task.ID)
	is.NoErr(err)
	is.Equal(len(ds), 0)
}

// testWatchSpendCountsWatchTasksOnly: the month's spend is what the organization's
// watch tasks created this UTC month were charged, refunds deducted; other tasks, and
// last month's, do not count. The cap is the organization's, set by name, and comes
// with every due watch.
func testWatchSpendCountsWatchTasksOnly(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org, other := NewOrg(t, db, "acme"), NewOrg(t, db, "other")
	for _, name := range []string{"acme", "other"} {
		_, err := db.GrantCredits(ctx, name, 1000, nil)
		is.NoErr(err)
	}
	loop := newLoop(t, db, org, "companies", enrich.ObjectCompany)
	people := newLoop(t, db, org, "people", enrich.ObjectPerson)
	otherLoop := newLoop(t, db, other, "companies", enrich.ObjectCompany)
	company := mustWatch(t, db, newCompanyWatch(org, loop.ID, "acme.com", clk.Now()))
	nw := newPersonWatch(org, people.ID, "jane", clk.Now())
	nw.Input, nw.RawInput = enrich.Input{Lookup: enrich.LookupEmail, Target: "jane@acme.com"}, json.RawMessage(`{"email":"jane@acme.com"}`)
	person := mustWatch(t, db, nw)
	theirs := mustWatch(t, db, newCompanyWatch(other, otherLoop.ID, "acme.com", clk.Now()))

	month := watch.MonthStart(clk.Now())
	spent, limit, err := db.WatchSpend(ctx, org, month)
	is.NoErr(err)
	is.Equal(spent, int64(0))
	is.Equal(limit, nil)

	for _, nt := range []store.NewTask{watchTask(company), watchTask(person), watchTask(theirs), NewTask(org, "plain.com")} {
		_, err := db.CreateTask(ctx, store.BySystem, nt)
		is.NoErr(err)
	}
	// A refunded watch task costs nothing.
	refunded, err := db.CreateTask(ctx, store.BySystem, watchTask(company))
	is.NoErr(err)
	_, err = db.CancelTask(ctx, org, refunded.Task.ID)
	is.NoErr(err)
	spent, _, err = db.WatchSpend(ctx, org, month)
	is.NoErr(err)
	is.Equal(spent, int64(1+3)) // a company and an email lookup; not the plain task, not the other org's
	spent, _, err = db.WatchSpend(ctx, other, month)
	is.NoErr(err)
	is.Equal(spent, int64(1))

	capped := int64(10)
	is.NoErr(db.SetWatchCap(ctx, "acme", &capped))
	_, limit, err = db.WatchSpend(ctx, org, month)
	is.NoErr(err)
	is.Equal(*limit, int64(10))
	due, err := db.DueWatches(ctx, clk.Now(), 100, 100)
	is.NoErr(err)
	is.Equal(len(due), 3)
	for _, d := range due {
		switch d.Watch.OrgID {
		case org:
			is.Equal(d.MonthSpend, int64(4))
			is.Equal(*d.MonthlyCap, int64(10))
		case other:
			is.Equal(d.MonthSpend, int64(1))
			is.Equal(d.MonthlyCap, nil)
		}
	}
	// Held by the cap: the watch waits where DeferWatch puts it, nothing else changes.
	next := watch.NextMonth(company.ID, clk.Now())
	is.NoErr(db.DeferWatch(ctx, org, company.ID, next))
	w, err := db.GetWatch(ctx, org, company.ID)
	is.NoErr(err)
	is.Equal(*w.NextRunAt, next)
	is.Equal(w.LastRunAt, nil)

	// Next month starts from nothing.
	clk.Add(31 * 24 * time.Hour)
	spent, _, err = db.WatchSpend(ctx, org, watch.MonthStart(clk.Now()))
	is.NoErr(err)
	is.Equal(spent, int64(0))

	is.NoErr(db.SetWatchCap(ctx, "acme", nil))
	_, limit, err = db.WatchSpend(ctx, org, month)
	is.NoErr(err)
	is.Equal(limit, nil)
	negative := int64(-1)
	is.Equal(enrich.KindOf(db.SetWatchCap(ctx, "acme", &negative)), enrich.KindInvalid)
	is.Equal(enrich.KindOf(db.SetWatchCap(ctx, "nobody", &capped)), enrich.KindNotFound)
}

// testDeletingALoopDeletesItsWatches: a Loop's watches go with it; their tasks stay.
func testDeletingALoopDeletesItsWatches(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 10, nil)
	is.NoErr(err)
	doomed := newLoop(t, db, org, "doomed", enrich.ObjectCompany)
	kept := newLoop(t, db, org, "kept", enrich.ObjectCompany)
	gone := mustWatch(t, db, newCompanyWatch(org, doomed.ID, "acme.com", clk.Now()))
	stays := mustWatch(t, db, newCompanyWatch(org, kept.ID, "acme.com", clk.Now()))
	created, err := db.CreateTask(ctx, store.BySystem, watchTask(gone))
	is.NoErr(err)

	is.NoErr(db.DeleteLoop(ctx, org, doomed.ID))
	_, err = db.GetWatch(ctx, org, gone.ID)
	is.Equal(enrich.KindOf(err), enrich.KindNotFound)
	_, err = db.GetWatch(ctx, org, stays.ID)
	is.NoErr(err)
	task, err := db.GetTask(ctx, org, created.Task.ID)
	is.NoErr(err)
	is.Equal(*task.WatchID, gone.ID)
	due, err := db.DueWatches(ctx, clk.Now(), 100, 100)
	is.NoErr(err)
	is.Equal(len(due), 1)
	is.Equal(due[0].Watch.ID, stays.ID)
}

// A watch claimed and never recorded (the process stopped between the check's task
// and WatchScheduled, or the check was refused) is handed out again WatchRetry later
// with the due time of its first claim, not the retry's: the check's key names that
// time, so the same task is found again, and the next run is planned from it. Once
// recorded, the next claim has the next due time.
func testAClaimNeverRecordedKeepsItsDueTime(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	loop := newLoop(t, db, org, "companies", enrich.ObjectCompany)
	due := clk.Now().Add(time.Minute)
	w := mustWatch(t, db, newCompanyWatch(org, loop.ID, "acme.com", due))

	clk.Add(2 * time.Minute)
	first, err := db.DueWatches(ctx, clk.Now(), 10, 10)
	is.NoErr(err)
	is.Equal(len(first), 1)
	is.Equal(*first[0].Watch.NextRunAt, due)

	for range 2 { // stopped, then refused: each retry is the same due time
		clk.Add(store.WatchRetry + time.Second)
		again, err := db.DueWatches(ctx, clk.Now(), 10, 10)
		is.NoErr(err)
		is.Equal(len(again), 1)
		is.Equal(again[0].Watch.ID, w.ID)
		is.Equal(*again[0].Watch.NextRunAt, due)
	}

	next := due.Add(30 * 24 * time.Hour)
	is.NoErr(db.WatchScheduled(ctx, org, w.ID, "task", clk.Now(), next))
	clk.Add(next.Add(time.Second).Sub(clk.Now()))
	later, err := db.DueWatches(ctx, clk.Now(), 10, 10)
	is.NoErr(err)
	is.Equal(len(later), 1)
	is.Equal(*later[0].Watch.NextRunAt, next) // recorded: the claim starts from the new due time
}
