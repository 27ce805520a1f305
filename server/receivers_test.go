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

	"enrichd/webhook"

	"github.com/matryer/is"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	stripewebhook "github.com/stripe/stripe-go/v85/webhook"
)

// verifiers says whether each third-party library, holding only secret, accepts the
// delivery; the timestamp is not checked, since the store's clock is moved in tests.
func verifiers(t *testing.T, got received, secret string) (stripe, standard bool) {
	t.Helper()
	stripe = stripewebhook.ValidatePayloadIgnoringTolerance(got.body, got.header.Get(webhook.HeaderSignature), secret) == nil
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatalf("the Standard Webhooks library cannot take the secret %q: %v", secret, err)
	}
	return stripe, wh.VerifyIgnoringTimestamp(got.body, got.header) == nil
}

// Every delivery carries the Standard Webhooks headers beside ours, with the same
// secret: webhook-id is the delivery id on every attempt, webhook-timestamp the second
// of t=; the specification's own library verifies it, as stripe-go verifies ours, and
// neither accepts a byte changed.
func TestDeliveriesCarryTheStandardWebhooksHeaders(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	rcv := newReceiver(t, 500)
	loopID, secret := e.createLoop("Hooks", rcv.srv.URL, "company")
	e.startWorkers()

	is.Equal(e.do("POST", "/v1/loops/"+loopID+"/test", nil).status, http.StatusAccepted)
	e.waitDelivery(loopID, attempts(1))
	e.clock.Add(10 * time.Second)
	d := e.waitDelivery(loopID, attempts(2))
	is.Equal(d["status"], "succeeded")

	for _, got := range rcv.wait(t, 2) {
		is.Equal(got.header.Get("webhook-id"), d["id"])
		is.Equal(got.header.Get("webhook-id"), got.header.Get(webhook.HeaderDeliveryID))
		is.Equal(got.header.Get("webhook-timestamp"), strings.TrimPrefix(strings.Split(got.header.Get(webhook.HeaderSignature), ",")[0], "t="))
		is.True(strings.HasPrefix(got.header.Get("webhook-signature"), "v1,"))
		stripe, standard := verifiers(t, got, secret)
		is.True(stripe)
		is.True(standard)
		is.NoErr(webhook.VerifyHeaders(got.body, got.header, secret, time.Hour))
		standardOnly := got.header.Clone()
		standardOnly.Del(webhook.HeaderSignature)
		is.NoErr(webhook.VerifyHeaders(got.body, standardOnly, secret, time.Hour))

		changed := received{header: got.header, body: append([]byte(nil), got.body...)}
		changed.body[len(changed.body)/2] ^= 1
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
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	rcv := newReceiver(t)
	loopID, oldSecret := e.createLoop("Hooks", rcv.srv.URL, "company")
	e.startWorkers()

	for _, bad := range []map[string]any{
		{"secret_grace_seconds": 60},
		{"rotate_secret": true, "secret_grace_seconds": -1},
		{"rotate_secret": true, "secret_grace_seconds": 604801},
		{"rotate_secret": true, "secret_grace_seconds": "1h"},
		{"destination": map[string]any{}},
		{"rotate_secret": true, "name": ""},
	} {
		r := e.do("PATCH", "/v1/loops/"+loopID, bad)
		is.Equal(r.status, http.StatusBadRequest)
		is.True(r.str("error") != "")
	}

	r := e.do("PATCH", "/v1/loops/"+loopID, map[string]any{"rotate_secret": true, "secret_grace_seconds": 3600})
	is.Equal(r.status, http.StatusOK)
	newSecret := r.str("data.destination.secret")
	is.True(strings.HasPrefix(newSecret, "whsec_"))
	is.True(newSecret != oldSecret)
	expires, err := time.Parse(time.RFC3339Nano, r.str("data.destination.previous_secret_expires_at"))
	is.NoErr(err)
	is.Equal(expires.UnixMilli(), e.clock.Now().Add(time.Hour).UnixMilli())
	got := e.do("GET", "/v1/loops/"+loopID, nil)
	is.Equal(got.get("data.destination.secret"), nil) // shown once
	is.Equal(got.str("data.destination.previous_secret_expires_at"), r.str("data.destination.previous_secret_expires_at"))

	is.Equal(e.do("POST", "/v1/loops/"+loopID+"/test", nil).status, http.StatusAccepted)
	during := rcv.wait(t, 1)[0]
	succeeded := func(d map[string]any) bool { return d["status"] == "succeeded" }
	e.waitDelivery(loopID, succeeded) // recorded before the clock moves past its lease
	is.Equal(strings.Count(during.header.Get(webhook.HeaderSignature), "v1="), 2)
	is.Equal(len(strings.Fields(during.header.Get("webhook-signature"))), 2)
	for _, secret := range []string{oldSecret, newSecret} {
		stripe, standard := verifiers(t, during, secret)
		is.True(stripe)
		is.True(standard)
	}

	e.clock.Add(time.Hour + time.Millisecond)
	is.Equal(e.do("POST", "/v1/loops/"+loopID+"/test", nil).status, http.StatusAccepted)
	after := rcv.wait(t, 2)[1]
	e.waitDelivery(loopID, succeeded)
	is.Equal(strings.Count(after.header.Get(webhook.HeaderSignature), "v1="), 1)
	stripe, standard := verifiers(t, after, newSecret)
	is.True(stripe && standard)
	stripe, standard = verifiers(t, after, oldSecret)
	is.True(!stripe && !standard)

	// Grace 0 replaces the secret at once.
	r = e.do("PATCH", "/v1/loops/"+loopID, map[string]any{"rotate_secret": true, "secret_grace_seconds": 0})
	is.Equal(r.status, http.StatusOK)
	third := r.str("data.destination.secret")
	is.Equal(e.do("POST", "/v1/loops/"+loopID+"/test", nil).status, http.StatusAccepted)
	last := rcv.wait(t, 3)[2]
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
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	rcv := newScripted(t, answer(http.StatusGone))
	loopID, _ := e.createLoop("Gone", rcv.srv.URL, "company")
	e.startWorkers()

	is.Equal(e.do("POST", "/v1/loops/"+loopID+"/test", nil).status, http.StatusAccepted)
	d := e.waitDelivery(loopID, func(d map[string]any) bool { return d["status"] == "failed" })
	is.Equal(d["attempts"], 1.0)
	is.Equal(d["last_status_code"], 410.0)
	is.Equal(d["next_attempt_at"], nil)
	is.True(strings.Contains(d["last_error"].(string), "410 Gone"))

	l := e.do("GET", "/v1/loops/"+loopID, nil)
	is.Equal(l.get("data.destination.enabled"), false)
	is.Equal(l.str("data.destination.disabled_reason"), "the receiver answered 410 Gone")
	is.True(l.str("data.destination.disabled_at") != "")
	is.Equal(l.get("data.enabled"), true) // the Loop itself still takes runs

	test := e.do("POST", "/v1/loops/"+loopID+"/test", nil)
	is.Equal(test.status, http.StatusAccepted)
	is.Equal(test.str("delivery.status"), "failed")
	is.True(strings.HasPrefix(test.str("delivery.last_error"), "not sent: the Loop's destination is disabled"))
	retry := e.do("POST", "/v1/deliveries/"+test.str("delivery.id")+"/retry", nil)
	is.Equal(retry.status, http.StatusConflict)
	is.Equal(retry.str("code"), "destination_disabled")
	time.Sleep(50 * time.Millisecond)
	is.Equal(rcv.calls.Load(), int64(1)) // nothing more was sent

	on := e.do("PATCH", "/v1/loops/"+loopID, map[string]any{"destination": map[string]any{"enabled": true}})
	is.Equal(on.status, http.StatusOK)
	is.Equal(on.get("data.destination.enabled"), true)
	is.Equal(on.get("data.destination.disabled_reason"), nil)
	is.Equal(e.do("POST", "/v1/deliveries/"+test.str("delivery.id")+"/retry", nil).status, http.StatusAccepted)
	d = e.waitDelivery(loopID, func(d map[string]any) bool { return d["status"] == "succeeded" })
	is.Equal(d["id"], test.str("delivery.id"))
	is.Equal(rcv.calls.Load(), int64(2))
}

// A 429 or 503 with Retry-After (seconds, or an HTTP date) puts the next attempt at
// least that far off, at most the schedule's longest delay (6 h); without one, or a
// shorter one, the schedule holds.
func TestRetryAfterDelaysTheNextAttempt(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	start := e.clock.Now()
	rcv := newScripted(t,
		answer(http.StatusTooManyRequests, "Retry-After", "120"),
		answer(http.StatusServiceUnavailable, "Retry-After", start.Add(120*time.Second+time.Hour).UTC().Format(http.TimeFormat)),
		answer(http.StatusTooManyRequests, "Retry-After", "86400"),
		answer(http.StatusServiceUnavailable, "Retry-After", "soon"),
		answer(http.StatusTooManyRequests, "Retry-After", "99999999999999999999"),
	)
	loopID, _ := e.createLoop("Busy", rcv.srv.URL, "company")
	e.startWorkers()
	is.Equal(e.do("POST", "/v1/loops/"+loopID+"/test", nil).status, http.StatusAccepted)

	next := func(n int) time.Time {
		d := e.waitDelivery(loopID, attempts(n))
		is.Equal(d["status"], "pending")
		at, err := time.Parse(time.RFC3339Nano, d["next_attempt_at"].(string))
		is.NoErr(err)
		return at
	}
	at := next(1)
	is.Equal(at.Sub(e.clock.Now().Truncate(time.Millisecond)), 120*time.Second) // not the schedule's 10 s
	e.clock.Add(at.Sub(e.clock.Now()))
	at = next(2)
	wait := at.Sub(e.clock.Now().Truncate(time.Millisecond))
	is.True(wait >= time.Hour-time.Second && wait <= time.Hour) // the date (whole seconds), not the schedule's 1 min
	e.clock.Add(at.Sub(e.clock.Now()))
	at = next(3)
	is.Equal(at.Sub(e.clock.Now().Truncate(time.Millisecond)), 6*time.Hour) // a day asked, 6 h at most
	e.clock.Add(at.Sub(e.clock.Now()))
	at = next(4)
	is.Equal(at.Sub(e.clock.Now().Truncate(time.Millisecond)), 30*time.Minute) // unreadable: the schedule
	e.clock.Add(at.Sub(e.clock.Now()))
	at = next(5)
	is.Equal(at.Sub(e.clock.Now().Truncate(time.Millisecond)), 6*time.Hour) // more seconds than an int64 holds: 6 h, not the schedule's 2 h
	is.Equal(rcv.calls.Load(), int64(5))
}

// A redirect is not followed: it is a failed attempt, retried on schedule, and the
// address it points to gets nothing.
func TestARedirectIsAFailedAttempt(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	var elsewhere atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	defer target.Close()
	rcv := newScripted(t, answer(http.StatusTemporaryRedirect, "Location", target.URL), answer(http.StatusMovedPermanently, "Location", target.URL))
	loopID, _ := e.createLoop("Moved", rcv.srv.URL, "company")
	e.startWorkers()
	is.Equal(e.do("POST", "/v1/loops/"+loopID+"/test", nil).status, http.StatusAccepted)
	d := e.waitDelivery(loopID, attempts(1))
	is.Equal(d["status"], "pending")
	is.Equal(d["last_status_code"], 307.0)
	is.True(strings.Contains(d["last_error"].(string), "redirects are not followed"))
	e.clock.Add(10 * time.Second)
	d = e.waitDelivery(loopID, attempts(2))
	is.Equal(d["last_status_code"], 301.0)
	is.Equal(elsewhere.Load(), int64(0))
}

// A Loop whose last attempts all failed is shown failing on the dashboard's Loops
// page, with the last error, and counted in /metrics; one acknowledged attempt
// clears it. A destination a 410 disabled is shown and counted too.
func TestFailingLoopsAreShownAndCounted(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	down := newScripted(t, answer(502), answer(502), answer(502))
	gone := newScripted(t, answer(http.StatusGone))
	fine := newReceiver(t)
	downID, _ := e.createLoop("Down", down.srv.URL, "company")
	goneID, _ := e.createLoop("Gone", gone.srv.URL, "company")
	e.createLoop("Fine", fine.srv.URL, "company")
	e.startWorkers()
	b := e.signIn("acme", "viewer")
	is.True(!b.get("/dashboard/loops").has("failing"))

	for i := 1; i <= 3; i++ {
		is.Equal(e.do("POST", "/v1/loops/"+downID+"/test", nil).status, http.StatusAccepted)
		e.waitDelivery(downID, attempts(1))
	}
	is.Equal(e.do("POST", "/v1/loops/"+goneID+"/test", nil).status, http.StatusAccepted)
	e.waitDelivery(goneID, func(d map[string]any) bool { return d["status"] == "failed" })

	l := e.do("GET", "/v1/loops/"+downID, nil)
	is.Equal(l.get("data.failing"), true)
	is.Equal(l.get("data.consecutive_failures"), 3.0)
	is.Equal(l.str("data.last_delivery_error"), "the receiver answered 502 Bad Gateway")
	page := b.get("/dashboard/loops")
	is.Equal(page.status, http.StatusOK)
	is.Equal(strings.Count(page.body, `class="status failed failing"`), 1)
	is.True(page.has("the receiver answered 502 Bad Gateway"))
	is.True(page.has("destination disabled"))
	is.True(page.has("the receiver answered 410 Gone"))
	m := scrape(t, e.http.URL)
	is.Equal(m["enrichd_loops_failing"], 1.0)
	is.Equal(m["enrichd_loops_destination_disabled"], 1.0)

	// One delivery acknowledged: no longer failing; the last error stays on the page.
	is.Equal(e.do("POST", "/v1/loops/"+downID+"/test", nil).status, http.StatusAccepted)
	e.waitDelivery(downID, func(d map[string]any) bool { return d["status"] == "succeeded" })
	is.Equal(e.do("GET", "/v1/loops/"+downID, nil).get("data.failing"), false)
	is.Equal(scrape(t, e.http.URL)["enrichd_loops_failing"], 0.0)
	loopPage := b.get("/dashboard/loops/" + downID)
	is.True(loopPage.has("the receiver answered 502 Bad Gateway"))
	gonePage := b.get("/dashboard/loops/" + goneID)
	is.True(gonePage.has(`id="destination-state"`))
	is.True(gonePage.has("the receiver answered 410 Gone"))
	is.True(!gonePage.has(`id="enable-destination"`)) // a viewer cannot enable it

	admin := e.signIn("acme", "admin")
	p := admin.post("/dashboard/loops/"+goneID+"/destination", url.Values{"enabled": {"true"}})
	is.Equal(p.status, http.StatusSeeOther)
	is.Equal(e.do("GET", "/v1/loops/"+goneID, nil).get("data.destination.enabled"), true)
	is.Equal(scrape(t, e.http.URL)["enrichd_loops_destination_disabled"], 0.0)
}

// The dashboard's rotation takes a grace period in hours and says until when the old
// secret still signs; the Loop's page shows it after.
func TestTheDashboardRotatesWithAGracePeriod(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	rcv := newReceiver(t)
	loopID, oldSecret := e.createLoop("Hooks", rcv.srv.URL, "company")
	e.startWorkers()
	admin := e.signIn("acme", "admin")

	is.Equal(admin.post("/dashboard/loops/"+loopID+"/rotate", url.Values{"grace_hours": {"-1"}}).status, http.StatusBadRequest)
	p := admin.post("/dashboard/loops/"+loopID+"/rotate", url.Values{"grace_hours": {"2"}})
	is.Equal(p.status, http.StatusOK)
	newSecret := p.shownSecret()
	is.True(newSecret != "" && newSecret != oldSecret)
	until := e.clock.Now().Add(2 * time.Hour).UTC().Format("2006-01-02 15:04")
	is.True(p.has("Until " + until))
	page := admin.get("/dashboard/loops/" + loopID)
	is.True(page.has(`id="previous-secret"`))
	is.True(page.has(until))

	is.Equal(e.do("POST", "/v1/loops/"+loopID+"/test", nil).status, http.StatusAccepted)
	got := rcv.wait(t, 1)[0]
	for _, secret := range []string{oldSecret, newSecret} {
		stripe, standard := verifiers(t, got, secret)
		is.True(stripe && standard)
	}
	e.waitDelivery(loopID, func(d map[string]any) bool { return d["status"] == "succeeded" })
	e.clock.Add(2*time.Hour + time.Second)
	is.True(!admin.get("/dashboard/loops/" + loopID).has(`id="previous-secret"`))
}
