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
	"enrichd/store"
	"enrichd/webhook"

	"github.com/matryer/is"
)

// The watches, driven by the clock: the scheduler looks for due watches every few
// milliseconds of real time, and a watch falls due when the test moves the store's
// clock past its next_run_at.

func watchesOften(cfg *server.Config) { cfg.WatchInterval = 5 * time.Millisecond }

func (f *fakeNetwork) removePerson(url string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.people, url)
}

// waitWatch polls a watch until ok says it is as wanted.
func (e *env) waitWatch(id string, ok func(r *response) bool, headers ...string) *response {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := e.do("GET", "/v1/watches/"+id, nil, headers...)
		if r.status != 200 {
			e.t.Fatalf("GET watch %s: %d %s", id, r.status, r.raw)
		}
		if ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("watch %s did not get there: %s", id, r.raw)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// nextCheck moves the clock past a watch's next run and waits for the task the
// scheduler makes of it to settle.
func (e *env) nextCheck(id string, headers ...string) *response {
	e.t.Helper()
	w := e.do("GET", "/v1/watches/"+id, nil, headers...)
	next, err := time.Parse(time.RFC3339Nano, w.str("data.next_run_at"))
	if err != nil {
		e.t.Fatalf("watch %s has no next run: %s", id, w.raw)
	}
	prev := w.str("data.last_task_id")
	e.clock.Add(next.Sub(e.clock.Now()) + time.Second)
	w = e.waitWatch(id, func(r *response) bool { return r.str("data.last_task_id") != prev }, headers...)
	return e.waitSettled(w.str("data.last_task_id"), headers...)
}

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
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks, watchesOften)
	rcv := newReceiver(t)
	profile := "https://www.linkedin.com/in/jane-doe"
	e.net.addPerson(person("jane-doe", "Jane Doe", position("Acme", "acme", "Engineer", "2020-03-01", true)))
	loopID, secret := e.createLoop("Job changes", rcv.srv.URL+"/hook", "person")
	w := e.createWatch(map[string]any{"object_type": "person", "networkUrl": "https://linkedin.com/in/Jane-Doe/", "loop_id": loopID})
	id := w.str("data.id")
	is.Equal(w.get("data.input"), map[string]any{"networkUrl": profile})
	began := e.clock.Now()
	e.startWorkers()

	// The first check: the baseline.
	first := e.nextCheck(id)
	is.Equal(first.str("task.status"), "succeeded")
	is.Equal(first.str("task.watch_id"), id)
	is.Equal(first.get("task.loop_id"), nil)
	is.Equal(first.get("task.credits_charged"), float64(1))
	after := e.do("GET", "/v1/watches/"+id, nil)
	is.Equal(after.str("data.last_task_id"), first.str("task.id"))
	is.True(after.str("data.last_run_at") != "")
	nextRun, _ := time.Parse(time.RFC3339Nano, after.str("data.next_run_at"))
	is.True(nextRun.Sub(e.clock.Now()) > 29*24*time.Hour) // every 30 days

	// She moves to Globex; the same Engineer title, so the title alone is not the signal.
	e.net.addPerson(person("jane-doe", "Jane Doe",
		position("Globex", "globex", "Staff Engineer", "2026-02-01", true),
		position("Acme", "acme", "Engineer", "2020-03-01", false)))
	second := e.nextCheck(id)
	is.Equal(second.str("task.status"), "succeeded")

	got := rcv.wait(t, 1)[0]
	// Recorded as delivered before the clock moves on: a delivery whose outcome is not
	// recorded yet when its lease runs out by the moved clock is sent again, by design.
	e.waitDelivery(loopID, func(d map[string]any) bool { return d["status"] == "succeeded" })
	t.Logf("the event: %s", got.body)
	is.Equal(got.header.Get("X-Service-Event"), "person.job_changed")
	// Signed with the Loop's secret at the store's clock, which the test moved.
	is.NoErr(webhook.Verify(got.body, got.header.Get(webhook.HeaderSignature), secret, time.Since(began)+e.clock.Now().Sub(began)+time.Hour))
	is.True(webhook.Verify(got.body, got.header.Get(webhook.HeaderSignature), "whsec_wrong", 400*24*time.Hour) != nil)
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
	is.NoErr(json.Unmarshal(got.body, &event))
	is.Equal(event.Event, "person.job_changed")
	is.Equal(event.Watch.ID, id)
	is.Equal(event.Task.ID, second.str("task.id"))
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
		t.Errorf("the diff does not show Globex added and Acme ended: %s", got.body)
	}

	// Exactly one delivery: the baseline sent nothing.
	deliveries := e.do("GET", "/v1/loops/"+loopID+"/deliveries", nil)
	is.Equal(deliveries.get("total"), float64(1))
	is.Equal(deliveries.get("data").([]any)[0].(map[string]any)["event"], "person.job_changed")
	is.Equal(deliveries.get("data").([]any)[0].(map[string]any)["task_id"], second.str("task.id"))

	// Both checks are in the ledger.
	ledger, err := e.db.CreditLedger(context.Background(), "acme")
	is.NoErr(err)
	charged := map[string]int64{}
	for _, entry := range ledger {
		if entry.Kind == "charge" && entry.TaskID != nil {
			charged[*entry.TaskID] += entry.Amount
		}
	}
	is.Equal(len(charged), 2)
	is.True(charged[first.str("task.id")] != 0 && charged[second.str("task.id")] != 0)
	is.Equal(e.balance("acme").Charged, int64(2))
	// The month's spend counts the checks of this UTC month: the clock moved 30 days.
	thisMonth := 1.0
	if firstAt, _ := time.Parse(time.RFC3339Nano, first.str("task.created_at")); firstAt.Month() == e.clock.Now().Month() {
		thisMonth = 2
	}
	is.Equal(e.do("GET", "/v1/watches", nil).get("meta.watch_credits_this_month"), thisMonth)

	// Her profile is gone: the first not_found is counted, the second pauses the watch.
	e.net.removePerson(profile)
	third := e.nextCheck(id)
	is.Equal(third.str("task.status"), "failed")
	is.Equal(third.str("error.code"), "not_found")
	still := e.do("GET", "/v1/watches/"+id, nil)
	is.Equal(still.get("data.paused_reason"), nil)
	fourth := e.nextCheck(id)
	is.Equal(fourth.str("error.code"), "not_found")
	paused := e.do("GET", "/v1/watches/"+id, nil)
	is.Equal(paused.str("data.paused_reason"), "not_found")
	is.Equal(paused.get("data.next_run_at"), nil)
	is.Equal(paused.str("data.last_task_id"), fourth.str("task.id"))
	is.Equal(e.balance("acme").Charged-e.balance("acme").Refund, int64(2)) // the failed checks are refunded

	// A paused watch is not run again: a watch due at the same time is, in the same
	// round as the paused one would be.
	companyLoop, _ := e.createLoop("Companies", rcv.srv.URL+"/hook", "company")
	e.net.addCompany(company("Acme", "acme.com"))
	sentinel := e.createWatch(map[string]any{"object_type": "company", "domain": "acme.com", "loop_id": companyLoop}).str("data.id")
	e.clock.Add(400 * 24 * time.Hour)
	e.waitWatch(sentinel, func(r *response) bool { return r.get("data.last_task_id") != nil })
	is.Equal(e.do("GET", "/v1/watches/"+id, nil).str("data.last_task_id"), fourth.str("task.id"))
	is.Equal(rcv.count(), 1) // nothing more was sent: the sentinel's first check is a baseline

	// Resuming it makes it due within the hour, and clears why it paused.
	resumed := e.do("PATCH", "/v1/watches/"+id, map[string]any{"enabled": true})
	is.Equal(resumed.status, http.StatusOK)
	is.Equal(resumed.get("data.paused_reason"), nil)
	is.True(resumed.str("data.next_run_at") != "")
}

