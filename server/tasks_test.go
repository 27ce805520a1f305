package server_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"enrichd/server"
	"enrichd/server/servertest"

	"github.com/matryer/is"
)

func TestAnotherOrganizationCannotSeeListOrCancelTasks(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	mine := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"}).Str("task.id")
	other, _ := e.NewOrg("other", 10)
	as := []string{"Authorization", "Bearer " + other}

	for _, r := range []*servertest.Response{
		e.Do("GET", "/v1/tasks/"+mine, nil, as...),
		e.Do("POST", "/v1/tasks/"+mine+"/cancel", nil, as...),
		e.Do("GET", "/v1/tasks/0195f3a2-6b1c-7cde-8f00-123456789abc", nil), // does not exist: the same answer
		e.Do("GET", "/v1/tasks/not-a-uuid", nil),
	} {
		is.Equal(r.Status, http.StatusNotFound)
		is.Equal(r.Body, map[string]any{"error": "task not found", "code": "not_found"})
	}
	list := e.Do("GET", "/v1/tasks", nil, as...)
	is.Equal(list.Status, 200)
	is.Equal(list.Get("total"), 0.0)
	is.Equal(list.Get("data"), []any{})

	// The owner's task is untouched and was not refunded.
	is.Equal(e.Do("GET", "/v1/tasks/"+mine, nil).Str("task.status"), "queued")
	is.Equal(e.Balance("acme").Balance, int64(99))
}

func TestListTasks(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	var ids []string
	for i := range 7 {
		ids = append(ids, e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": fmt.Sprintf("c%d.com", i)}).Str("task.id"))
		e.Clock.Add(time.Millisecond)
	}
	is.Equal(e.Do("POST", "/v1/tasks/"+ids[1]+"/cancel", nil).Status, 200)
	is.Equal(e.Do("POST", "/v1/tasks/"+ids[4]+"/cancel", nil).Status, 200)

	all := e.Do("GET", "/v1/tasks", nil)
	is.Equal(all.Get("total"), 7.0)
	data := all.Get("data").([]any)
	is.Equal(len(data), 7)
	for i, task := range data { // newest first
		is.Equal(task.(map[string]any)["id"], ids[6-i])
	}
	page := e.Do("GET", "/v1/tasks?page=1&pageSize=3", nil)
	is.Equal(page.Get("total"), 7.0)
	got := page.Get("data").([]any)
	is.Equal(len(got), 3)
	is.Equal(got[0].(map[string]any)["id"], ids[3])
	is.Equal(len(e.Do("GET", "/v1/tasks?page=2&pageSize=3", nil).Get("data").([]any)), 1)
	is.Equal(len(e.Do("GET", "/v1/tasks?page=9", nil).Get("data").([]any)), 0)

	canceled := e.Do("GET", "/v1/tasks?status=canceled", nil)
	is.Equal(canceled.Get("total"), 2.0)
	is.Equal(canceled.Get("data").([]any)[0].(map[string]any)["id"], ids[4])
	is.Equal(e.Do("GET", "/v1/tasks?status=queued&pageSize=1", nil).Get("total"), 5.0)
	is.Equal(e.Do("GET", "/v1/tasks?status=succeeded", nil).Get("total"), 0.0)

	for _, q := range []string{"page=-1", "page=x", "page=", "page=+1", "pageSize=0", "pageSize=101", "pageSize=2.5", "pageSize=", "status=done", "status="} {
		r := e.Do("GET", "/v1/tasks?"+q, nil)
		is.Equal(r.Status, http.StatusBadRequest)
		is.True(r.Str("error") != "")
	}
	is.Equal(len(e.Do("GET", "/v1/tasks?pageSize=100", nil).Get("data").([]any)), 7)
}

func TestCancelAQueuedTask(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	id := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"}).Str("task.id")
	r := e.Do("POST", "/v1/tasks/"+id+"/cancel", nil)
	is.Equal(r.Status, 200)
	is.Equal(r.Str("task.status"), "canceled")
	is.True(r.Str("task.finished_at") != "")
	is.Equal(e.Balance("acme").Balance, int64(100))

	again := e.Do("POST", "/v1/tasks/"+id+"/cancel", nil)
	is.Equal(again.Status, http.StatusConflict)
	is.Equal(again.Str("code"), "task_settled")

	e.StartWorkers() // a canceled task is never worked on
	e.WaitSettled(e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "other.com"}).Str("task.id"))
	got := e.Do("GET", "/v1/tasks/"+id, nil)
	is.Equal(got.Str("task.status"), "canceled")
	is.True(!got.Has("data") && !got.Has("error"))
	is.Equal(e.Balance("acme").Refund, int64(2)) // this one and the miss, once each
}

