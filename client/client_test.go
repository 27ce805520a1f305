package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"enrichd/server"
	"enrichd/store"

	"github.com/matryer/is"
)

func TestEnrichCompanyWaitAndRead(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := newEnv(t)
	e.src.addCompany("Acme", "acme.com")
	e.startWorkers()
	ctx := t.Context()

	q, err := e.c.EnrichCompany(ctx, CompanyInput{Domain: "WWW.Acme.com"})
	is.NoErr(err)
	is.Equal(q.StatusCode, http.StatusAccepted) // nothing stored yet: queued
	is.Equal(q.Task.ObjectType, ObjectCompany)
	is.Equal(q.Task.Target, "acme.com") // normalized by the server
	is.Equal(q.Task.CreditsCharged, int64(1))
	is.True(q.Error == nil)

	res, err := e.c.WaitTask(ctx, q.Task.ID)
	is.NoErr(err)
	is.Equal(res.Task.Status, StatusSucceeded)
	is.True(res.Task.Settled())
	is.True(res.Task.FinishedAt != nil)
	co, err := res.Company()
	is.NoErr(err)
	is.Equal(co.Name, "Acme")
	is.Equal(*co.Domain, "acme.com")
	is.Equal(*co.EmployeeCount, int64(42))
	is.Equal(co.Headquarters["city"], "Lyon")
	// Where each field came from, and what each source was asked.
	is.Equal(res.Provenance["name"], "fake-network")
	is.Equal(res.Provenance["employee_count"], "fake-network")
	is.Equal(len(res.Sources), 1)
	is.Equal(res.Sources[0].Name, "fake-network")
	is.Equal(res.Sources[0].Outcome, OutcomeHit)
	_, err = res.Person()
	is.True(err != nil) // a company task has no person
	is.True(strings.Contains(err.Error(), "not a person"))

	// The same company again is served from the store inside the request.
	again, err := e.c.EnrichCompany(ctx, CompanyInput{NetworkURL: *co.NetworkURL})
	is.NoErr(err)
	is.Equal(again.StatusCode, http.StatusOK)
	is.Equal(again.Task.Status, StatusSucceeded)
	is.Equal(e.balance("acme"), int64(98))

	// A company nobody knows fails, and is refunded.
	miss, err := e.c.EnrichCompany(ctx, CompanyInput{Domain: "nowhere.example"})
	is.NoErr(err)
	res, err = e.c.WaitTask(ctx, miss.Task.ID)
	is.NoErr(err)
	is.Equal(res.Task.Status, StatusFailed)
	is.Equal(res.Error.Code, CodeNotFound)
	_, err = res.Company()
	is.True(err != nil) // a failed task has no result
	is.Equal(e.balance("acme"), int64(98))
}

