package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"enrichd/server/servertest"
	"enrichd/store"

	"github.com/matryer/is"
)

// A task whose claims keep being lost, as when the process dies each time it runs
// it, fails after store.MaxTaskAttempts claims instead of being claimed for ever:
// internal_error, refunded, and its Loop is told.
func TestATaskThatKeepsKillingItsWorkerFailsAfterBoundedAttempts(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t)
	loopID, _ := e.CreateLoop("Companies", rcv.Srv.URL, "company")
	r := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com", "loop_id": loopID})
	is.Equal(r.Status, http.StatusAccepted)
	id := r.Str("task.id")

	ctx := context.Background()
	for attempt := 1; attempt <= store.MaxTaskAttempts; attempt++ {
		// A process claims the task, then dies: its lease runs out.
		c, err := e.DB.ClaimTask(ctx, e.Cfg.Lease)
		is.NoErr(err)
		is.True(c != nil)
		is.Equal(c.TaskID, id)
		e.Clock.Add(e.Cfg.Lease + time.Second)
		if attempt == store.MaxTaskAttempts {
			break // the last lost claim is the running service's sweep to find
		}
		_, _, err = e.DB.RequeueAbandoned(ctx) // what the next start's sweep does
		is.NoErr(err)
		is.Equal(e.Do("GET", "/v1/tasks/"+id, nil).Str("task.status"), "queued")
	}
	// The service's sweep gives up on the task, counts it settled and wakes the
	// sender; its workers find nothing to claim.
	e.StartWorkers()
	done := e.WaitSettled(id)
	e.WaitMetric(`enrichd_tasks_settled_total{object_type="company",status="failed"}`, 1)
	is.True(strings.Contains(e.Logs.String(), "claim ran out too many times: the task fails"))
	is.Equal(done.Str("task.status"), "failed")
	is.Equal(done.Str("error.code"), "internal_error")
	is.True(strings.Contains(done.Str("error.message"), "started 5 times"))
	is.Equal(e.LedgerKinds(id), []string{"charge", "refund"})
	is.Equal(e.Balance("acme").Balance, int64(100))
	is.Equal(e.Net.Calls.Load(), int64(0)) // never run again

	got := rcv.Wait(t, 1)[0]
	is.Equal(got.Header.Get("X-Service-Event"), "task.failed")
	d := e.WaitDelivery(loopID, func(d map[string]any) bool { return d["status"] == "succeeded" })
	is.Equal(d["task_id"], id)
}
