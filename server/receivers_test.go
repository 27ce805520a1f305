package server_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"enrichd/server/servertest"
	"enrichd/webhook"

	"github.com/matryer/is"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	stripewebhook "github.com/stripe/stripe-go/v85/webhook"
)

// verifiers says whether each third-party library, holding only secret, accepts the
// delivery; the timestamp is not checked, since the store's clock is moved in tests.
func verifiers(t *testing.T, got servertest.Received, secret string) (stripe, standard bool) {
	t.Helper()
	stripe = stripewebhook.ValidatePayloadIgnoringTolerance(got.Body, got.Header.Get(webhook.HeaderSignature), secret) == nil
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatalf("the Standard Webhooks library cannot take the secret %q: %v", secret, err)
	}
	return stripe, wh.VerifyIgnoringTimestamp(got.Body, got.Header) == nil
}

// Every delivery carries the Standard Webhooks headers beside ours, with the same
// secret: webhook-id is the delivery id on every attempt, webhook-timestamp the second
// of t=; the specification's own library verifies it, as stripe-go verifies ours, and
// neither accepts a byte changed.
func TestDeliveriesCarryTheStandardWebhooksHeaders(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t, 500)
	loopID, secret := e.CreateLoop("Hooks", rcv.Srv.URL, "company")
	e.StartWorkers()

	is.Equal(e.Do("POST", "/v1/loops/"+loopID+"/test", nil).Status, http.StatusAccepted)
	e.WaitDelivery(loopID, servertest.Attempts(1))
	e.Clock.Add(10 * time.Second)
	d := e.WaitDelivery(loopID, servertest.Attempts(2))
	is.Equal(d["status"], "succeeded")

	for _, got := range rcv.Wait(t, 2) {
		is.Equal(got.Header.Get("webhook-id"), d["id"])
		is.Equal(got.Header.Get("webhook-id"), got.Header.Get(webhook.HeaderDeliveryID))
		is.Equal(got.Header.Get("webhook-timestamp"), strings.TrimPrefix(strings.Split(got.Header.Get(webhook.HeaderSignature), ",")[0], "t="))
		is.True(strings.HasPrefix(got.Header.Get("webhook-signature"), "v1,"))
		stripe, standard := verifiers(t, got, secret)
		is.True(stripe)
		is.True(standard)
		is.NoErr(webhook.VerifyHeaders(got.Body, got.Header, secret, time.Hour))
		standardOnly := got.Header.Clone()
		standardOnly.Del(webhook.HeaderSignature)
		is.NoErr(webhook.VerifyHeaders(got.Body, standardOnly, secret, time.Hour))

		changed := servertest.Received{Header: got.Header, Body: append([]byte(nil), got.Body...)}
		changed.Body[len(changed.Body)/2] ^= 1
		stripe, standard = verifiers(t, changed, secret)
		is.True(!stripe)
		is.True(!standard)
	}
}

