package storetest

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/matryer/is"
)

// claimOne claims the one due delivery of the store.
func claimOne(t *testing.T, db *store.DB) *store.Dispatch {
	t.Helper()
	ds, err := db.ClaimDeliveries(context.Background(), 1, 8, nil, time.Minute)
	if err != nil || len(ds) != 1 {
		t.Fatalf("claim: %d deliveries, %v", len(ds), err)
	}
	return ds[0]
}

func record(t *testing.T, db *store.DB, at time.Time, attempts ...store.Attempted) {
	t.Helper()
	for _, a := range attempts {
		if a.Attempt != nil {
			a.Attempt.At, a.Attempt.Ended = at, at
		}
	}
	if err := db.RecordAttempts(context.Background(), attempts); err != nil {
		t.Fatal(err)
	}
}

func failed(d *store.Dispatch, code int, retryAfter time.Duration) store.Attempted {
	return store.Attempted{Dispatch: d, Attempt: &store.Attempt{StatusCode: code, Err: "the receiver answered " + http.StatusText(code), RetryAfter: retryAfter}}
}

func acknowledged(d *store.Dispatch) store.Attempted {
	return store.Attempted{Dispatch: d, Attempt: &store.Attempt{StatusCode: 200}}
}

func deliveryOf(t *testing.T, db *store.DB, org, id string) *store.Delivery {
	t.Helper()
	d, _, err := db.GetDelivery(context.Background(), org, id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A rotation with a grace period keeps the old secret signing beside the new one
// until the period ends, and says when; a second rotation within it keeps only the
// secret it replaced; a rotation with none drops the old secret at once; a grace
// period out of bounds is refused and changes nothing.
func testRotationKeepsTheOldSecretForItsGracePeriod(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	l := newLoop(t, db, org, "hooks", enrich.ObjectCompany)

	first, err := db.RotateLoopSecret(ctx, org, l.ID, store.DefaultSecretGrace)
	is.NoErr(err)
	is.Equal(*first.Destination.PreviousSecretExpiresAt, clk.Now().Add(24*time.Hour))
	got, err := db.GetLoop(ctx, org, l.ID)
	is.NoErr(err)
	is.Equal(*got.Destination.PreviousSecretExpiresAt, clk.Now().Add(24*time.Hour))
	is.Equal(got.Destination.Secret, "")

	_, err = db.CreateTestDelivery(ctx, org, l.ID)
	is.NoErr(err)
	d := claimOne(t, db)
	is.Equal(d.Secret, first.Destination.Secret)
	is.Equal(d.PreviousSecret, l.Destination.Secret)
	record(t, db, clk.Now(), acknowledged(d))

	clk.Add(time.Hour)
	second, err := db.RotateLoopSecret(ctx, org, l.ID, time.Hour)
	is.NoErr(err)
	_, err = db.CreateTestDelivery(ctx, org, l.ID)
	is.NoErr(err)
	d = claimOne(t, db)
	is.Equal(d.Secret, second.Destination.Secret)
	is.Equal(d.PreviousSecret, first.Destination.Secret) // the first rotation's old secret is gone
	record(t, db, clk.Now(), acknowledged(d))

	clk.Add(time.Hour) // the grace period is over
	_, err = db.CreateTestDelivery(ctx, org, l.ID)
	is.NoErr(err)
	d = claimOne(t, db)
	is.Equal(d.Secret, second.Destination.Secret)
	is.Equal(d.PreviousSecret, "")
	record(t, db, clk.Now(), acknowledged(d))

	third, err := db.RotateLoopSecret(ctx, org, l.ID, 0)
	is.NoErr(err)
	is.Equal(*third.Destination.PreviousSecretExpiresAt, clk.Now())
	_, err = db.CreateTestDelivery(ctx, org, l.ID)
	is.NoErr(err)
	d = claimOne(t, db)
	is.Equal(d.Secret, third.Destination.Secret)
	is.Equal(d.PreviousSecret, "")
	record(t, db, clk.Now(), acknowledged(d))

	for _, grace := range []time.Duration{-time.Second, store.MaxSecretGrace + time.Second} {
		_, err = db.RotateLoopSecret(ctx, org, l.ID, grace)
		is.Equal(enrich.KindOf(err), enrich.KindInvalid)
	}
	_, err = db.CreateTestDelivery(ctx, org, l.ID)
	is.NoErr(err)
	is.Equal(claimOne(t, db).Secret, third.Destination.Secret)
}

// A 410 Gone fails its delivery at once, disables the Loop's destination with the
// reason and the time, and fails the Loop's other pending deliveries, except one
// being sent, which fails when its attempt is recorded; what comes later is failed at
// once, and cannot be retried until the destination is enabled again (a patch), after
// which a retry is due at once. Another Loop is untouched.
func testAGoneReceiverDisablesTheDestination(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	l := newLoop(t, db, org, "gone", enrich.ObjectCompany)
	other := newLoop(t, db, org, "fine", enrich.ObjectCompany)
	sent, err := db.CreateTestDelivery(ctx, org, l.ID)
	is.NoErr(err)
	clk.Add(time.Millisecond)
	inFlight, err := db.CreateTestDelivery(ctx, org, l.ID)
	is.NoErr(err)
	clk.Add(time.Millisecond)
	waiting, err := db.CreateTestDelivery(ctx, org, l.ID)
	is.NoErr(err)
	clk.Add(time.Millisecond)
	elsewhere, err := db.CreateTestDelivery(ctx, org, other.ID)
	is.NoErr(err)

	ds, err := db.ClaimDeliveries(ctx, 2, 8, nil, time.Minute)
	is.NoErr(err)
	is.Equal(len(ds), 2)
	is.Equal(ds[0].ID, sent.ID)
	is.Equal(ds[1].ID, inFlight.ID)
	clk.Add(time.Second)
	goneAt := clk.Now()
	record(t, db, goneAt, failed(ds[0], http.StatusGone, 0))

	got := deliveryOf(t, db, org, sent.ID)
	is.Equal(got.Status, store.DeliveryFailed)
	is.Equal(*got.LastStatusCode, http.StatusGone)
	is.Equal(got.Attempts, 1)
	is.Equal(got.NextAttemptAt, nil)
	loop, err := db.GetLoop(ctx, org, l.ID)
	is.NoErr(err)
	is.Equal(loop.Destination.Enabled, false)
	is.Equal(*loop.Destination.DisabledReason, store.ReasonGone)
	is.Equal(*loop.Destination.DisabledAt, goneAt)
	is.Equal(loop.Enabled, true) // the Loop still takes runs; only its destination is off
	got = deliveryOf(t, db, org, waiting.ID)
	is.Equal(got.Status, store.DeliveryFailed)
	is.Equal(got.Attempts, 0)
	is.Equal(*got.LastError, store.NotSentError(store.ReasonGone))
	is.Equal(got.NextAttemptAt, nil)
	is.Equal(deliveryOf(t, db, org, inFlight.ID).Status, store.DeliveryPending) // being sent
	is.Equal(deliveryOf(t, db, org, elsewhere.ID).Status, store.DeliveryPending)
	_, disabled, err := db.LoopTrouble(ctx)
	is.NoErr(err)
	is.Equal(disabled, int64(1))

	record(t, db, clk.Now(), failed(ds[1], http.StatusInternalServerError, 0))
	got = deliveryOf(t, db, org, inFlight.ID)
	is.Equal(got.Status, store.DeliveryFailed)
	is.Equal(got.Attempts, 1)
	is.True(strings.HasPrefix(*got.LastError, "not sent: the Loop's destination is disabled"))

	later, err := db.CreateTestDelivery(ctx, org, l.ID)
	is.NoErr(err)
	is.Equal(later.Status, store.DeliveryFailed)
	is.Equal(*later.LastError, store.NotSentError(store.ReasonGone))
	_, err = db.RetryDelivery(ctx, org, later.ID)
	is.Equal(enrich.KindOf(err), enrich.KindConflict)
	var refusal *enrich.Error
	is.True(errors.As(err, &refusal))
	is.Equal(refusal.Code, "destination_disabled")
	ds, err = db.ClaimDeliveries(ctx, 10, 8, nil, time.Minute)
	is.NoErr(err)
	is.Equal(len(ds), 1) // only the other Loop's
	is.Equal(ds[0].ID, elsewhere.ID)

	on := true
	loop, err = db.UpdateLoop(ctx, org, l.ID, store.LoopPatch{DestinationEnabled: &on})
	is.NoErr(err)
	is.Equal(loop.Destination.Enabled, true)
	is.Equal(loop.Destination.DisabledReason, nil)
	is.Equal(loop.ConsecutiveFailures, 0)
	loop, err = db.GetLoop(ctx, org, l.ID)
	is.NoErr(err)
	is.Equal(loop.Destination.Enabled, true)
	is.Equal(loop.Destination.DisabledAt, nil)
	retried, err := db.RetryDelivery(ctx, org, later.ID)
	is.NoErr(err)
	is.Equal(retried.Status, store.DeliveryPending)
	is.Equal(claimOne(t, db).ID, later.ID)
	_, disabled, err = db.LoopTrouble(ctx)
	is.NoErr(err)
	is.Equal(disabled, int64(0))

	// Disabling on request fails what is pending the same way, with its own reason.
	pending, err := db.CreateTestDelivery(ctx, org, other.ID)
	is.NoErr(err)
	off := false
	loop, err = db.UpdateLoop(ctx, org, other.ID, store.LoopPatch{DestinationEnabled: &off})
	is.NoErr(err)
	is.Equal(*loop.Destination.DisabledReason, store.ReasonDisabledOnRequest)
	got = deliveryOf(t, db, org, pending.ID)
	is.Equal(got.Status, store.DeliveryFailed)
	is.Equal(*got.LastError, store.NotSentError(store.ReasonDisabledOnRequest))
}

// A 429 or 503 with Retry-After puts the next attempt at least that far off, capped
// at the schedule's longest delay; a shorter one keeps the schedule; the number of
// attempts stays the contract's.
func testRetryAfterDelaysTheNextAttempt(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	l := newLoop(t, db, org, "busy", enrich.ObjectCompany)
	created, err := db.CreateTestDelivery(ctx, org, l.ID)
	is.NoErr(err)

	for i, c := range []struct {
		code       int
		retryAfter time.Duration
		want       time.Duration
	}{
		{http.StatusTooManyRequests, 2 * time.Minute, 2 * time.Minute}, // after attempt 1: more than 10 s
		{http.StatusServiceUnavailable, 10 * time.Second, time.Minute}, // after 2: less than the schedule's 1 min
		{http.StatusServiceUnavailable, 48 * time.Hour, 6 * time.Hour}, // after 3: capped
		{http.StatusTooManyRequests, 0, 30 * time.Minute},              // after 4: none given
		{http.StatusTooManyRequests, 3 * time.Hour, 3 * time.Hour},     // after 5
		{http.StatusServiceUnavailable, 7 * time.Hour, 6 * time.Hour},  // after 6
		{http.StatusServiceUnavailable, time.Hour, 0},                  // attempt 7 is the last
	} {
		d := claimOne(t, db)
		is.Equal(d.Attempt, i+1)
		record(t, db, clk.Now(), failed(d, c.code, c.retryAfter))
		got := deliveryOf(t, db, org, created.ID)
		if c.want == 0 {
			is.Equal(got.Status, store.DeliveryFailed)
			is.Equal(got.Attempts, store.MaxAttempts)
			break
		}
		is.Equal(got.Status, store.DeliveryPending)
		is.Equal(*got.NextAttemptAt, clk.Now().Add(c.want))
		clk.Add(c.want - time.Millisecond)
		ds, err := db.ClaimDeliveries(ctx, 1, 8, nil, time.Minute)
		is.NoErr(err)
		is.Equal(len(ds), 0) // not due before
		clk.Add(time.Millisecond)
	}
}

// A Loop is failing once its last FailingAfter attempts failed, whichever deliveries
// they were, with the last error kept; an acknowledged attempt clears the streak but
// not the last error. /metrics counts the failing Loops.
func testALoopWhoseAttemptsAllFailIsFailing(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	l := newLoop(t, db, org, "down", enrich.ObjectCompany)
	newLoop(t, db, org, "quiet", enrich.ObjectCompany)

	for i := 1; i <= store.FailingAfter; i++ {
		_, err := db.CreateTestDelivery(ctx, org, l.ID)
		is.NoErr(err)
		clk.Add(time.Minute)
		record(t, db, clk.Now(), failed(claimOne(t, db), http.StatusBadGateway, 0))
		loop, err := db.GetLoop(ctx, org, l.ID)
		is.NoErr(err)
		is.Equal(loop.ConsecutiveFailures, i)
		is.Equal(loop.Failing, i >= store.FailingAfter)
		is.Equal(*loop.LastDeliveryError, "the receiver answered Bad Gateway")
		is.Equal(*loop.LastDeliveryErrorAt, clk.Now())
		failing, _, err := db.LoopTrouble(ctx)
		is.NoErr(err)
		is.Equal(failing == 1, i >= store.FailingAfter)
	}
	loops, err := db.ListLoops(ctx, org)
	is.NoErr(err)
	is.Equal(loops[0].Failing, true)
	is.Equal(loops[1].Failing, false)

	// One acknowledged attempt ends the streak; the last error stays.
	clk.Add(time.Hour) // the rescheduled deliveries are due again
	ds, err := db.ClaimDeliveries(ctx, 10, 8, nil, time.Minute)
	is.NoErr(err)
	is.Equal(len(ds), store.FailingAfter)
	record(t, db, clk.Now(), acknowledged(ds[0]))
	loop, err := db.GetLoop(ctx, org, l.ID)
	is.NoErr(err)
	is.Equal(loop.Failing, false)
	is.Equal(loop.ConsecutiveFailures, 0)
	is.Equal(*loop.LastDeliveryError, "the receiver answered Bad Gateway")
	failing, _, err := db.LoopTrouble(ctx)
	is.NoErr(err)
	is.Equal(failing, int64(0))
	record(t, db, clk.Now(), failed(ds[1], http.StatusServiceUnavailable, 0))
	loop, err = db.GetLoop(ctx, org, l.ID)
	is.NoErr(err)
	is.Equal(loop.ConsecutiveFailures, 1)
	is.Equal(*loop.LastDeliveryError, "the receiver answered Service Unavailable")
}

// Attempts that end together are recorded in one batch: a 410 Gone in it disables the
// destination even when another delivery of the same Loop was acknowledged after it,
// and an attempt that failed before that acknowledgement, on a destination disabled
// meanwhile, is failed rather than rescheduled. The Loop's last error is the batch's.
func testAGoneBeforeAnAcknowledgementInOneBatchStillDisables(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	gone := newLoop(t, db, org, "gone", enrich.ObjectCompany)
	off := newLoop(t, db, org, "off", enrich.ObjectCompany)
	for _, l := range []*store.Loop{gone, gone, off, off} {
		_, err := db.CreateTestDelivery(ctx, org, l.ID)
		is.NoErr(err)
		clk.Add(time.Millisecond)
	}
	ds, err := db.ClaimDeliveries(ctx, 4, 8, nil, time.Minute)
	is.NoErr(err)
	is.Equal(len(ds), 4)
	byLoop := map[string][]*store.Dispatch{}
	for _, d := range ds {
		byLoop[d.LoopID] = append(byLoop[d.LoopID], d)
	}
	no := false
	_, err = db.UpdateLoop(ctx, org, off.ID, store.LoopPatch{DestinationEnabled: &no}) // while its two are being sent
	is.NoErr(err)

	clk.Add(time.Second)
	at := clk.Now()
	ended := func(a store.Attempted, after time.Duration) store.Attempted {
		a.Attempt.At, a.Attempt.Ended = at, at.Add(after)
		return a
	}
	is.NoErr(db.RecordAttempts(ctx, []store.Attempted{
		ended(failed(byLoop[gone.ID][0], http.StatusGone, 0), 0),
		ended(acknowledged(byLoop[gone.ID][1]), time.Millisecond),
		ended(failed(byLoop[off.ID][0], http.StatusBadGateway, 0), 0),
		ended(acknowledged(byLoop[off.ID][1]), time.Millisecond),
	}))

	loop, err := db.GetLoop(ctx, org, gone.ID)
	is.NoErr(err)
	is.Equal(loop.Destination.Enabled, false) // the receiver said 410 Gone
	is.Equal(*loop.Destination.DisabledReason, store.ReasonGone)
	is.Equal(loop.ConsecutiveFailures, 0)
	is.Equal(*loop.LastDeliveryError, "the receiver answered Gone")
	is.Equal(deliveryOf(t, db, org, byLoop[gone.ID][0].ID).Status, store.DeliveryFailed)

	loop, err = db.GetLoop(ctx, org, off.ID)
	is.NoErr(err)
	is.Equal(*loop.LastDeliveryError, "the receiver answered Bad Gateway")
	got := deliveryOf(t, db, org, byLoop[off.ID][0].ID)
	is.Equal(got.Status, store.DeliveryFailed) // not rescheduled to a disabled destination
	is.Equal(*got.LastError, store.NotSentError(store.ReasonDisabledOnRequest))
	is.Equal(deliveryOf(t, db, org, byLoop[off.ID][1].ID).Status, store.DeliverySucceeded)
}

// A delivery claimed after its Loop's destination was disabled (its earlier claim's
// lease ran out while the destination was being disabled) is not sent: recording that
// fails it as the destination's other pending deliveries failed, without counting an
// attempt, and without touching the Loop's failure streak or last error, which say
// what the receiver answered.
func testADeliveryNotSentToADisabledDestinationIsNoAttempt(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	l := newLoop(t, db, org, "gone", enrich.ObjectCompany)
	first, err := db.CreateTestDelivery(ctx, org, l.ID)
	is.NoErr(err)
	clk.Add(time.Millisecond)
	stranded, err := db.CreateTestDelivery(ctx, org, l.ID)
	is.NoErr(err)
	ds, err := db.ClaimDeliveries(ctx, 2, 8, nil, time.Minute)
	is.NoErr(err)
	is.Equal(len(ds), 2)
	clk.Add(time.Second)
	record(t, db, clk.Now(), failed(ds[0], http.StatusGone, 0)) // the other attempt is never recorded

	clk.Add(time.Minute) // its lease runs out
	d := claimOne(t, db)
	is.Equal(d.ID, stranded.ID)
	is.Equal(d.DisabledReason, store.ReasonGone)
	at := clk.Now()
	is.NoErr(db.RecordAttempts(ctx, []store.Attempted{{Dispatch: d,
		Attempt: &store.Attempt{At: at, Ended: at, Err: store.NotSentError(d.DisabledReason), NotSent: true}}}))

	got := deliveryOf(t, db, org, stranded.ID)
	is.Equal(got.Status, store.DeliveryFailed)
	is.Equal(got.Attempts, 0) // nothing was sent
	is.Equal(got.NextAttemptAt, nil)
	is.Equal(*got.LastError, store.NotSentError(store.ReasonGone))
	is.True(got.LastAttemptAt != nil) // retention deletes it in time
	loop, err := db.GetLoop(ctx, org, l.ID)
	is.NoErr(err)
	is.Equal(loop.ConsecutiveFailures, 1) // the 410 alone
	is.Equal(*loop.LastDeliveryError, "the receiver answered Gone")
	is.Equal(deliveryOf(t, db, org, first.ID).Attempts, 1)
}
