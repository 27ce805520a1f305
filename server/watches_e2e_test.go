package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/server/servertest"
	"enrichd/store"
	"enrichd/webhook"

	"github.com/matryer/is"
)

// The watches, driven by the clock: the scheduler looks for due watches every few
// milliseconds of real time, and a watch falls due when the test moves the store's
// clock past its next_run_at.

func watchesOften(cfg *server.Config) { cfg.WatchInterval = 5 * time.Millisecond }

func person(slug, full string, positions ...enrich.Position) *enrich.Person {
	first, last, _ := strings.Cut(full, " ")
	return &enrich.Person{NetworkURL: enrich.Ptr("https://www.linkedin.com/in/" + slug), FullName: &full, FirstName: &first, LastName: &last,
		Positions: positions}
}

func position(companyName, companySlug, title, start string, current bool) enrich.Position {
	p := enrich.Position{Title: &title, CompanyName: &companyName, CompanyNetworkURL: enrich.Ptr("https://www.linkedin.com/company/" + companySlug),
		StartDate: &start, StartDatePrecision: enrich.Ptr("month"), IsCurrent: current}
	if !current {
		p.EndDate, p.EndDatePrecision = enrich.Ptr("2026-01-01"), enrich.Ptr("month")
	}
	return p
}

// TestWatchSeesAJobChange is what issue 16 is done by: a watched person changes
// employer in the source between two checks, and the Loop gets exactly one signed
// person.job_changed with the diff; the first check sets the baseline and sends
// nothing; both checks are charged; a target the source no longer finds twice pauses
// the watch, which then never runs again.
func TestWatchSeesAJobChange(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks, watchesOften)
	rcv := servertest.NewReceiver(t)
	profile := "https://www.linkedin.com/in/jane-doe"
	e.Net.AddPerson(person("jane-doe", "Jane Doe", position("Acme", "acme", "Engineer", "2020-03-01", true)))
	loopID, secret := e.CreateLoop("Job changes", rcv.Srv.URL+"/hook", "person")
	w := e.CreateWatch(map[string]any{"object_type": "person", "networkUrl": "https://linkedin.com/in/Jane-Doe/", "loop_id": loopID})
	id := w.Str("data.id")
	is.Equal(w.Get("data.input"), map[string]any{"networkUrl": profile})
	began := e.Clock.Now()
	e.StartWorkers()

	// The first check: the baseline.
	first := e.NextCheck(id)
	is.Equal(first.Str("task.status"), "succeeded")
	is.Equal(first.Str("task.watch_id"), id)
	is.Equal(first.Get("task.loop_id"), nil)
	is.Equal(first.Get("task.credits_charged"), float64(1))
	after := e.Do("GET", "/v1/watches/"+id, nil)
	is.Equal(after.Str("data.last_task_id"), first.Str("task.id"))
	is.True(after.Str("data.last_run_at") != "")
	nextRun, _ := time.Parse(time.RFC3339Nano, after.Str("data.next_run_at"))
	is.True(nextRun.Sub(e.Clock.Now()) > 29*24*time.Hour) // every 30 days

	// She moves to Globex; the same Engineer title, so the title alone is not the signal.
	e.Net.AddPerson(person("jane-doe", "Jane Doe",
		position("Globex", "globex", "Staff Engineer", "2026-02-01", true),
		position("Acme", "acme", "Engineer", "2020-03-01", false)))
	second := e.NextCheck(id)
	is.Equal(second.Str("task.status"), "succeeded")

	got := rcv.Wait(t, 1)[0]
	// Recorded as delivered before the clock moves on: a delivery whose outcome is not
	// recorded yet when its lease runs out by the moved clock is sent again, by design.
	e.WaitDelivery(loopID, func(d map[string]any) bool { return d["status"] == "succeeded" })
	t.Logf("the event: %s", got.Body)
	is.Equal(got.Header.Get("X-Service-Event"), "person.job_changed")
	// Signed with the Loop's secret at the store's clock, which the test moved.
	is.NoErr(webhook.Verify(got.Body, got.Header.Get(webhook.HeaderSignature), secret, time.Since(began)+e.Clock.Now().Sub(began)+time.Hour))
	is.True(webhook.Verify(got.Body, got.Header.Get(webhook.HeaderSignature), "whsec_wrong", 400*24*time.Hour) != nil)
	var event struct {
		Event string
		Watch struct {
			ID     string
			LoopID string `json:"loop_id"`
		}
		Task struct {
			ID      string
			WatchID string `json:"watch_id"`
		}
		Changes []struct {
			Path          string
			Before, After json.RawMessage
		}
		Data struct {
			FullName string `json:"full_name"`
		}
		From, To *struct {
			CompanyName       string `json:"company_name"`
			CompanyNetworkURL string `json:"company_network_url"`
			Title             string
		}
	}
	is.NoErr(json.Unmarshal(got.Body, &event))
	is.Equal(event.Event, "person.job_changed")
	is.Equal(event.Watch.ID, id)
	is.Equal(event.Task.ID, second.Str("task.id"))
	is.Equal(event.Task.WatchID, id)
	is.Equal(event.Data.FullName, "Jane Doe")
	is.True(event.From != nil && event.To != nil)
	is.Equal(event.From.CompanyName, "Acme")
	is.Equal(event.From.CompanyNetworkURL, "https://www.linkedin.com/company/acme")
	is.Equal(event.From.Title, "Engineer")
	is.Equal(event.To.CompanyName, "Globex")
	is.Equal(event.To.Title, "Staff Engineer")
	// The diff matches positions by identity: Acme's position is the same item, now
	// ended; Globex's is new. No change is reported by position in the array.
	paths := map[string]struct{ before, after string }{}
	for _, c := range event.Changes {
		paths[c.Path] = struct{ before, after string }{string(c.Before), string(c.After)}
		is.True(strings.HasPrefix(c.Path, "positions[")) // nothing else changed
		is.True(!strings.HasPrefix(c.Path, "positions[0]") && !strings.HasPrefix(c.Path, "positions[1]"))
	}
	var globexAdded, acmeEnded bool
	for path, c := range paths {
		if strings.Contains(path, "globex") && c.before == "null" && strings.Contains(c.after, "Staff Engineer") {
			globexAdded = true
		}
		if strings.Contains(path, "acme") && strings.HasSuffix(path, ".is_current") && c.before == "true" && c.after == "false" {
			acmeEnded = true
		}
	}
	if !globexAdded || !acmeEnded {
		t.Errorf("the diff does not show Globex added and Acme ended: %s", got.Body)
	}

	// Exactly one delivery: the baseline sent nothing.
	deliveries := e.Do("GET", "/v1/loops/"+loopID+"/deliveries", nil)
	is.Equal(deliveries.Get("total"), float64(1))
	is.Equal(deliveries.Get("data").([]any)[0].(map[string]any)["event"], "person.job_changed")
	is.Equal(deliveries.Get("data").([]any)[0].(map[string]any)["task_id"], second.Str("task.id"))

	// Both checks are in the ledger.
	ledger, err := e.DB.CreditLedger(context.Background(), "acme")
	is.NoErr(err)
	charged := map[string]int64{}
	for _, entry := range ledger {
		if entry.Kind == "charge" && entry.TaskID != nil {
			charged[*entry.TaskID] += entry.Amount
		}
	}
	is.Equal(len(charged), 2)
	is.True(charged[first.Str("task.id")] != 0 && charged[second.Str("task.id")] != 0)
	is.Equal(e.Balance("acme").Charged, int64(2))
	// The month's spend counts the checks of this UTC month: the clock moved 30 days.
	thisMonth := 1.0
	if firstAt, _ := time.Parse(time.RFC3339Nano, first.Str("task.created_at")); firstAt.Month() == e.Clock.Now().Month() {
		thisMonth = 2
	}
	is.Equal(e.Do("GET", "/v1/watches", nil).Get("meta.watch_credits_this_month"), thisMonth)

	// Her profile is gone: the first not_found is counted, the second pauses the watch.
	e.Net.RemovePerson(profile)
	third := e.NextCheck(id)
	is.Equal(third.Str("task.status"), "failed")
	is.Equal(third.Str("error.code"), "not_found")
	still := e.Do("GET", "/v1/watches/"+id, nil)
	is.Equal(still.Get("data.paused_reason"), nil)
	fourth := e.NextCheck(id)
	is.Equal(fourth.Str("error.code"), "not_found")
	paused := e.Do("GET", "/v1/watches/"+id, nil)
	is.Equal(paused.Str("data.paused_reason"), "not_found")
	is.Equal(paused.Get("data.next_run_at"), nil)
	is.Equal(paused.Str("data.last_task_id"), fourth.Str("task.id"))
	is.Equal(e.Balance("acme").Charged-e.Balance("acme").Refund, int64(2)) // the failed checks are refunded

	// A paused watch is not run again: a watch due at the same time is, in the same
	// round as the paused one would be.
	companyLoop, _ := e.CreateLoop("Companies", rcv.Srv.URL+"/hook", "company")
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	sentinel := e.CreateWatch(map[string]any{"object_type": "company", "domain": "acme.com", "loop_id": companyLoop}).Str("data.id")
	e.Clock.Add(400 * 24 * time.Hour)
	e.WaitWatch(sentinel, func(r *servertest.Response) bool { return r.Get("data.last_task_id") != nil })
	is.Equal(e.Do("GET", "/v1/watches/"+id, nil).Str("data.last_task_id"), fourth.Str("task.id"))
	is.Equal(rcv.Count(), 1) // nothing more was sent: the sentinel's first check is a baseline

	// Resuming it makes it due within the hour, and clears why it paused.
	resumed := e.Do("PATCH", "/v1/watches/"+id, map[string]any{"enabled": true})
	is.Equal(resumed.Status, http.StatusOK)
	is.Equal(resumed.Get("data.paused_reason"), nil)
	is.True(resumed.Str("data.next_run_at") != "")
}

