package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"enrichd/store"

	"github.com/matryer/is"
)

// ledgerKinds lists the ledger rows of one task, oldest first.
func (e *env) ledgerKinds(taskID string) []string {
	e.t.Helper()
	ledger, err := e.db.CreditLedger(context.Background(), "acme")
	if err != nil {
		e.t.Fatal(err)
	}
	var kinds []string
	for _, l := range ledger {
		if l.TaskID != nil && *l.TaskID == taskID {
			kinds = append(kinds, l.Kind)
		}
	}
	return kinds
}

// A task whose claims keep being lost, as when the process dies each time it runs
// it, fails after store.MaxTaskAttempts claims instead of being claimed for ever:
// internal_error, refunded, and its Loop is told.
func TestATaskThatKeepsKillingItsWorkerFailsAfterBoundedAttempts(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	rcv := newReceiver(t)
	loopID, _ := e.createLoop("Companies", rcv.srv.URL, "company")
	r := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com", "loop_id": loopID})
	is.Equal(r.status, http.StatusAccepted)
	id := r.str("task.id")

	ctx := context.Background()
	for attempt := 1; attempt <= store.MaxTaskAttempts; attempt++ {
		// A process claims the task, then dies: its lease runs out.
		c, err := e.db.ClaimTask(ctx, e.cfg.Lease)
		is.NoErr(err)
		is.True(c != nil)
		is.Equal(c.TaskID, id)
		e.clock.Add(e.cfg.Lease + time.Second)
		if attempt == store.MaxTaskAttempts {
			break // the last lost claim is the running service's sweep to find
		}
		_, _, err = e.db.RequeueAbandoned(ctx) // what the next start's sweep does
		is.NoErr(err)
		is.Equal(e.do("GET", "/v1/tasks/"+id, nil).str("task.status"), "queued")
	}
	// The service's sweep gives up on the task, counts it settled and wakes the
	// sender; its workers find nothing to claim.
	e.startWorkers()
	done := e.waitSettled(id)
	e.waitMetric(`enrichd_tasks_settled_total{object_type="company",status="failed"}`, 1)
	is.True(strings.Contains(e.logs.String(), "claim ran out too many times: the task fails"))
	is.Equal(done.str("task.status"), "failed")
	is.Equal(done.str("error.code"), "internal_error")
	is.True(strings.Contains(done.str("error.message"), "started 5 times"))
	is.Equal(e.ledgerKinds(id), []string{"charge", "refund"})
	is.Equal(e.balance("acme").Balance, int64(100))
	is.Equal(e.net.calls.Load(), int64(0)) // never run again

	got := rcv.wait(t, 1)[0]
	is.Equal(got.header.Get("X-Service-Event"), "task.failed")
	d := e.waitDelivery(loopID, func(d map[string]any) bool { return d["status"] == "succeeded" })
	is.Equal(d["task_id"], id)
}