func TestCancelARunningTaskDiscardsItsLateResult(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	release := e.Net.Hold()
	defer release()
	e.StartWorkers()
	id := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"}).Str("task.id")
	waitFor(t, func() bool { return e.Do("GET", "/v1/tasks/"+id, nil).Str("task.status") == "running" })

	r := e.Do("POST", "/v1/tasks/"+id+"/cancel", nil)
	is.Equal(r.Status, 200)
	is.Equal(r.Str("task.status"), "canceled")
	release()
	e.WaitSettled(e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"}).Str("task.id"))

	got := e.Do("GET", "/v1/tasks/"+id, nil)
	is.Equal(got.Str("task.status"), "canceled")
	is.True(!got.Has("data"))
	b := e.Balance("acme")
	is.Equal(b.Charged, int64(2))
	is.Equal(b.Refund, int64(1))
}

func TestATaskPastItsLifetimeFailsAsTimedOut(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, func(c *server.Config) { c.TaskTTL = time.Hour })
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	release := e.Net.Hold()
	defer release()
	e.StartWorkers()
	running := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"}).Str("task.id")
	waitFor(t, func() bool { return e.Do("GET", "/v1/tasks/"+running, nil).Str("task.status") == "running" })
	e.Clock.Add(61 * time.Minute)

	done := e.WaitSettled(running)
	is.Equal(done.Str("task.status"), "failed")
	is.Equal(done.Str("error.code"), "timed_out")
	release()
	is.Equal(e.Balance("acme").Balance, int64(100))
	is.Equal(e.Balance("acme").Refund, int64(1))
}

func TestAQueuedTaskPastItsLifetimeFailsAsTimedOut(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, func(c *server.Config) { c.TaskTTL = time.Minute })
	id := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"}).Str("task.id")
	r := e.Do("GET", "/v1/tasks/"+id, nil)
	created, _ := time.Parse(time.RFC3339, r.Str("task.created_at"))
	expires, _ := time.Parse(time.RFC3339, r.Str("task.expires_at"))
	is.Equal(expires.Sub(created), time.Minute)

	e.Clock.Add(2 * time.Minute)
	e.StartWorkers()
	done := e.WaitSettled(id)
	is.Equal(done.Str("error.code"), "timed_out")
	is.Equal(e.Balance("acme").Balance, int64(100))
}

// TestEveryAcceptedTaskSettlesOnceAcrossARestart stops the service while tasks are
// queued and one is held by a worker that never finishes (as in a crash), opens the
// same database again, and checks that every task settles exactly once with the
// right ledger.
func TestEveryAcceptedTaskSettlesOnceAcrossARestart(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, func(c *server.Config) { c.Lease = time.Minute })
	const n = 12
	var ids []string
	for i := range n {
		d := fmt.Sprintf("c%d.com", i)
		e.Net.AddCompany(servertest.Company(fmt.Sprintf("C%d", i), d))
		ids = append(ids, e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": d}).Str("task.id"))
	}
	// A worker claims a task and the process dies before settling it.
	claim, err := e.DB.ClaimTask(context.Background(), time.Minute)
	is.NoErr(err)
	is.True(claim != nil)
	e.Restart()
	is.Equal(e.Do("GET", "/v1/tasks/"+claim.TaskID, nil).Str("task.status"), "running")

	e.Clock.Add(2 * time.Minute) // the dead worker's lease runs out
	e.StartWorkers()
	for _, id := range ids {
		done := e.WaitSettled(id)
		is.Equal(done.Str("task.status"), "succeeded")
	}
	// The dead worker cannot settle it a second time.
	ok, err := e.DB.Settle(context.Background(), claim, servertest.StoreOutcomeFailed())
	is.NoErr(err)
	is.True(!ok)

	b := e.Balance("acme")
	is.Equal(b.Charged, int64(n))
	is.Equal(b.Refund, int64(0))
	is.Equal(b.Balance, int64(100-n))
	is.Equal(e.Do("GET", "/v1/tasks?status=succeeded", nil).Get("total"), float64(n))
}

func TestShutdownPutsHeldTasksBack(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	release := e.Net.Hold()
	e.StartWorkers()
	id := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"}).Str("task.id")
	waitFor(t, func() bool { return e.Do("GET", "/v1/tasks/"+id, nil).Str("task.status") == "running" })
	e.StopWorkers() // cancels the work in hand
	release()
	is.Equal(e.Do("GET", "/v1/tasks/"+id, nil).Str("task.status"), "queued")
	e.StartWorkers()
	is.Equal(e.WaitSettled(id).Str("task.status"), "succeeded")
	is.Equal(e.Balance("acme").Charged, int64(1))
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(servertest.SettleWithin)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