// TestWatchMonthlyCap: an organization over its monthly cap gets no scheduled check
// (the watch waits for next month, nothing charged), while a check asked for by hand
// still runs and counts.
func TestWatchMonthlyCap(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks, watchesOften)
	// Mid-month, so that the hour the test moves through stays in one month.
	now := e.Clock.Now()
	e.Clock.Add(time.Date(now.Year(), now.Month()+1, 10, 12, 0, 0, 0, time.UTC).Sub(now))
	rcv := servertest.NewReceiver(t)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	e.Net.AddCompany(servertest.Company("Globex", "globex.com"))
	loopID, _ := e.CreateLoop("Companies", rcv.Srv.URL, "company")
	capped := e.CreateWatch(map[string]any{"object_type": "company", "domain": "acme.com", "loop_id": loopID}).Str("data.id")
	cap := int64(1)
	is.NoErr(e.DB.SetWatchCap(context.Background(), "acme", &cap))
	e.StartWorkers()

	// A check by hand reaches the cap.
	run := e.Do("POST", "/v1/watches/"+capped+"/run", nil)
	is.Equal(run.Status, http.StatusAccepted)
	is.Equal(e.WaitSettled(run.Str("task.id")).Str("task.status"), "succeeded")
	first := run.Str("task.id")
	list := e.Do("GET", "/v1/watches", nil)
	is.Equal(list.Get("meta.watch_credits_this_month"), float64(1))
	is.Equal(list.Get("meta.watch_monthly_cap"), float64(1))
	is.Equal(e.Balance("acme").Charged, int64(1))

	// Its scheduled check would pass the cap: it waits for next month, unpaid.
	w := e.Do("GET", "/v1/watches/"+capped, nil)
	next, _ := time.Parse(time.RFC3339Nano, w.Str("data.next_run_at"))
	e.Clock.Add(next.Sub(e.Clock.Now()) + time.Second)
	monthStart := time.Date(e.Clock.Now().Year(), e.Clock.Now().Month(), 1, 0, 0, 0, 0, time.UTC)
	nextMonth := monthStart.AddDate(0, 1, 0)
	deferred := e.WaitWatch(capped, func(r *servertest.Response) bool {
		at, err := time.Parse(time.RFC3339Nano, r.Str("data.next_run_at"))
		return err == nil && !at.Before(nextMonth)
	})
	at, _ := time.Parse(time.RFC3339Nano, deferred.Str("data.next_run_at"))
	is.True(at.Before(nextMonth.Add(24 * time.Hour))) // spread over the month's first day
	is.Equal(deferred.Get("data.enabled"), true)
	is.Equal(deferred.Get("data.paused_reason"), nil)
	is.Equal(e.Balance("acme").Charged, int64(1))
	tasks := e.Do("GET", "/v1/tasks", nil)
	is.Equal(tasks.Get("total"), float64(1))

	// Another organization, with no cap, is not held back.
	otherKey, _ := e.NewOrg("globex", 10)
	as := []string{"Authorization", "Bearer " + otherKey}
	theirLoop := e.Do("POST", "/v1/loops", map[string]any{"name": "Theirs", "webhook_url": rcv.Srv.URL}, as...).Str("data.id")
	theirs := e.Do("POST", "/v1/watches", map[string]any{"object_type": "company", "domain": "globex.com", "loop_id": theirLoop}, as...)
	is.Equal(theirs.Status, http.StatusCreated)
	is.Equal(e.NextCheck(theirs.Str("data.id"), as...).Str("task.status"), "succeeded")
	is.Equal(e.Balance("globex").Charged, int64(1))

	// By hand, the capped watch still runs.
	run = e.Do("POST", "/v1/watches/"+capped+"/run", nil)
	is.Equal(run.Status, http.StatusAccepted)
	is.Equal(e.WaitSettled(run.Str("task.id")).Str("task.status"), "succeeded")
	is.Equal(e.Balance("acme").Charged, int64(2))
	is.Equal(e.Do("GET", "/v1/watches", nil).Get("meta.watch_credits_this_month"), float64(2))

	// Next month the scheduled check runs.
	e.Clock.Add(at.Sub(e.Clock.Now()) + time.Second)
	e.WaitWatch(capped, func(r *servertest.Response) bool {
		id := r.Str("data.last_task_id")
		return id != "" && id != run.Str("task.id") && id != first
	})
	is.Equal(e.Balance("acme").Charged, int64(3))
}