// TestWatchMonthlyCap: an organization over its monthly cap gets no scheduled check
// (the watch waits for next month, nothing charged), while a check asked for by hand
// still runs and counts.
func TestWatchMonthlyCap(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks, watchesOften)
	// Mid-month, so that the hour the test moves through stays in one month.
	now := e.clock.Now()
	e.clock.Add(time.Date(now.Year(), now.Month()+1, 10, 12, 0, 0, 0, time.UTC).Sub(now))
	rcv := newReceiver(t)
	e.net.addCompany(company("Acme", "acme.com"))
	e.net.addCompany(company("Globex", "globex.com"))
	loopID, _ := e.createLoop("Companies", rcv.srv.URL, "company")
	capped := e.createWatch(map[string]any{"object_type": "company", "domain": "acme.com", "loop_id": loopID}).str("data.id")
	cap := int64(1)
	is.NoErr(e.db.SetWatchCap(context.Background(), "acme", &cap))
	e.startWorkers()

	// A check by hand reaches the cap.
	run := e.do("POST", "/v1/watches/"+capped+"/run", nil)
	is.Equal(run.status, http.StatusAccepted)
	is.Equal(e.waitSettled(run.str("task.id")).str("task.status"), "succeeded")
	first := run.str("task.id")
	list := e.do("GET", "/v1/watches", nil)
	is.Equal(list.get("meta.watch_credits_this_month"), float64(1))
	is.Equal(list.get("meta.watch_monthly_cap"), float64(1))
	is.Equal(e.balance("acme").Charged, int64(1))

	// Its scheduled check would pass the cap: it waits for next month, unpaid.
	w := e.do("GET", "/v1/watches/"+capped, nil)
	next, _ := time.Parse(time.RFC3339Nano, w.str("data.next_run_at"))
	e.clock.Add(next.Sub(e.clock.Now()) + time.Second)
	monthStart := time.Date(e.clock.Now().Year(), e.clock.Now().Month(), 1, 0, 0, 0, 0, time.UTC)
	nextMonth := monthStart.AddDate(0, 1, 0)
	deferred := e.waitWatch(capped, func(r *response) bool {
		at, err := time.Parse(time.RFC3339Nano, r.str("data.next_run_at"))
		return err == nil && !at.Before(nextMonth)
	})
	at, _ := time.Parse(time.RFC3339Nano, deferred.str("data.next_run_at"))
	is.True(at.Before(nextMonth.Add(24 * time.Hour))) // spread over the month's first day
	is.Equal(deferred.get("data.enabled"), true)
	is.Equal(deferred.get("data.paused_reason"), nil)
	is.Equal(e.balance("acme").Charged, int64(1))
	tasks := e.do("GET", "/v1/tasks", nil)
	is.Equal(tasks.get("total"), float64(1))

	// Another organization, with no cap, is not held back.
	otherKey, _ := e.newOrg("globex", 10)
	as := []string{"Authorization", "Bearer " + otherKey}
	theirLoop := e.do("POST", "/v1/loops", map[string]any{"name": "Theirs", "webhook_url": rcv.srv.URL}, as...).str("data.id")
	theirs := e.do("POST", "/v1/watches", map[string]any{"object_type": "company", "domain": "globex.com", "loop_id": theirLoop}, as...)
	is.Equal(theirs.status, http.StatusCreated)
	is.Equal(e.nextCheck(theirs.str("data.id"), as...).str("task.status"), "succeeded")
	is.Equal(e.balance("globex").Charged, int64(1))

	// By hand, the capped watch still runs.
	run = e.do("POST", "/v1/watches/"+capped+"/run", nil)
	is.Equal(run.status, http.StatusAccepted)
	is.Equal(e.waitSettled(run.str("task.id")).str("task.status"), "succeeded")
	is.Equal(e.balance("acme").Charged, int64(2))
	is.Equal(e.do("GET", "/v1/watches", nil).get("meta.watch_credits_this_month"), float64(2))

	// Next month the scheduled check runs.
	e.clock.Add(at.Sub(e.clock.Now()) + time.Second)
	e.waitWatch(capped, func(r *response) bool {
		id := r.str("data.last_task_id")
		return id != "" && id != run.str("task.id") && id != first
	})
	is.Equal(e.balance("acme").Charged, int64(3))
}

