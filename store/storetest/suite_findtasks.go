package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/matryer/is"
)

// testFindTasksEveryFilterAndPage walks every combination of filters page by page,
// pages ending inside runs of tasks created the same millisecond, and compares the
// concatenated pages with the organization's whole list filtered here.
func testFindTasksEveryFilterAndPage(t *testing.T, env *Env) {
	ctx := context.Background()
	v := seedVariety(t, env)
	all, total, err := v.db.ListTasks(ctx, v.org, "", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if int(total) != v.tasks || len(all) != v.tasks {
		t.Fatalf("ListTasks gave %d of %d tasks; want %d", len(all), total, v.tasks)
	}
	seen := map[string]bool{}
	for _, task := range all {
		seen[task.Status] = true
	}
	for _, s := range []string{store.StatusQueued, store.StatusRunning, store.StatusSucceeded, store.StatusFailed, store.StatusCanceled} {
		if !seen[s] {
			t.Fatalf("the fixture has no %s task", s)
		}
	}

	from, to := v.start.Add(5*time.Second), v.start.Add(12*time.Second)
	windows := []struct{ from, to time.Time }{{}, {from: from}, {to: to}, {from: from, to: to}}
	combos, paged, tiesSplit := 0, 0, 0
	for _, status := range []string{"", store.StatusQueued, store.StatusRunning, store.StatusSucceeded, store.StatusFailed, store.StatusCanceled} {
		for _, objectType := range []string{"", enrich.ObjectCompany, enrich.ObjectPerson} {
			for _, loop := range []string{"", v.loopCo, v.loopPe, v.otherLoop} {
				for _, w := range windows {
					for _, limit := range []int{1, 2, 7} {
						f := store.TaskFilter{Status: status, ObjectType: objectType, LoopID: loop, From: w.from, To: w.to, Limit: limit}
						var want []string
						for _, task := range all {
							if (status == "" || task.Status == status) && (objectType == "" || task.ObjectType == objectType) &&
								(loop == "" || task.LoopID != nil && *task.LoopID == loop) &&
								(w.from.IsZero() || !task.CreatedAt.Before(w.from)) && (w.to.IsZero() || task.CreatedAt.Before(w.to)) {
								want = append(want, task.ID)
							}
						}
						var got []string
						pages := 0
						for {
							page, next, err := v.db.FindTasks(ctx, v.org, f)
							if err != nil {
								t.Fatalf("%+v: %v", f, err)
							}
							pages++
							if pages > 100 {
								t.Fatalf("%+v: the pages do not end", f)
							}
							if len(page) > limit || (next != nil && len(page) != limit) || (len(page) == 0 && pages > 1) {
								t.Fatalf("%+v: page %d has %d tasks, next %v", f, pages, len(page), next)
							}
							for _, task := range page {
								if task.OrgID != v.org {
									t.Fatalf("%+v: another organization's task %s", f, task.ID)
								}
								got = append(got, task.ID)
							}
							if next == nil {
								break
							}
							// The cursor goes through a URL.
							if f.Before, err = store.ParseTaskCursor(next.String()); err != nil {
								t.Fatal(err)
							}
							if *f.Before != *next {
								t.Fatalf("cursor %v came back from %q as %v", *next, next.String(), *f.Before)
							}
							following, _, err := v.db.FindTasks(ctx, v.org, f)
							if err != nil {
								t.Fatal(err)
							}
							if len(following) > 0 && following[0].CreatedAt.Equal(next.CreatedAt) {
								tiesSplit++
							}
						}
						if strings.Join(got, ",") != strings.Join(want, ",") {
							t.Fatalf("%+v:\n got %v\nwant %v", f, got, want)
						}
						combos++
						if pages > 1 {
							paged++
						}
					}
				}
			}
		}
	}
	// The test means something only if many combinations span pages and page
	// boundaries fall between tasks created the same millisecond.
	if paged < 200 || tiesSplit < 50 {
		t.Fatalf("%d of %d combinations span pages, %d boundaries split a timestamp: the fixture is too thin", paged, combos, tiesSplit)
	}
}

func testFindTasksBoundsAndRefusals(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	org := NewOrg(t, db, "acme")
	is.NoErr(db.SeedTasks(ctx, org, 130))

	page, next, err := db.FindTasks(ctx, org, store.TaskFilter{})
	is.NoErr(err)
	is.Equal(len(page), store.DefaultTaskPage)
	is.True(next != nil)
	page, _, err = db.FindTasks(ctx, org, store.TaskFilter{Limit: 1000})
	is.NoErr(err)
	is.Equal(len(page), store.MaxTaskPage) // a larger page is cut to the most
	page, _, err = db.FindTasks(ctx, org, store.TaskFilter{Limit: -3})
	is.NoErr(err)
	is.Equal(len(page), store.DefaultTaskPage)

	for _, f := range []store.TaskFilter{{Status: "done"}, {Status: "QUEUED"}, {ObjectType: "robot"}} {
		_, _, err := db.FindTasks(ctx, org, f)
		is.Equal(enrich.KindOf(err), enrich.KindInvalid)
	}
	for _, s := range []string{"", "x", "12", "_", "-5_0193a1b2-0000-7000-8000-000000000000", "12_not-a-uuid", "12_" + strings.Repeat("a", 200)} {
		_, err := store.ParseTaskCursor(s)
		is.Equal(enrich.KindOf(err), enrich.KindInvalid)
	}
	// Another organization sees none of these tasks, and a Loop id of any length
	// selects nothing.
	other := NewOrg(t, db, "other")
	page, next, err = db.FindTasks(ctx, other, store.TaskFilter{})
	is.NoErr(err)
	is.Equal(len(page), 0)
	is.Equal(next, nil)
	page, _, err = db.FindTasks(ctx, org, store.TaskFilter{LoopID: strings.Repeat("l", 5000)})
	is.NoErr(err)
	is.Equal(len(page), 0)
}

// variety is an organization's tasks in every status, of both types, with and without
// Loops, three to a millisecond timestamp, beside another organization's.
type variety struct {
	db                *store.DB
	org, other        string
	loopCo, loopPe    string // acme's company and person Loops
	otherLoop         string // the other organization's Loop
	start             time.Time
	settledWithLoop   string // a task of acme's that sent a delivery
	otherSettledTask  string // a task of the other organization's that sent one
	tasks, otherTasks int
}

func newPersonTask(orgID, handle string) store.NewTask {
	url := "https://network.example/in/" + handle
	raw, _ := json.Marshal(map[string]string{"profile_url": url})
	return store.NewTask{
		OrgID: orgID, Input: enrich.Input{Lookup: enrich.LookupPersonURL, Target: url}, RawInput: raw,
		TTL: 10 * time.Minute, MaxBacklog: 10000, Freshness: 30 * 24 * time.Hour,
	}
}

func newLoop(t testing.TB, db *store.DB, orgID, name, objectType string) *store.Loop {
	t.Helper()
	l, err := db.CreateLoop(context.Background(), store.NewLoop{OrgID: orgID, Name: name, ObjectType: objectType,
		WebhookURL: "https://hooks.example/" + name, Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func seedVariety(t *testing.T, env *Env) variety {
	t.Helper()
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	v := variety{db: db, org: NewOrg(t, db, "acme"), other: NewOrg(t, db, "other"), start: clk.Now()}
	for _, name := range []string{"acme", "other"} {
		if _, err := db.GrantCredits(ctx, name, 10000, nil); err != nil {
			t.Fatal(err)
		}
	}
	v.loopCo = newLoop(t, db, v.org, "companies", enrich.ObjectCompany).ID
	v.loopPe = newLoop(t, db, v.org, "people", enrich.ObjectPerson).ID
	v.otherLoop = newLoop(t, db, v.other, "theirs", enrich.ObjectCompany).ID

	create := func(org string, i int, loop func(objectType string) string) {
		t.Helper()
		nt := NewTask(org, fmt.Sprintf("d%d-%s.com", i, org[:8]))
		if i%2 == 1 {
			nt = newPersonTask(org, fmt.Sprintf("p%d-%s", i, org[:8]))
		}
		if i%3 == 0 {
			id := loop(nt.Input.Lookup.ObjectType())
			nt.LoopID = &id
		}
		if i%5 == 0 {
			nt.Fail = &enrich.TaskError{Code: "invalid_input", Message: "refused"}
		}
		e, err := db.CreateTask(ctx, store.BySystem, nt)
		if err != nil {
			t.Fatal(err)
		}
		if i%5 == 1 {
			if _, err := db.CancelTask(ctx, org, e.Task.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 60 {
		if i > 0 && i%3 == 0 {
			clk.Add(time.Second) // three tasks share each timestamp
		}
		create(v.org, i, func(objectType string) string {
			if objectType == enrich.ObjectCompany {
				return v.loopCo
			}
			return v.loopPe
		})
		v.tasks++
		if i%4 == 0 {
			create(v.other, i, func(string) string { return v.otherLoop })
			v.otherTasks++
		}
	}
	// The oldest queued tasks run; half of them settle: companies succeed, people fail.
	// Claims take turns between the organizations, so they settle in pairs.
	for i := range 24 {
		c, err := db.ClaimTask(ctx, time.Minute)
		if err != nil || c == nil {
			t.Fatal(c, err)
		}
		if i%4 >= 2 {
			continue
		}
		out := store.Outcome{Err: &enrich.TaskError{Code: "not_found", Message: "no such person"}}
		if c.Input.Lookup.ObjectType() == enrich.ObjectCompany {
			out = store.Outcome{Result: &enrich.Result{Company: &enrich.Company{Name: "Acme", EnrichmentStatus: enrich.StatusEnriched}}}
		}
		if ok, err := db.Settle(ctx, c, out); err != nil || !ok {
			t.Fatal(ok, err)
		}
		task, err := db.GetTask(ctx, c.OrgID, c.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if task.LoopID != nil && c.OrgID == v.org {
			v.settledWithLoop = task.ID
		}
		if task.LoopID != nil && c.OrgID == v.other {
			v.otherSettledTask = task.ID
		}
	}
	if v.settledWithLoop == "" || v.otherSettledTask == "" {
		t.Fatal("the fixture settled no task with a Loop in one of the organizations")
	}
	return v
}