// A rotation with a grace period: the answer shows the new secret once and when the
// old one stops; meanwhile every delivery carries both signatures, so a receiver that
// holds only the old secret or only the new one verifies it with either library; after
// the grace period only the new one. Bad rotation requests are 400 and change nothing.
func TestRotatingASecretWithAGracePeriodLosesNoDelivery(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t)
	loopID, oldSecret := e.CreateLoop("Hooks", rcv.Srv.URL, "company")
	e.StartWorkers()

	for _, bad := range []map[string]any{
		{"secret_grace_seconds": 60},
		{"rotate_secret": true, "secret_grace_seconds": -1},
		{"rotate_secret": true, "secret_grace_seconds": 604801},
		{"rotate_secret": true, "secret_grace_seconds": "1h"},
		{"destination": map[string]any{}},
		{"rotate_secret": true, "name": ""},
	} {
		r := e.Do("PATCH", "/v1/loops/"+loopID, bad)
		is.Equal(r.Status, http.StatusBadRequest)
		is.True(r.Str("error") != "")
	}

	r := e.Do("PATCH", "/v1/loops/"+loopID, map[string]any{"rotate_secret": true, "secret_grace_seconds": 3600})
	is.Equal(r.Status, http.StatusOK)
	newSecret := r.Str("data.destination.secret")
	is.True(strings.HasPrefix(newSecret, "whsec_"))
	is.True(newSecret != oldSecret)
	expires, err := time.Parse(time.RFC3339Nano, r.Str("data.destination.previous_secret_expires_at"))
	is.NoErr(err)
	is.Equal(expires.UnixMilli(), e.Clock.Now().Add(time.Hour).UnixMilli())
	got := e.Do("GET", "/v1/loops/"+loopID, nil)
	is.Equal(got.Get("data.destination.secret"), nil) // shown once
	is.Equal(got.Str("data.destination.previous_secret_expires_at"), r.Str("data.destination.previous_secret_expires_at"))

	is.Equal(e.Do("POST", "/v1/loops/"+loopID+"/test", nil).Status, http.StatusAccepted)
	during := rcv.Wait(t, 1)[0]
	succeeded := func(d map[string]any) bool { return d["status"] == "succeeded" }
	e.WaitDelivery(loopID, succeeded) // recorded before the clock moves past its lease
	is.Equal(strings.Count(during.Header.Get(webhook.HeaderSignature), "v1="), 2)
	is.Equal(len(strings.Fields(during.Header.Get("webhook-signature"))), 2)
	for _, secret := range []string{oldSecret, newSecret} {
		stripe, standard := verifiers(t, during, secret)
		is.True(stripe)
		is.True(standard)
	}

	e.Clock.Add(time.Hour + time.Millisecond)
	is.Equal(e.Do("POST", "/v1/loops/"+loopID+"/test", nil).Status, http.StatusAccepted)
	after := rcv.Wait(t, 2)[1]
	e.WaitDelivery(loopID, succeeded)
	is.Equal(strings.Count(after.Header.Get(webhook.HeaderSignature), "v1="), 1)
	stripe, standard := verifiers(t, after, newSecret)
	is.True(stripe && standard)
	stripe, standard = verifiers(t, after, oldSecret)
	is.True(!stripe && !standard)

	// Grace 0 replaces the secret at once.
	r = e.Do("PATCH", "/v1/loops/"+loopID, map[string]any{"rotate_secret": true, "secret_grace_seconds": 0})
	is.Equal(r.Status, http.StatusOK)
	third := r.Str("data.destination.secret")
	is.Equal(e.Do("POST", "/v1/loops/"+loopID+"/test", nil).Status, http.StatusAccepted)
	last := rcv.Wait(t, 3)[2]
	stripe, standard = verifiers(t, last, third)
	is.True(stripe && standard)
	stripe, standard = verifiers(t, last, newSecret)
	is.True(!stripe && !standard)
}

// scripted is a receiver that answers each request with the next of its handlers,
// then 200.
type scripted struct {
	srv   *httptest.Server
	mu    sync.Mutex
	steps []http.HandlerFunc
	calls atomic.Int64
}