// TestWatchRefusedCheckIsRetried: a scheduled check the ledger refuses (no credits)
// creates nothing; the watch is due again WatchRetry later, and runs once the
// organization has credits.
func TestWatchRefusedCheckIsRetried(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks, watchesOften)
	key, _ := e.NewOrg("broke", 0)
	as := []string{"Authorization", "Bearer " + key}
	rcv := servertest.NewReceiver(t)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	loopID := e.Do("POST", "/v1/loops", map[string]any{"name": "Companies", "webhook_url": rcv.Srv.URL}, as...).Str("data.id")
	w := e.Do("POST", "/v1/watches", map[string]any{"object_type": "company", "domain": "acme.com", "loop_id": loopID}, as...)
	is.Equal(w.Status, http.StatusCreated)
	id := w.Str("data.id")
	next, _ := time.Parse(time.RFC3339Nano, w.Str("data.next_run_at"))
	e.StartWorkers()

	e.Clock.Add(next.Sub(e.Clock.Now()) + time.Second)
	due := e.Clock.Now()
	retried := e.WaitWatch(id, func(r *servertest.Response) bool {
		at, err := time.Parse(time.RFC3339Nano, r.Str("data.next_run_at"))
		// The refusal is logged after the claim is made: wait for both.
		return err == nil && at.After(due) && strings.Contains(e.Logs.String(), "a watch's task was refused")
	}, as...)
	at, _ := time.Parse(time.RFC3339Nano, retried.Str("data.next_run_at"))
	is.True(!at.After(due.Add(store.WatchRetry))) // the claim's retry, not a whole interval later
	is.Equal(retried.Get("data.last_task_id"), nil)
	is.Equal(e.Do("GET", "/v1/tasks", nil, as...).Get("total"), float64(0))

	_, err := e.DB.GrantCredits(context.Background(), "broke", 10, nil)
	is.NoErr(err)
	is.Equal(e.NextCheck(id, as...).Str("task.status"), "succeeded")
	is.Equal(e.Balance("broke").Charged, int64(1))
}