func TestEnrichPerson(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := newEnv(t)
	e.src.addPerson("jane-doe", "Jane", "Doe", "CTO", "Acme")
	e.startWorkers()
	ctx := t.Context()

	q, err := e.c.EnrichPerson(ctx, PersonInput{NetworkURL: "https://linkedin.com/in/Jane-Doe/"})
	is.NoErr(err)
	is.Equal(q.Task.ObjectType, ObjectPerson)
	res, err := e.c.WaitTask(ctx, q.Task.ID)
	is.NoErr(err)
	p, err := res.Person()
	is.NoErr(err)
	is.Equal(*p.FullName, "Jane Doe")
	is.True(p.Current() != nil)
	is.Equal(*p.Current().Title, "CTO")
	is.True(p.EmailMatch == nil) // not an email lookup

	// A role address is refused inside the request: failed at once, refunded.
	role, err := e.c.EnrichPerson(ctx, PersonInput{Email: "info@acme.com", FullName: "Jane Doe"})
	is.NoErr(err)
	is.Equal(role.StatusCode, http.StatusOK)
	is.Equal(role.Task.Status, StatusFailed)
	is.Equal(role.Task.CreditsCharged, int64(3))
	is.Equal(role.Error.Code, CodeNotFound)
	is.Equal(e.balance("acme"), int64(99))

	// Hints belong to email lookups only.
	_, err = e.c.EnrichPerson(ctx, PersonInput{NetworkURL: "https://linkedin.com/in/jane-doe", Title: "CTO"})
	var apiErr *Error
	is.True(errors.As(err, &apiErr))
	is.Equal(apiErr.Status, http.StatusBadRequest)
	is.True(apiErr.Message != "")
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := newEnv(t)
	e.src.addCompany("Acme", "acme.com")
	ctx := t.Context()

	first, err := e.c.EnrichCompany(ctx, CompanyInput{Domain: "acme.com"}, IdempotencyKey("row-1"))
	is.NoErr(err)
	is.Equal(*first.Task.IdempotencyKey, "row-1")
	replay, err := e.c.EnrichCompany(ctx, CompanyInput{Domain: "acme.com"}, IdempotencyKey("row-1"))
	is.NoErr(err)
	is.Equal(replay.Task.ID, first.Task.ID) // the original task
	is.Equal(replay.StatusCode, http.StatusOK)
	is.Equal(e.balance("acme"), int64(99)) // charged once

	_, err = e.c.EnrichCompany(ctx, CompanyInput{Domain: "other.com"}, IdempotencyKey("row-1"))
	is.True(IsCode(err, "idempotency_key_reused"))
	var apiErr *Error
	is.True(errors.As(err, &apiErr))
	is.Equal(apiErr.Status, http.StatusUnprocessableEntity)

	// A key the server would refuse is refused before anything is sent.
	before := len(e.calls.calls("POST", "/v1/companies/enrich"))
	_, err = e.c.EnrichCompany(ctx, CompanyInput{Domain: "acme.com"}, IdempotencyKey(strings.Repeat("k", 256)))
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), "255"))
	is.Equal(len(e.calls.calls("POST", "/v1/companies/enrich")), before)
}

func TestTasksListAndCancel(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := newEnv(t)
	ctx := t.Context()
	// No workers: the tasks stay queued.
	var ids []string
	for _, d := range []string{"a.com", "b.com", "c.com"} {
		q, err := e.c.EnrichCompany(ctx, CompanyInput{Domain: d})
		is.NoErr(err)
		is.Equal(q.Task.Status, StatusQueued)
		ids = append(ids, q.Task.ID)
	}

	page0, err := e.c.Tasks(ctx, TaskListOptions{PageSize: 2})
	is.NoErr(err)
	is.Equal(page0.Total, int64(3))
	is.Equal(len(page0.Data), 2)
	is.Equal(page0.Data[0].ID, ids[2]) // newest first
	page1, err := e.c.Tasks(ctx, TaskListOptions{Page: 1, PageSize: 2})
	is.NoErr(err)
	is.Equal(len(page1.Data), 1)
	is.Equal(page1.Data[0].ID, ids[0])

	canceled, err := e.c.CancelTask(ctx, ids[1])
	is.NoErr(err)
	is.Equal(canceled.Status, StatusCanceled)
	is.Equal(e.balance("acme"), int64(98)) // refunded

	only, err := e.c.Tasks(ctx, TaskListOptions{Status: StatusCanceled})
	is.NoErr(err)
	is.Equal(only.Total, int64(1))
	is.Equal(only.Data[0].ID, ids[1])

	// The poll of an unsettled task carries the server's hint.
	res, err := e.c.Task(ctx, ids[0])
	is.NoErr(err)
	is.Equal(res.RetryAfter, 2*time.Second)
	is.True(res.Data == nil && res.Error == nil)

	_, err = e.c.CancelTask(ctx, ids[1])
	is.True(IsCode(err, "task_settled"))
	_, err = e.c.Tasks(ctx, TaskListOptions{Status: "done"})
	var apiErr *Error
	is.True(errors.As(err, &apiErr))
	is.Equal(apiErr.Status, http.StatusBadRequest)
	is.True(strings.Contains(apiErr.Message, "status"))
	_, err = e.c.Task(ctx, "0198c4a4-0000-7000-8000-000000000000")
	is.True(IsCode(err, "not_found"))
	is.True(errors.As(err, &apiErr))
	is.Equal(apiErr.Status, http.StatusNotFound)
	is.True(apiErr.RequestID != "") // every response carries X-Request-Id
}