func newScripted(t *testing.T, steps ...http.HandlerFunc) *scripted {
	s := &scripted{steps: steps}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.calls.Add(1)
		s.mu.Lock()
		var step http.HandlerFunc
		if len(s.steps) > 0 {
			step, s.steps = s.steps[0], s.steps[1:]
		}
		s.mu.Unlock()
		if step == nil {
			w.WriteHeader(http.StatusOK)
			return
		}
		step(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func answer(status int, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(status)
	}
}

// A 410 Gone fails the delivery at once, disables the Loop's destination (GET shows
// why and when), fails what was pending, and fails new deliveries without sending
// them; a retry is refused until a PATCH enables the destination again.
func TestAGoneReceiverDisablesTheDestination(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := newScripted(t, answer(http.StatusGone))
	loopID, _ := e.CreateLoop("Gone", rcv.srv.URL, "company")
	e.StartWorkers()

	is.Equal(e.Do("POST", "/v1/loops/"+loopID+"/test", nil).Status, http.StatusAccepted)
	d := e.WaitDelivery(loopID, func(d map[string]any) bool { return d["status"] == "failed" })
	is.Equal(d["attempts"], 1.0)
	is.Equal(d["last_status_code"], 410.0)
	is.Equal(d["next_attempt_at"], nil)
	is.True(strings.Contains(d["last_error"].(string), "410 Gone"))

	l := e.Do("GET", "/v1/loops/"+loopID, nil)
	is.Equal(l.Get("data.destination.enabled"), false)
	is.Equal(l.Str("data.destination.disabled_reason"), "the receiver answered 410 Gone")
	is.True(l.Str("data.destination.disabled_at") != "")
	is.Equal(l.Get("data.enabled"), true) // the Loop itself still takes runs

	test := e.Do("POST", "/v1/loops/"+loopID+"/test", nil)
	is.Equal(test.Status, http.StatusAccepted)
	is.Equal(test.Str("delivery.status"), "failed")
	is.True(strings.HasPrefix(test.Str("delivery.last_error"), "not sent: the Loop's destination is disabled"))
	retry := e.Do("POST", "/v1/deliveries/"+test.Str("delivery.id")+"/retry", nil)
	is.Equal(retry.Status, http.StatusConflict)
	is.Equal(retry.Str("code"), "destination_disabled")
	time.Sleep(2 * e.Cfg.PollInterval)   // the sender's polls
	is.Equal(rcv.calls.Load(), int64(1)) // nothing more was sent

	on := e.Do("PATCH", "/v1/loops/"+loopID, map[string]any{"destination": map[string]any{"enabled": true}})
	is.Equal(on.Status, http.StatusOK)
	is.Equal(on.Get("data.destination.enabled"), true)
	is.Equal(on.Get("data.destination.disabled_reason"), nil)
	is.Equal(e.Do("POST", "/v1/deliveries/"+test.Str("delivery.id")+"/retry", nil).Status, http.StatusAccepted)
	d = e.WaitDelivery(loopID, func(d map[string]any) bool { return d["status"] == "succeeded" })
	is.Equal(d["id"], test.Str("delivery.id"))
	is.Equal(rcv.calls.Load(), int64(2))
}

// A 429 or 503 with Retry-After (seconds, or an HTTP date) puts the next attempt at
// least that far off, at most the schedule's longest delay (6 h); without one, or a
// shorter one, the schedule holds.
func TestRetryAfterDelaysTheNextAttempt(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	start := e.Clock.Now()
	rcv := newScripted(t,
		answer(http.StatusTooManyRequests, "Retry-After", "120"),
		answer(http.StatusServiceUnavailable, "Retry-After", start.Add(120*time.Second+time.Hour).UTC().Format(http.TimeFormat)),
		answer(http.StatusTooManyRequests, "Retry-After", "86400"),
		answer(http.StatusServiceUnavailable, "Retry-After", "soon"),
		answer(http.StatusTooManyRequests, "Retry-After", "99999999999999999999"),
	)
	loopID, _ := e.CreateLoop("Busy", rcv.srv.URL, "company")
	e.StartWorkers()
	is.Equal(e.Do("POST", "/v1/loops/"+loopID+"/test", nil).Status, http.StatusAccepted)

	next := func(n int) time.Time {
		d := e.WaitDelivery(loopID, servertest.Attempts(n))
		is.Equal(d["status"], "pending")
		at, err := time.Parse(time.RFC3339Nano, d["next_attempt_at"].(string))
		is.NoErr(err)
		return at
	}
	at := next(1)
	is.Equal(at.Sub(e.Clock.Now().Truncate(time.Millisecond)), 120*time.Second) // not the schedule's 10 s
	e.Clock.Add(at.Sub(e.Clock.Now()))
	at = next(2)
	wait := at.Sub(e.Clock.Now().Truncate(time.Millisecond))
	is.True(wait >= time.Hour-time.Second && wait <= time.Hour) // the date (whole seconds), not the schedule's 1 min
	e.Clock.Add(at.Sub(e.Clock.Now()))
	at = next(3)
	is.Equal(at.Sub(e.Clock.Now().Truncate(time.Millisecond)), 6*time.Hour) // a day asked, 6 h at most
	e.Clock.Add(at.Sub(e.Clock.Now()))
	at = next(4)
	is.Equal(at.Sub(e.Clock.Now().Truncate(time.Millisecond)), 30*time.Minute) // unreadable: the schedule
	e.Clock.Add(at.Sub(e.Clock.Now()))
	at = next(5)
	is.Equal(at.Sub(e.Clock.Now().Truncate(time.Millisecond)), 6*time.Hour) // more seconds than an int64 holds: 6 h, not the schedule's 2 h
	is.Equal(rcv.calls.Load(), int64(5))
}

// A redirect is not followed: it is a failed attempt, retried on schedule, and the
// address it points to gets nothing.
func TestARedirectIsAFailedAttempt(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	var elsewhere atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	defer target.Close()
	rcv := newScripted(t, answer(http.StatusTemporaryRedirect, "Location", target.URL), answer(http.StatusMovedPermanently, "Location", target.URL))
	loopID, _ := e.CreateLoop("Moved", rcv.srv.URL, "company")
	e.StartWorkers()
	is.Equal(e.Do("POST", "/v1/loops/"+loopID+"/test", nil).Status, http.StatusAccepted)
	d := e.WaitDelivery(loopID, servertest.Attempts(1))
	is.Equal(d["status"], "pending")
	is.Equal(d["last_status_code"], 307.0)
	is.True(strings.Contains(d["last_error"].(string), "redirects are not followed"))
	e.Clock.Add(10 * time.Second)
	d = e.WaitDelivery(loopID, servertest.Attempts(2))
	is.Equal(d["last_status_code"], 301.0)
	is.Equal(elsewhere.Load(), int64(0))
}

// A Loop whose last attempts all failed is shown failing on the dashboard's Loops
// page, with the last error, and counted in /metrics; one acknowledged attempt
// clears it. A destination a 410 disabled is shown and counted too.
func TestFailingLoopsAreShownAndCounted(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	down := newScripted(t, answer(502), answer(502), answer(502))
	gone := newScripted(t, answer(http.StatusGone))
	fine := servertest.NewReceiver(t)
	downID, _ := e.CreateLoop("Down", down.srv.URL, "company")
	goneID, _ := e.CreateLoop("Gone", gone.srv.URL, "company")
	e.CreateLoop("Fine", fine.Srv.URL, "company")
	e.StartWorkers()
	b := e.SignIn("acme", "viewer")
	is.True(!b.Get("/dashboard/loops").Has("failing"))

	for i := 1; i <= 3; i++ {
		is.Equal(e.Do("POST", "/v1/loops/"+downID+"/test", nil).Status, http.StatusAccepted)
		e.WaitDelivery(downID, servertest.Attempts(1))
	}
	is.Equal(e.Do("POST", "/v1/loops/"+goneID+"/test", nil).Status, http.StatusAccepted)
	e.WaitDelivery(goneID, func(d map[string]any) bool { return d["status"] == "failed" })

	l := e.Do("GET", "/v1/loops/"+downID, nil)
	is.Equal(l.Get("data.failing"), true)
	is.Equal(l.Get("data.consecutive_failures"), 3.0)
	is.Equal(l.Str("data.last_delivery_error"), "the receiver answered 502 Bad Gateway")
	page := b.Get("/dashboard/loops")
	is.Equal(page.Status, http.StatusOK)
	is.Equal(strings.Count(page.Body, `class="status failed failing"`), 1)
	is.True(page.Has("the receiver answered 502 Bad Gateway"))
	is.True(page.Has("destination disabled"))
	is.True(page.Has("the receiver answered 410 Gone"))
	m := servertest.Scrape(t, e.HTTP.URL)
	is.Equal(m["enrichd_loops_failing"], 1.0)
	is.Equal(m["enrichd_loops_destination_disabled"], 1.0)

	// One delivery acknowledged: no longer failing; the last error stays on the page.
	is.Equal(e.Do("POST", "/v1/loops/"+downID+"/test", nil).Status, http.StatusAccepted)
	e.WaitDelivery(downID, func(d map[string]any) bool { return d["status"] == "succeeded" })
	is.Equal(e.Do("GET", "/v1/loops/"+downID, nil).Get("data.failing"), false)
	is.Equal(servertest.Scrape(t, e.HTTP.URL)["enrichd_loops_failing"], 0.0)
	loopPage := b.Get("/dashboard/loops/" + downID)
	is.True(loopPage.Has("the receiver answered 502 Bad Gateway"))
	gonePage := b.Get("/dashboard/loops/" + goneID)
	is.True(gonePage.Has(`id="destination-state"`))
	is.True(gonePage.Has("the receiver answered 410 Gone"))
	is.True(!gonePage.Has(`id="enable-destination"`)) // a viewer cannot enable it

	admin := e.SignIn("acme", "admin")
	p := admin.Post("/dashboard/loops/"+goneID+"/destination", url.Values{"enabled": {"true"}})
	is.Equal(p.Status, http.StatusSeeOther)
	is.Equal(e.Do("GET", "/v1/loops/"+goneID, nil).Get("data.destination.enabled"), true)
	is.Equal(servertest.Scrape(t, e.HTTP.URL)["enrichd_loops_destination_disabled"], 0.0)
}

// The dashboard's rotation takes a grace period in hours and says until when the old
// secret still signs; the Loop's page shows it after.
func TestTheDashboardRotatesWithAGracePeriod(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t)
	loopID, oldSecret := e.CreateLoop("Hooks", rcv.Srv.URL, "company")
	e.StartWorkers()
	admin := e.SignIn("acme", "admin")

	is.Equal(admin.Post("/dashboard/loops/"+loopID+"/rotate", url.Values{"grace_hours": {"-1"}}).Status, http.StatusBadRequest)
	p := admin.Post("/dashboard/loops/"+loopID+"/rotate", url.Values{"grace_hours": {"2"}})
	is.Equal(p.Status, http.StatusOK)
	newSecret := p.ShownSecret()
	is.True(newSecret != "" && newSecret != oldSecret)
	until := e.Clock.Now().Add(2 * time.Hour).UTC().Format("2006-01-02 15:04")
	is.True(p.Has("Until " + until))
	page := admin.Get("/dashboard/loops/" + loopID)
	is.True(page.Has(`id="previous-secret"`))
	is.True(page.Has(until))

	is.Equal(e.Do("POST", "/v1/loops/"+loopID+"/test", nil).Status, http.StatusAccepted)
	got := rcv.Wait(t, 1)[0]
	for _, secret := range []string{oldSecret, newSecret} {
		stripe, standard := verifiers(t, got, secret)
		is.True(stripe && standard)
	}
	e.WaitDelivery(loopID, func(d map[string]any) bool { return d["status"] == "succeeded" })
	e.Clock.Add(2*time.Hour + time.Second)
	is.True(!admin.Get("/dashboard/loops/" + loopID).Has(`id="previous-secret"`))
}