// TestWatchCheckIsNotMadeTwiceForOneDueTime: a process that stops between making a
// check's task and recording it leaves the watch claimed but not rescheduled, and the
// claim's retry hands it out with the same due time (the store's
// AClaimNeverRecordedKeepsItsDueTime); a check of the same due time finds the same
// task again (its key names that time) rather than charging for a second one.
func TestWatchCheckIsNotMadeTwiceForOneDueTime(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks, watchesOften)
	key, orgID := e.NewOrg("acme", 10)
	as := []string{"Authorization", "Bearer " + key}
	rcv := servertest.NewReceiver(t)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	loopID := e.Do("POST", "/v1/loops", map[string]any{"name": "Companies", "webhook_url": rcv.Srv.URL}, as...).Str("data.id")
	w := e.Do("POST", "/v1/watches", map[string]any{"object_type": "company", "domain": "acme.com", "loop_id": loopID}, as...)
	is.Equal(w.Status, http.StatusCreated)
	id := w.Str("data.id")
	due, _ := time.Parse(time.RFC3339Nano, w.Str("data.next_run_at"))
	e.StartWorkers()
	first := e.NextCheck(id, as...)
	is.Equal(first.Str("task.status"), "succeeded")

	// As if the check's task had been made but never recorded: due at the same time again.
	_, err := e.DB.UpdateWatch(ctx, orgID, id, store.WatchPatch{NextRunAt: &due})
	is.NoErr(err)
	e.WaitWatch(id, func(r *servertest.Response) bool {
		at, err := time.Parse(time.RFC3339Nano, r.Str("data.next_run_at"))
		return err == nil && at.After(e.Clock.Now().Add(24*time.Hour)) // scheduled again, a whole interval on
	}, as...)
	is.Equal(e.Do("GET", "/v1/tasks", nil, as...).Get("total"), float64(1)) // the same task, found again
	is.Equal(e.Balance("acme").Charged, int64(1))
}