func TestWaitTaskHonorsRetryAfterAndContext(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := newEnv(t)
	e.src.addCompany("Acme", "acme.com")
	release := e.src.hold()
	defer release()
	e.startWorkers()

	q, err := e.c.EnrichCompany(t.Context(), CompanyInput{Domain: "acme.com"})
	is.NoErr(err)

	// The source is held: the wait ends with the context, and says so.
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	_, err = e.c.WaitTask(ctx, q.Task.ID)
	cancel()
	is.True(errors.Is(err, context.DeadlineExceeded))

	// Released while WaitTask sleeps between polls, the task settles, and every poll
	// came at least Retry-After (2 s) after the one before.
	go func() {
		for len(e.calls.calls("GET", "/v1/tasks/"+q.Task.ID)) < 2 {
			time.Sleep(5 * time.Millisecond)
		}
		release()
	}()
	res, err := e.c.WaitTask(t.Context(), q.Task.ID)
	is.NoErr(err)
	is.Equal(res.Task.Status, StatusSucceeded)
	polls := e.calls.calls("GET", "/v1/tasks/"+q.Task.ID)
	is.True(len(polls) >= 3)
	for i := 2; i < len(polls); i++ { // polls[0] was cut short by the context above
		if gap := polls[i].at.Sub(polls[i-1].at); gap < 2*time.Second {
			t.Errorf("poll %d came %v after the previous one; Retry-After said 2s", i, gap)
		}
	}
}