// TestWatchRefusedCheckIsRetried: a scheduled check the ledger refuses (no credits)
// creates nothing; the watch is due again WatchRetry later, and runs once the
// organization has credits.
func TestWatchRefusedCheckIsRetried(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks, watchesOften)
	key, _ := e.newOrg("broke", 0)
	as := []string{"Authorization", "Bearer " + key}
	rcv := newReceiver(t)
	e.net.addCompany(company("Acme", "acme.com"))
	loopID := e.do("POST", "/v1/loops", map[string]any{"name": "Companies", "webhook_url": rcv.srv.URL}, as...).str("data.id")
	w := e.do("POST", "/v1/watches", map[string]any{"object_type": "company", "domain": "acme.com", "loop_id": loopID}, as...)
	is.Equal(w.status, http.StatusCreated)
	id := w.str("data.id")
	next, _ := time.Parse(time.RFC3339Nano, w.str("data.next_run_at"))
	e.startWorkers()

	e.clock.Add(next.Sub(e.clock.Now()) + time.Second)
	due := e.clock.Now()
	retried := e.waitWatch(id, func(r *response) bool {
		at, err := time.Parse(time.RFC3339Nano, r.str("data.next_run_at"))
		// The refusal is logged after the claim is made: wait for both.
		return err == nil && at.After(due) && strings.Contains(e.logs.String(), "a watch's task was refused")
	}, as...)
	at, _ := time.Parse(time.RFC3339Nano, retried.str("data.next_run_at"))
	is.True(!at.After(due.Add(store.WatchRetry))) // the claim's retry, not a whole interval later
	is.Equal(retried.get("data.last_task_id"), nil)
	is.Equal(e.do("GET", "/v1/tasks", nil, as...).get("total"), float64(0))

	_, err := e.db.GrantCredits(context.Background(), "broke", 10, nil)
	is.NoErr(err)
	is.Equal(e.nextCheck(id, as...).str("task.status"), "succeeded")
	is.Equal(e.balance("broke").Charged, int64(1))
}

