package server_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"enrichd/server"

	"github.com/matryer/is"
)

func TestAnotherOrganizationCannotSeeListOrCancelTasks(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	mine := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"}).str("task.id")
	other, _ := e.newOrg("other", 10)
	as := []string{"Authorization", "Bearer " + other}

	for _, r := range []*response{
		e.do("GET", "/v1/tasks/"+mine, nil, as...),
		e.do("POST", "/v1/tasks/"+mine+"/cancel", nil, as...),
		e.do("GET", "/v1/tasks/0195f3a2-6b1c-7cde-8f00-123456789abc", nil), // does not exist: the same answer
		e.do("GET", "/v1/tasks/not-a-uuid", nil),
	} {
		is.Equal(r.status, http.StatusNotFound)
		is.Equal(r.body, map[string]any{"error": "task not found", "code": "not_found"})
	}
	list := e.do("GET", "/v1/tasks", nil, as...)
	is.Equal(list.status, 200)
	is.Equal(list.get("total"), 0.0)
	is.Equal(list.get("data"), []any{})

	// The owner's task is untouched and was not refunded.
	is.Equal(e.do("GET", "/v1/tasks/"+mine, nil).str("task.status"), "queued")
	is.Equal(e.balance("acme").Balance, int64(99))
}

func TestListTasks(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	var ids []string
	for i := range 7 {
		ids = append(ids, e.do("POST", "/v1/companies/enrich", map[string]string{"domain": fmt.Sprintf("c%d.com", i)}).str("task.id"))
		e.clock.Add(time.Millisecond)
	}
	is.Equal(e.do("POST", "/v1/tasks/"+ids[1]+"/cancel", nil).status, 200)
	is.Equal(e.do("POST", "/v1/tasks/"+ids[4]+"/cancel", nil).status, 200)

	all := e.do("GET", "/v1/tasks", nil)
	is.Equal(all.get("total"), 7.0)
	data := all.get("data").([]any)
	is.Equal(len(data), 7)
	for i, task := range data { // newest first
		is.Equal(task.(map[string]any)["id"], ids[6-i])
	}
	page := e.do("GET", "/v1/tasks?page=1&pageSize=3", nil)
	is.Equal(page.get("total"), 7.0)
	got := page.get("data").([]any)
	is.Equal(len(got), 3)
	is.Equal(got[0].(map[string]any)["id"], ids[3])
	is.Equal(len(e.do("GET", "/v1/tasks?page=2&pageSize=3", nil).get("data").([]any)), 1)
	is.Equal(len(e.do("GET", "/v1/tasks?page=9", nil).get("data").([]any)), 0)

	canceled := e.do("GET", "/v1/tasks?status=canceled", nil)
	is.Equal(canceled.get("total"), 2.0)
	is.Equal(canceled.get("data").([]any)[0].(map[string]any)["id"], ids[4])
	is.Equal(e.do("GET", "/v1/tasks?status=queued&pageSize=1", nil).get("total"), 5.0)
	is.Equal(e.do("GET", "/v1/tasks?status=succeeded", nil).get("total"), 0.0)

	for _, q := range []string{"page=-1", "page=x", "page=", "page=+1", "pageSize=0", "pageSize=101", "pageSize=2.5", "pageSize=", "status=done", "status="} {
		r := e.do("GET", "/v1/tasks?"+q, nil)
		is.Equal(r.status, http.StatusBadRequest)
		is.True(r.str("error") != "")
	}
	is.Equal(len(e.do("GET", "/v1/tasks?pageSize=100", nil).get("data").([]any)), 7)
}

func TestCancelAQueuedTask(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.net.addCompany(company("Acme", "acme.com"))
	id := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"}).str("task.id")
	r := e.do("POST", "/v1/tasks/"+id+"/cancel", nil)
	is.Equal(r.status, 200)
	is.Equal(r.str("task.status"), "canceled")
	is.True(r.str("task.finished_at") != "")
	is.Equal(e.balance("acme").Balance, int64(100))

	again := e.do("POST", "/v1/tasks/"+id+"/cancel", nil)
	is.Equal(again.status, http.StatusConflict)
	is.Equal(again.str("code"), "task_settled")

	e.startWorkers() // a canceled task is never worked on
	e.waitSettled(e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "other.com"}).str("task.id"))
	got := e.do("GET", "/v1/tasks/"+id, nil)
	is.Equal(got.str("task.status"), "canceled")
	is.True(!got.has("data") && !got.has("error"))
	is.Equal(e.balance("acme").Refund, int64(2)) // this one and the miss, once each
}