// TestEmailWatchAsksTheSource: an email watch's check asks the source for the person
// the address is on record for, however recently the store got them: a check of
// what the store already holds would be charged and would miss the change.
func TestEmailWatchAsksTheSource(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks, watchesOften)
	servertest.AcmeNetwork(e)
	e.Net.AddPerson(servertest.Employee("zed-quux", "Zed", "Quux", servertest.AcmeURL, "Sales Director", "London", "GB", false))
	rcv := servertest.NewReceiver(t)
	loopID, _ := e.CreateLoop("People", rcv.Srv.URL+"/hook", "person")
	w := e.CreateWatch(map[string]any{"object_type": "person", "email": "zed.quux@acme.com", "loop_id": loopID, "every_days": 7})
	id := w.Str("data.id")
	e.StartWorkers()
	is.Equal(e.NextCheck(id).Str("task.status"), "succeeded")

	e.Net.AddPerson(servertest.Employee("zed-quux", "Zed", "Quux", servertest.AcmeURL, "VP Sales", "London", "GB", false))
	second := e.NextCheck(id) // seven days on: the stored profile is still within the 30-day store
	is.Equal(second.Str("task.status"), "succeeded")
	is.True(strings.Contains(string(second.Raw), "VP Sales"))

	e.Net.RemovePerson("https://www.linkedin.com/in/zed-quux")
	gone := e.NextCheck(id) // the source no longer has them: not served from the store
	is.Equal(gone.Str("task.status"), "failed")
}