// TestWatchCheckIsNotMadeTwiceForOneDueTime: a process that stops between making a
// check's task and recording it leaves the watch claimed but not rescheduled, and the
// claim's retry hands it out with the same due time (the store's
// AClaimNeverRecordedKeepsItsDueTime); a check of the same due time finds the same
// task again (its key names that time) rather than charging for a second one.
func TestWatchCheckIsNotMadeTwiceForOneDueTime(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	e := newEnv(t, allowPrivateWebhooks, watchesOften)
	key, orgID := e.newOrg("acme", 10)
	as := []string{"Authorization", "Bearer " + key}
	rcv := newReceiver(t)
	e.net.addCompany(company("Acme", "acme.com"))
	loopID := e.do("POST", "/v1/loops", map[string]any{"name": "Companies", "webhook_url": rcv.srv.URL}, as...).str("data.id")
	w := e.do("POST", "/v1/watches", map[string]any{"object_type": "company", "domain": "acme.com", "loop_id": loopID}, as...)
	is.Equal(w.status, http.StatusCreated)
	id := w.str("data.id")
	due, _ := time.Parse(time.RFC3339Nano, w.str("data.next_run_at"))
	e.startWorkers()
	first := e.nextCheck(id, as...)
	is.Equal(first.str("task.status"), "succeeded")

	// As if the check's task had been made but never recorded: due at the same time again.
	_, err := e.db.UpdateWatch(ctx, orgID, id, store.WatchPatch{NextRunAt: &due})
	is.NoErr(err)
	e.waitWatch(id, func(r *response) bool {
		at, err := time.Parse(time.RFC3339Nano, r.str("data.next_run_at"))
		return err == nil && at.After(e.clock.Now().Add(24*time.Hour)) // scheduled again, a whole interval on
	}, as...)
	is.Equal(e.do("GET", "/v1/tasks", nil, as...).get("total"), float64(1)) // the same task, found again
	is.Equal(e.balance("acme").Charged, int64(1))
}

// TestEmailWatchAsksTheSource: an email watch's check asks the source for the person
// the address is on record for, however recently the store got them: a check of
// what the store already holds would be charged and would miss the change.
func TestEmailWatchAsksTheSource(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks, watchesOften)
	acmeNetwork(e)
	e.net.addPerson(employee("zed-quux", "Zed", "Quux", acmeURL, "Sales Director", "London", "GB", false))
	rcv := newReceiver(t)
	loopID, _ := e.createLoop("People", rcv.srv.URL+"/hook", "person")
	w := e.createWatch(map[string]any{"object_type": "person", "email": "zed.quux@acme.com", "loop_id": loopID, "every_days": 7})
	id := w.str("data.id")
	e.startWorkers()
	is.Equal(e.nextCheck(id).str("task.status"), "succeeded")

	e.net.addPerson(employee("zed-quux", "Zed", "Quux", acmeURL, "VP Sales", "London", "GB", false))
	second := e.nextCheck(id) // seven days on: the stored profile is still within the 30-day store
	is.Equal(second.str("task.status"), "succeeded")
	is.True(strings.Contains(string(second.raw), "VP Sales"))

	e.net.removePerson("https://www.linkedin.com/in/zed-quux")
	gone := e.nextCheck(id) // the source no longer has them: not served from the store
	is.Equal(gone.str("task.status"), "failed")
}
