package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"enrichd/enrich"
	"enrichd/store"
	"enrichd/store/storetest"

	"github.com/matryer/is"
)

// TestLoopStepsOfTasks checks, on each engine, the steps a task's operations take on
// its Loop: the check a new task naming a Loop must pass, and the event queued when
// the task settles.
func TestLoopStepsOfTasks(t *testing.T) {
	engines := map[string]func(t testing.TB) string{
		"sqlite":   func(t testing.TB) string { return filepath.Join(t.TempDir(), "enrichd.db") },
		"postgres": storetest.PostgresMigratedURL,
	}
	for name, fresh := range engines {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env := storetest.NewEnv(t, fresh(t))
			t.Run("check", func(t *testing.T) { testCheckLoopForRun(t, env.DB) })
			t.Run("deliver", func(t *testing.T) { testDeliverSettled(t, env.DB) })
		})
	}
}

func newLoop(t *testing.T, db *store.DB, orgID, name string) *store.Loop {
	t.Helper()
	l, err := db.CreateLoop(context.Background(), store.NewLoop{OrgID: orgID, Name: name, ObjectType: enrich.ObjectCompany,
		WebhookURL: "https://hooks.example/", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func testCheckLoopForRun(t *testing.T, db *store.DB) {
	is := is.New(t)
	ctx := context.Background()
	org, other := storetest.NewOrg(t, db, "check-acme"), storetest.NewOrg(t, db, "check-globex")
	loop := newLoop(t, db, org, "CRM")
	is.NoErr(db.CheckLoopForRunStep(ctx, org, loop.ID, enrich.ObjectCompany))

	err := db.CheckLoopForRunStep(ctx, org, loop.ID, enrich.ObjectPerson)
	is.Equal(enrich.KindOf(err), enrich.KindInvalid) // another object type
	err = db.CheckLoopForRunStep(ctx, other, loop.ID, enrich.ObjectCompany)
	is.Equal(enrich.KindOf(err), enrich.KindInvalid) // another organization's Loop names none of yours
	is.Equal(err.Error(), "loop_id "+loop.ID+" names no Loop of your organization")

	off := false
	_, err = db.UpdateLoop(ctx, org, loop.ID, store.LoopPatch{Enabled: &off})
	is.NoErr(err)
	err = db.CheckLoopForRunStep(ctx, org, loop.ID, enrich.ObjectCompany)
	var e *enrich.Error
	is.True(errorsAs(err, &e))
	is.Equal(e.Code, "loop_disabled")
}

func testDeliverSettled(t *testing.T, db *store.DB) {
	is := is.New(t)
	ctx := context.Background()
	org := storetest.NewOrg(t, db, "deliver-acme")
	_, err := db.GrantCredits(ctx, "deliver-acme", 10, nil)
	is.NoErr(err)
	loop := newLoop(t, db, org, "CRM")
	nt := storetest.NewTask(org, "acme.com")
	nt.LoopID = &loop.ID
	enq, err := db.CreateTask(ctx, store.BySystem, nt)
	is.NoErr(err)
	task := enq.Task
	deliveries := func() []*store.Delivery {
		t.Helper()
		ds, err := db.TaskDeliveries(ctx, org, task.ID)
		is.NoErr(err)
		return ds
	}

	is.NoErr(db.DeliverSettledStep(ctx, task.ID, &loop.ID))
	is.Equal(len(deliveries()), 0) // still queued: nothing to tell

	storetest.SettleCompany(t, db, "Acme")
	settled := deliveries()
	is.Equal(len(settled), 1)
	is.NoErr(db.DeliverSettledStep(ctx, task.ID, &loop.ID))
	again := deliveries()
	is.Equal(len(again), 2)
	is.Equal(again[0].Event, store.EventTaskSucceeded)
	is.Equal(*again[0].TaskID, task.ID)
	is.Equal(again[0].Status, store.DeliveryPending)
	_, want, err := db.GetDelivery(ctx, org, settled[0].ID)
	is.NoErr(err)
	_, got, err := db.GetDelivery(ctx, org, again[0].ID)
	is.NoErr(err)
	is.Equal(string(got), string(want)) // the same event as Settle queued

	is.NoErr(db.DeliverSettledStep(ctx, task.ID, nil)) // no Loop named: nothing read, nothing sent
	is.Equal(len(deliveries()), 2)

	is.NoErr(db.DeleteLoop(ctx, org, loop.ID))
	is.NoErr(db.DeliverSettledStep(ctx, task.ID, &loop.ID)) // the Loop is gone: nothing sent
	is.Equal(len(deliveries()), 0)
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }
