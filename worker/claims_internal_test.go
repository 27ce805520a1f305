package worker

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"
	"enrichd/store/storetest"

	"github.com/matryer/is"
)

// A worker that finds tasks queued claims the next in the write that settles the one
// before (store.DB.SettleAndClaim): five tasks of a priced vendor take one claim of its
// own, five bookings and five settles, eleven writes where the claims of their own
// made sixteen. On PostgreSQL, where the settle claims nothing, each claim is a write.
func TestABusyWorkerClaimsItsNextTaskInTheSettlesWrite(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, org := openDB(t)
	_, err := db.GrantCredits(ctx, "acme", 10, nil)
	is.NoErr(err)
	var ids []string
	for _, domain := range []string{"a.com", "b.com", "c.com", "d.com", "e.com"} {
		created, err := db.CreateTask(ctx, store.BySystem, storetest.NewTask(org, domain))
		is.NoErr(err)
		ids = append(ids, created.Task.ID)
	}
	var logs bytes.Buffer
	vendor := &pricedVendor{}
	pool := New(db, Config{Workers: 1, Sources: []enrich.Source{vendor}, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})

	before, _ := db.WriteStats()
	workCtx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		pool.work(workCtx, ctx)
	}()
	for _, id := range ids {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			task, err := db.GetTask(ctx, org, id)
			is.NoErr(err)
			if task.Status == store.StatusSucceeded {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("task %s: %s after 10 s; log: %s", id, task.Status, logs.String())
			}
		}
	}
	stop()
	<-stopped
	after, _ := db.WriteStats()
	is.Equal(vendor.asked.Load(), int64(5))
	is.Equal(after-before, int64(11)) // a claim, and a booking and a settle a task
}