func TestRetriesTooManyRequests(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := newEnv(t, func(cfg *server.Config) { cfg.RateKey = server.Rate{Limit: 1, Burst: 1} })
	ctx := t.Context()

	// One request a second: the second and third are answered 429 first, wait out
	// Retry-After, and succeed.
	for range 3 {
		_, err := e.c.Tasks(ctx, TaskListOptions{})
		is.NoErr(err)
	}
	var limited, ok int
	for _, c := range e.calls.calls("GET", "/v1/tasks") {
		switch c.status {
		case http.StatusTooManyRequests:
			limited++
		case http.StatusOK:
			ok++
		}
	}
	is.Equal(ok, 3)
	is.True(limited >= 1)

	// Without retries the 429 is the caller's, with what the server said.
	noRetry := New(e.url, e.key, WithMaxRetries(0))
	var apiErr *Error
	for apiErr == nil {
		_, err := noRetry.Tasks(ctx, TaskListOptions{})
		errors.As(err, &apiErr)
	}
	is.Equal(apiErr.Status, http.StatusTooManyRequests)
	is.Equal(apiErr.Code, "rate_limited")
	is.True(apiErr.RetryAfter >= time.Second)

	// A context that ends while waiting out a 429 ends the call.
	for {
		short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		_, err := e.c.Tasks(short, TaskListOptions{})
		cancel()
		if err != nil {
			is.True(errors.Is(err, context.DeadlineExceeded))
			break
		}
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := newEnv(t, func(cfg *server.Config) { cfg.MaxBacklog = 1 })
	ctx := t.Context()

	_, err := New(e.url, "enr_wrong").Status(ctx)
	var apiErr *Error
	is.True(errors.As(err, &apiErr))
	is.Equal(apiErr.Status, http.StatusUnauthorized)
	is.Equal(apiErr.Message, "Unauthorized")
	is.True(strings.Contains(err.Error(), "API key"))

	broke := New(e.url, e.newOrg("broke", 0))
	_, err = broke.EnrichCompany(ctx, CompanyInput{Domain: "acme.com"})
	is.True(errors.As(err, &apiErr))
	is.Equal(apiErr.Status, http.StatusPaymentRequired)
	is.Equal(apiErr.Code, "insufficient_credits")
	is.True(apiErr.CreditsRemaining != nil && *apiErr.CreditsRemaining == 0)

	// No workers and a backlog of one: the second queued task is refused.
	_, err = e.c.EnrichCompany(ctx, CompanyInput{Domain: "a.com"})
	is.NoErr(err)
	_, err = New(e.url, e.key, WithMaxRetries(0)).EnrichCompany(ctx, CompanyInput{Domain: "b.com"})
	is.True(errors.As(err, &apiErr))
	is.Equal(apiErr.Status, http.StatusTooManyRequests)
	is.Equal(apiErr.Code, "queue_full")
	is.True(apiErr.QueuedTasks != nil && *apiErr.QueuedTasks == 1)
	is.True(apiErr.RetryAfter > 0)

	_, err = e.c.EnrichCompany(ctx, CompanyInput{Domain: "a.com", NetworkURL: "https://linkedin.com/company/a"})
	is.True(errors.As(err, &apiErr))
	is.Equal(apiErr.Status, http.StatusBadRequest)

	// Something that is not enrichd answers.
	notEnrichd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"hello":"world"}`)
	}))
	defer notEnrichd.Close()
	_, err = New(notEnrichd.URL, e.key).Status(ctx)
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), "enrichd server"))
}

func TestStatus(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := newEnv(t)
	st, err := e.c.Status(t.Context())
	is.NoErr(err)
	is.Equal(len(st.Sources), 1)
	is.Equal(st.Sources[0].Name, "fake-network")
}

func TestSources(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := newEnv(t, func(cfg *server.Config) { cfg.CreditUSD = map[string]float64{"fake-network": 0.5} })
	is.NoErr(e.db.SetSourceBudget(t.Context(), "", "fake-network", 100))
	org, err := e.db.FindOrg(t.Context(), "acme")
	is.NoErr(err)
	is.NoErr(e.db.AddSourceSpend(t.Context(), org.ID, "fake-network", false, e.clock.Now(), store.SourceUse{Calls: 2, Hits: 1, Errors: 1, Credits: 4}))
	got, err := e.c.Sources(t.Context())
	is.NoErr(err)
	is.Equal(len(got.Sources), 1)
	s := got.Sources[0]
	is.Equal(s.Name, "fake-network")
	is.Equal(s.SourceUse, SourceUse{Calls: 2, Hits: 1, Errors: 1, VendorCredits: 4})
	is.Equal(*s.USD, 2.0)
	is.Equal(*s.Budget.Installation, int64(100))
	is.Equal(*s.Budget.Remaining, int64(96))
	is.Equal(len(s.Days), 1)
}

// receiver is a webhook endpoint that keeps what it was sent.
type receiver struct {
	mu  sync.Mutex
	got []delivery
}

type delivery struct {
	header http.Header
	body   []byte
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.got = append(r.got, delivery{req.Header.Clone(), body})
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// wait returns the first delivery whose event is event.
func (r *receiver) wait(t *testing.T, event string) delivery {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		for _, d := range r.got {
			if d.header.Get(HeaderEvent) == event {
				r.mu.Unlock()
				return d
			}
		}
		r.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no %s delivery within 10s", event)
	return delivery{}
}

func TestLoops(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := newEnv(t)
	e.src.addCompany("Acme", "acme.com")
	rcv := &receiver{}
	hook := httptest.NewServer(rcv)
	defer hook.Close()
	e.startWorkers()
	ctx := t.Context()

	l, err := e.c.CreateLoop(ctx, NewLoop{Name: "CRM sync", WebhookURL: hook.URL})
	is.NoErr(err)
	is.Equal(l.Slug, "crm-sync")
	is.Equal(l.ObjectType, ObjectCompany)
	is.True(l.Enabled)
	is.True(strings.HasPrefix(l.Destination.Secret, "whsec_")) // shown this once
	secret := l.Destination.Secret

	list, err := e.c.Loops(ctx)
	is.NoErr(err)
	is.Equal(len(list), 1)
	is.Equal(list[0].ID, l.ID)
	is.Equal(list[0].Destination.Secret, "")
	got, err := e.c.Loop(ctx, l.ID)
	is.NoErr(err)
	is.Equal(got.Name, "CRM sync")
	is.Equal(got.Destination.Secret, "")

	q, err := e.c.RunLoop(ctx, l.ID, RunInput{Domain: "acme.com"}, IdempotencyKey("run-1"))
	is.NoErr(err)
	is.Equal(*q.Task.LoopID, l.ID)
	res, err := e.c.WaitTask(ctx, q.Task.ID)
	is.NoErr(err)
	is.Equal(res.Task.Status, StatusSucceeded)

	// The delivery verifies with the Loop's secret, and not with another.
	d := rcv.wait(t, "task.succeeded")
	is.NoErr(VerifyWebhook(d.body, d.header.Get(HeaderSignature), secret, 0))
	is.True(errors.Is(VerifyWebhook(d.body, d.header.Get(HeaderSignature), "whsec_other", 0), ErrSignatureInvalid))
	is.True(errors.Is(VerifyWebhook(d.body, "", secret, 0), ErrNoSignature))
	// Either header set verifies.
	is.NoErr(VerifyWebhookHeaders(d.body, d.header, secret, 0))
	standardOnly := d.header.Clone()
	standardOnly.Del(HeaderSignature)
	is.Equal(standardOnly.Get(HeaderWebhookID), d.header.Get(HeaderDeliveryID))
	is.NoErr(VerifyWebhookHeaders(d.body, standardOnly, secret, 0))
	is.True(errors.Is(VerifyWebhookHeaders(d.body, standardOnly, "whsec_other", 0), ErrSignatureInvalid))

	test, err := e.c.TestLoop(ctx, l.ID)
	is.NoErr(err)
	is.Equal(test.Event, "test")
	is.Equal(test.LoopID, l.ID)
	rcv.wait(t, "test")

	var ds *DeliveryList
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		ds, err = e.c.Deliveries(ctx, l.ID, DeliveryListOptions{PageSize: 10})
		is.NoErr(err)
		if ds.Total == 2 && ds.Data[0].Status == "succeeded" && ds.Data[1].Status == "succeeded" {
			break
		}
	}
	is.Equal(ds.Total, int64(2))
	is.Equal(ds.Data[0].ID, test.ID) // newest first
	is.Equal(ds.Data[1].Event, "task.succeeded")
	is.Equal(*ds.Data[1].TaskID, q.Task.ID)
	one, err := e.c.Deliveries(ctx, l.ID, DeliveryListOptions{Page: 1, PageSize: 1})
	is.NoErr(err)
	is.Equal(one.Data[0].ID, ds.Data[1].ID)

	// Only a failed delivery can be retried.
	_, err = e.c.RetryDelivery(ctx, test.ID)
	is.True(IsCode(err, "delivery_not_failed"))

	// A rotation with a grace period: the next delivery verifies with either secret.
	rotated, err := e.c.RotateLoopSecret(ctx, l.ID, time.Hour)
	is.NoErr(err)
	is.True(rotated.Destination.Secret != "" && rotated.Destination.Secret != secret)
	is.True(rotated.Destination.PreviousSecretExpiresAt != nil)
	is.True(rotated.Destination.Enabled)
	is.True(!rotated.Failing)
	_, err = e.c.TestLoop(ctx, l.ID)
	is.NoErr(err)
	var both delivery
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		rcv.mu.Lock()
		if n := len(rcv.got); n >= 3 {
			both = rcv.got[n-1]
		}
		rcv.mu.Unlock()
		if both.body != nil {
			break
		}
	}
	is.NoErr(VerifyWebhookHeaders(both.body, both.header, secret, 0))
	is.NoErr(VerifyWebhookHeaders(both.body, both.header, rotated.Destination.Secret, 0))
	_, err = e.c.RotateLoopSecret(ctx, l.ID, -time.Second)
	var refused *Error
	is.True(errors.As(err, &refused))
	is.Equal(refused.Status, http.StatusBadRequest)

	name, off := "CRM nightly", false
	up, err := e.c.UpdateLoop(ctx, l.ID, LoopPatch{Name: &name, Enabled: &off})
	is.NoErr(err)
	is.Equal(up.Slug, "crm-nightly")
	is.True(!up.Enabled)
	_, err = e.c.RunLoop(ctx, l.ID, RunInput{Domain: "acme.com"})
	is.True(IsCode(err, "loop_disabled"))

	is.NoErr(e.c.DeleteLoop(ctx, l.ID))
	_, err = e.c.Loop(ctx, l.ID)
	is.True(IsCode(err, "not_found"))
	err = e.c.DeleteLoop(ctx, l.ID)
	is.True(IsCode(err, "not_found"))
}

// failingThenOK answers 500 to the first n requests and 204 after.
type failingThenOK struct {
	mu sync.Mutex
	n  int
}

func (f *failingThenOK) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n > 0 {
		f.n--
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func TestRetryDelivery(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := newEnv(t)
	hook := httptest.NewServer(&failingThenOK{n: 7})
	defer hook.Close()
	e.startWorkers()
	ctx := t.Context()
	l, err := e.c.CreateLoop(ctx, NewLoop{Name: "Down", WebhookURL: hook.URL})
	is.NoErr(err)
	test, err := e.c.TestLoop(ctx, l.ID)
	is.NoErr(err)

	// waitAttempts waits until the delivery has made n attempts and nothing is in flight.
	waitAttempts := func(n int) Delivery {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			ds, err := e.c.Deliveries(ctx, l.ID, DeliveryListOptions{})
			is.NoErr(err)
			if d := ds.Data[0]; d.Attempts == n && (d.Status != "pending" || d.NextAttemptAt != nil && d.NextAttemptAt.After(e.clock.Now())) {
				return d
			}
		}
		t.Fatalf("the delivery did not reach %d attempts within 10s", n)
		return Delivery{}
	}
	for i, wait := range []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 6 * time.Hour} {
		waitAttempts(i + 1)
		e.clock.Add(wait)
	}
	d := waitAttempts(7)
	is.Equal(d.Status, "failed")
	is.Equal(*d.LastStatusCode, http.StatusInternalServerError)

	again, err := e.c.RetryDelivery(ctx, test.ID)
	is.NoErr(err)
	is.Equal(again.ID, test.ID)
	is.Equal(again.Status, "pending")
	d = waitAttempts(8)
	is.Equal(d.Status, "succeeded")
	is.Equal(*d.LastStatusCode, http.StatusNoContent)
}

// A receiver that answers 410 Gone disables the Loop's destination; the client sees
// why, and EnableDestination sends again.
func TestAGoneReceiverDisablesTheDestination(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := newEnv(t)
	var gone atomic.Bool
	gone.Store(true)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if gone.Load() {
			w.WriteHeader(http.StatusGone)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()
	e.startWorkers()
	ctx := t.Context()
	l, err := e.c.CreateLoop(ctx, NewLoop{Name: "Gone", WebhookURL: hook.URL})
	is.NoErr(err)
	test, err := e.c.TestLoop(ctx, l.ID)
	is.NoErr(err)
	var got *Loop
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if got, err = e.c.Loop(ctx, l.ID); err == nil && !got.Destination.Enabled {
			break
		}
	}
	is.NoErr(err)
	is.True(!got.Destination.Enabled)
	is.Equal(*got.Destination.DisabledReason, "the receiver answered 410 Gone")
	_, err = e.c.RetryDelivery(ctx, test.ID)
	is.True(IsCode(err, "destination_disabled"))

	gone.Store(false)
	got, err = e.c.EnableDestination(ctx, l.ID)
	is.NoErr(err)
	is.True(got.Destination.Enabled)
	_, err = e.c.RetryDelivery(ctx, test.ID)
	is.NoErr(err)
}