func TestCancelARunningTaskDiscardsItsLateResult(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.net.addCompany(company("Acme", "acme.com"))
	release := e.net.hold()
	defer release()
	e.startWorkers()
	id := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"}).str("task.id")
	waitFor(t, func() bool { return e.do("GET", "/v1/tasks/"+id, nil).str("task.status") == "running" })

	r := e.do("POST", "/v1/tasks/"+id+"/cancel", nil)
	is.Equal(r.status, 200)
	is.Equal(r.str("task.status"), "canceled")
	release()
	e.waitSettled(e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"}).str("task.id"))

	got := e.do("GET", "/v1/tasks/"+id, nil)
	is.Equal(got.str("task.status"), "canceled")
	is.True(!got.has("data"))
	b := e.balance("acme")
	is.Equal(b.Charged, int64(2))
	is.Equal(b.Refund, int64(1))
}

func TestATaskPastItsLifetimeFailsAsTimedOut(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, func(c *server.Config) { c.TaskTTL = time.Hour })
	e.net.addCompany(company("Acme", "acme.com"))
	release := e.net.hold()
	defer release()
	e.startWorkers()
	running := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"}).str("task.id")
	waitFor(t, func() bool { return e.do("GET", "/v1/tasks/"+running, nil).str("task.status") == "running" })
	e.clock.Add(61 * time.Minute)

	done := e.waitSettled(running)
	is.Equal(done.str("task.status"), "failed")
	is.Equal(done.str("error.code"), "timed_out")
	release()
	is.Equal(e.balance("acme").Balance, int64(100))
	is.Equal(e.balance("acme").Refund, int64(1))
}

func TestAQueuedTaskPastItsLifetimeFailsAsTimedOut(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, func(c *server.Config) { c.TaskTTL = time.Minute })
	id := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"}).str("task.id")
	r := e.do("GET", "/v1/tasks/"+id, nil)
	created, _ := time.Parse(time.RFC3339, r.str("task.created_at"))
	expires, _ := time.Parse(time.RFC3339, r.str("task.expires_at"))
	is.Equal(expires.Sub(created), time.Minute)

	e.clock.Add(2 * time.Minute)
	e.startWorkers()
	done := e.waitSettled(id)
	is.Equal(done.str("error.code"), "timed_out")
	is.Equal(e.balance("acme").Balance, int64(100))
}

// TestEveryAcceptedTaskSettlesOnceAcrossARestart stops the service while tasks are
// queued and one is held by a worker that never finishes (as in a crash), opens the
// same database again, and checks that every task settles exactly once with the
// right ledger.
func TestEveryAcceptedTaskSettlesOnceAcrossARestart(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, func(c *server.Config) { c.Lease = time.Minute })
	const n = 12
	var ids []string
	for i := range n {
		d := fmt.Sprintf("c%d.com", i)
		e.net.addCompany(company(fmt.Sprintf("C%d", i), d))
		ids = append(ids, e.do("POST", "/v1/companies/enrich", map[string]string{"domain": d}).str("task.id"))
	}
	// A worker claims a task and the process dies before settling it.
	claim, err := e.db.ClaimTask(context.Background(), time.Minute)
	is.NoErr(err)
	is.True(claim != nil)
	e.restart()
	is.Equal(e.do("GET", "/v1/tasks/"+claim.TaskID, nil).str("task.status"), "running")

	e.clock.Add(2 * time.Minute) // the dead worker's lease runs out
	e.startWorkers()
	for _, id := range ids {
		done := e.waitSettled(id)
		is.Equal(done.str("task.status"), "succeeded")
	}
	// The dead worker cannot settle it a second time.
	ok, err := e.db.Settle(context.Background(), claim, storeOutcomeFailed())
	is.NoErr(err)
	is.True(!ok)

	b := e.balance("acme")
	is.Equal(b.Charged, int64(n))
	is.Equal(b.Refund, int64(0))
	is.Equal(b.Balance, int64(100-n))
	is.Equal(e.do("GET", "/v1/tasks?status=succeeded", nil).get("total"), float64(n))
}

func TestShutdownPutsHeldTasksBack(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.net.addCompany(company("Acme", "acme.com"))
	release := e.net.hold()
	e.startWorkers()
	id := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"}).str("task.id")
	waitFor(t, func() bool { return e.do("GET", "/v1/tasks/"+id, nil).str("task.status") == "running" })
	e.stopWorkers() // cancels the work in hand
	release()
	is.Equal(e.do("GET", "/v1/tasks/"+id, nil).str("task.status"), "queued")
	e.startWorkers()
	is.Equal(e.waitSettled(id).str("task.status"), "succeeded")
	is.Equal(e.balance("acme").Charged, int64(1))
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
