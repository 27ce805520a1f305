package store_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"
	"enrichd/store/storetest"

	"github.com/matryer/is"
)

// eachEngine runs test on a fresh SQLite file and a fresh PostgreSQL database.
func eachEngine(t *testing.T, test func(t *testing.T, env *storetest.Env)) {
	t.Run("sqlite", func(t *testing.T) {
		test(t, storetest.NewEnv(t, filepath.Join(t.TempDir(), "enrichd.db")))
	})
	t.Run("postgres", func(t *testing.T) { test(t, storetest.NewEnv(t, storetest.PostgresMigratedURL(t))) })
}

// The step a watch task's Settle takes on its watch: the first fresh result is the
// baseline and sends nothing, a changed one sends record.changed and becomes the
// baseline, two not_found in a row pause the watch, and a deleted watch is left alone.
// Its tasks here have no watch_id, so that Settle leaves the watch to the step.
func TestSettleWatchStep(t *testing.T) {
	eachEngine(t, func(t *testing.T, env *storetest.Env) {
		is := is.New(t)
		ctx := context.Background()
		db := env.DB
		org := storetest.NewOrg(t, db, "acme")
		_, err := db.GrantCredits(ctx, "acme", 100, nil)
		is.NoErr(err)
		loop, err := db.CreateLoop(ctx, store.NewLoop{OrgID: org, Name: "crm", ObjectType: enrich.ObjectCompany,
			WebhookURL: "https://example.com/hook", Enabled: true})
		is.NoErr(err)
		w, err := db.CreateWatch(ctx, store.BySystem, store.NewWatch{OrgID: org, ObjectType: enrich.ObjectCompany,
			Input: enrich.Input{Lookup: enrich.LookupDomain, Target: "stripe.com"}, RawInput: json.RawMessage(`{"domain":"stripe.com"}`),
			LoopID: loop.ID, EveryDays: 30, Enabled: true, FirstRunAt: env.Clock.Now()})
		is.NoErr(err)
		run := func(settle func()) string {
			nt := storetest.NewTask(org, "stripe.com")
			nt.Freshness = 0
			e, err := db.CreateTask(ctx, store.BySystem, nt)
			is.NoErr(err)
			settle()
			return e.Task.ID
		}
		deliveries := func(taskID string) []*store.Delivery {
			ds, err := db.TaskDeliveries(ctx, org, taskID)
			is.NoErr(err)
			return ds
		}

		first := run(func() { storetest.SettleCompany(t, db, "Stripe") })
		is.NoErr(store.SettleWatch(ctx, db, first, w.ID, true))
		got, err := db.GetWatch(ctx, org, w.ID)
		is.NoErr(err)
		is.True(strings.Contains(string(got.Baseline), `"Stripe"`))
		is.Equal(len(deliveries(first)), 0)

		changed := run(func() { storetest.SettleCompany(t, db, "Stripe, Inc.") })
		is.NoErr(store.SettleWatch(ctx, db, changed, w.ID, true))
		ds := deliveries(changed)
		is.Equal(len(ds), 1)
		is.Equal(ds[0].Event, store.EventRecordChanged)
		got, err = db.GetWatch(ctx, org, w.ID)
		is.NoErr(err)
		is.True(strings.Contains(string(got.Baseline), `"Stripe, Inc."`))

		for i := range 2 {
			env.Clock.Add(time.Minute)
			gone := run(func() {
				c, err := db.ClaimTask(ctx, time.Minute)
				is.NoErr(err)
				ok, err := db.Settle(ctx, c, store.Outcome{Err: &enrich.TaskError{Code: enrich.CodeNotFound, Message: "x"}})
				is.NoErr(err)
				is.True(ok)
			})
			is.NoErr(store.SettleWatch(ctx, db, gone, w.ID, true))
			got, err = db.GetWatch(ctx, org, w.ID)
			is.NoErr(err)
			is.Equal(got.NotFoundStreak, i+1)
		}
		is.Equal(*got.PausedReason, store.PausedNotFound)
		is.Equal(got.NextRunAt, nil) // not due until it is enabled again
		is.Equal(got.UpdatedAt, env.Clock.Now().UTC().Truncate(time.Millisecond))

		is.NoErr(db.DeleteWatch(ctx, org, w.ID))
		is.NoErr(store.SettleWatch(ctx, db, changed, w.ID, true)) // nothing left to tell
	})
}

// The step a batch row's CreateTask takes: the row gets the task, once.
func TestLinkBatchRowStep(t *testing.T) {
	eachEngine(t, func(t *testing.T, env *storetest.Env) {
		is := is.New(t)
		ctx := context.Background()
		db := env.DB
		org := storetest.NewOrg(t, db, "acme")
		_, err := db.GrantCredits(ctx, "acme", 100, nil)
		is.NoErr(err)
		b, _, err := db.CreateBatch(ctx, store.BySystem, store.NewBatch{OrgID: org, ObjectType: enrich.ObjectCompany, Name: "list",
			Columns: []string{"domain"}, CreditsEstimate: 2, Rows: []store.NewBatchRow{
				{Values: []string{"a.com"}, Request: json.RawMessage(`{"domain":"a.com"}`)},
				{Values: []string{"b.com"}, Request: json.RawMessage(`{"domain":"b.com"}`)},
			}})
		is.NoErr(err)
		var tasks []string
		for _, domain := range []string{"b.com", "c.com"} {
			e, err := db.CreateTask(ctx, store.BySystem, storetest.NewTask(org, domain))
			is.NoErr(err)
			tasks = append(tasks, e.Task.ID)
		}
		is.NoErr(store.LinkBatchRow(ctx, db, &store.BatchRowRef{BatchID: b.ID, Row: 2}, tasks[0]))
		is.NoErr(store.LinkBatchRow(ctx, db, &store.BatchRowRef{BatchID: b.ID, Row: 2}, tasks[1])) // taken: kept
		rows, err := db.BatchResults(ctx, org, b.ID, 0, 10)
		is.NoErr(err)
		is.Equal(len(rows), 2)
		is.Equal(rows[0].Task, nil)
		is.Equal(rows[1].Task.ID, tasks[0])
		pending, err := db.PendingBatchRows(ctx, 10, 10)
		is.NoErr(err)
		is.Equal(len(pending), 1)
		is.Equal(pending[0].Row, 1)
	})
}
