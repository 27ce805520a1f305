package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"enrichd/netguard"
	"enrichd/store"
	"enrichd/webhook/signature"
)

// DefaultAttemptTimeout is how long one attempt may take before it counts as failed.
const DefaultAttemptTimeout = 10 * time.Second

// Sender delivers the deliveries the store says are due. Many go out at once, but at
// most PerLoop to one Loop, so a slow receiver holds up only its own deliveries.
type Sender struct {
	db          *store.DB
	client      *http.Client
	log         *slog.Logger
	concurrency int
	perLoop     int
	poll        time.Duration
	timeout     time.Duration
	allowHTTP   bool
	lease       time.Duration
	wake        chan struct{}
	recorded    func([]store.Attempted)
	panicked    func()
	// destinations deliver the Loops whose destination is not a webhook, by kind.
	destinations map[string]Destination
}

// SenderConfig tunes a Sender; zero values take the defaults.
type SenderConfig struct {
	Policy      netguard.Policy // which receivers may be reached
	Concurrency int             // deliveries in flight at once; 64
	PerLoop     int             // deliveries in flight to one Loop; 8
	Poll        time.Duration   // how often to look for due deliveries nobody woke it for; 250ms
	Timeout     time.Duration   // how long an attempt may take; DefaultAttemptTimeout
	Logger      *slog.Logger
	// Recorded, when set, is told of every batch of attempts once it is written.
	Recorded func([]store.Attempted)
	// Panicked, when set, is told of every panic recovered in an attempt.
	Panicked func()
	// Destinations deliver to the destination kinds other than a webhook
	// (store.KindHubSpot), by kind.
	Destinations map[string]Destination
}

// NewSender returns a Sender over db. Call Run to start it.
func NewSender(db *store.DB, cfg SenderConfig) *Sender {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 64
	}
	if cfg.PerLoop <= 0 {
		cfg.PerLoop = 8
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 250 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultAttemptTimeout
	}
	return &Sender{
		db:          db,
		client:      cfg.Policy.Client(cfg.Timeout, 0),
		allowHTTP:   cfg.Policy.AllowPrivate,
		log:         cfg.Logger,
		concurrency: cfg.Concurrency,
		perLoop:     cfg.PerLoop,
		poll:        cfg.Poll,
		timeout:     cfg.Timeout,
		// A claim outlives the attempt's timeout, so only a crashed sender's claims expire.
		lease:    3 * cfg.Timeout,
		wake:     make(chan struct{}, 1),
		recorded: cfg.Recorded,
		panicked: cfg.Panicked,

		destinations: cfg.Destinations,
	}
}

// Wake tells the sender that a delivery may have become due.
func (s *Sender) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run sends due deliveries until ctx is canceled, then waits for the attempts in
// flight to stop; an attempt cut short is not counted and is due again.
func (s *Sender) Run(ctx context.Context) {
	poll := time.NewTicker(s.poll)
	defer poll.Stop()
	inFlight := map[string]int{} // by Loop
	total := 0
	done := make(chan store.Attempted, s.concurrency)
	for {
		if free := s.concurrency - total; free > 0 && ctx.Err() == nil && s.storageOK(ctx) {
			claimed, err := s.db.ClaimDeliveries(ctx, free, s.perLoop, inFlight, s.lease)
			if err != nil && ctx.Err() == nil && !store.IsStorageFault(err) { // the store logs those
				s.log.Error("claiming deliveries", "err", err)
			}
			for _, group := range s.batches(claimed) {
				for _, d := range group {
					inFlight[d.LoopID]++
					total++
				}
				if len(group) == 1 {
					go func() { done <- s.attemptSafely(ctx, group[0]) }()
				} else {
					go func() {
						for _, a := range s.attemptBatchSafely(ctx, group) {
							done <- a
						}
					}()
				}
			}
			if len(claimed) > 0 && len(claimed) == free {
				continue // more may be due
			}
		}
		if ctx.Err() != nil && total == 0 {
			return
		}
		stopping := ctx.Done()
		if ctx.Err() != nil {
			stopping = nil // only the attempts in flight are left to wait for
		}
		select {
		case first := <-done:
			// Attempts that ended together are recorded in one transaction.
			batch := []store.Attempted{first}
			for more := true; more; {
				select {
				case a := <-done:
					batch = append(batch, a)
				default:
					more = false
				}
			}
			s.record(ctx, batch)
			for _, a := range batch {
				total--
				if inFlight[a.Dispatch.LoopID]--; inFlight[a.Dispatch.LoopID] == 0 {
					delete(inFlight, a.Dispatch.LoopID)
				}
			}
		case <-s.wake:
		case <-poll.C:
		case <-stopping:
		}
	}
}

// storageOK reports whether deliveries may be claimed: not while the database cannot
// take writes (store.StorageFailing), since neither the claim nor the attempt could be
// recorded; the sender then waits for its next poll. It waits at most a second for the
// shared probe write that finds out.
func (s *Sender) storageOK(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return s.db.Writable(ctx)
}

func (s *Sender) record(ctx context.Context, batch []store.Attempted) {
	recordCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := s.db.RecordAttempts(recordCtx, batch); err != nil {
		// Unrecorded attempts are due again once their lease runs out.
		s.log.Error("recording delivery attempts", "deliveries", len(batch), "err", err)
		return
	}
	if s.recorded != nil {
		s.recorded(batch)
	}
}

// attempt makes one attempt of the delivery.
func (s *Sender) attempt(ctx context.Context, d *store.Dispatch) store.Attempted {
	at := s.db.Now().UTC()
	if d.DisabledReason != "" {
		// Queued as its Loop's destination was being disabled: not sent.
		at = at.Truncate(time.Millisecond)
		return store.Attempted{Dispatch: d, Attempt: &store.Attempt{At: at, Ended: at, Err: store.NotSentError(d.DisabledReason), NotSent: true}}
	}
	var out Outcome
	if d.Kind == "" || d.Kind == store.KindWebhook {
		out.Status, out.RetryAfter, out.Err = s.send(ctx, d, at)
	} else {
		out = s.deliverElsewhere(ctx, d)
	}
	return s.attempted(ctx, d, at, out)
}

// attempted is the attempt of d made at, as out says it went.
func (s *Sender) attempted(ctx context.Context, d *store.Dispatch, at time.Time, out Outcome) store.Attempted {
	err := out.Err
	if err != nil && ctx.Err() != nil {
		return store.Attempted{Dispatch: d} // cut short: not counted
	}
	a := &store.Attempt{At: at.Truncate(time.Millisecond), Ended: s.db.Now().UTC().Truncate(time.Millisecond), StatusCode: out.Status,
		RetryAfter: out.RetryAfter, Summary: out.Summary, DisableReason: out.DisableReason, Wrote: out.Wrote}
	if err != nil {
		a.Err = err.Error()
		s.log.Warn("webhook delivery attempt failed", "delivery", d.ID, "loop", d.LoopID, "attempt", d.Attempt, "status", out.Status, "err", a.Err)
	}
	return store.Attempted{Dispatch: d, Attempt: a}
}

// deliverElsewhere hands the delivery to its kind's Destination, within the time
// an attempt's lease allows (several calls, each one the attempt's timeout at most).
func (s *Sender) deliverElsewhere(ctx context.Context, d *store.Dispatch) Outcome {
	dest := s.destinations[d.Kind]
	if dest == nil {
		return Outcome{Err: fmt.Errorf("this server does not deliver to %s destinations", d.Kind)}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*s.timeout)
	defer cancel()
	out := dest.Deliver(ctx, d)
	if out.Err != nil && errors.Is(out.Err, context.DeadlineExceeded) && ctx.Err() != nil {
		out.Err = fmt.Errorf("no answer within %s", 2*s.timeout)
	}
	return out
}

// batches groups the claimed deliveries: the task.succeeded deliveries of one Loop
// whose destination takes them in one go (BatchDestination) together, every other
// delivery alone.
func (s *Sender) batches(claimed []*store.Dispatch) [][]*store.Dispatch {
	var out [][]*store.Dispatch
	byLoop := map[string]int{} // the group of a Loop's batch, by Loop
	for _, d := range claimed {
		_, batches := s.destinations[d.Kind].(BatchDestination)
		if !batches || d.Event != store.EventTaskSucceeded || d.DisabledReason != "" {
			out = append(out, []*store.Dispatch{d})
			continue
		}
		if g, ok := byLoop[d.LoopID]; ok {
			out[g] = append(out[g], d)
			continue
		}
		byLoop[d.LoopID] = len(out)
		out = append(out, []*store.Dispatch{d})
	}
	return out
}

// attemptBatchSafely makes one attempt of each delivery of a batch through its
// destination's DeliverBatch, within the time one attempt's lease allows; a panic in
// it fails every attempt of the batch, as attemptSafely does one.
func (s *Sender) attemptBatchSafely(ctx context.Context, ds []*store.Dispatch) (as []store.Attempted) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("recovered from a panic in a batch of delivery attempts", "deliveries", len(ds), "loop", ds[0].LoopID,
				"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if s.panicked != nil {
				s.panicked()
			}
			now := s.db.Now().UTC().Truncate(time.Millisecond)
			as = nil
			for _, d := range ds {
				as = append(as, store.Attempted{Dispatch: d, Attempt: &store.Attempt{At: now, Ended: now,
					Err: "the delivery failed on our side (an internal error); it is retried on schedule"}})
			}
		}
	}()
	at := s.db.Now().UTC()
	dest := s.destinations[ds[0].Kind].(BatchDestination)
	bctx, cancel := context.WithTimeout(ctx, 2*s.timeout)
	defer cancel()
	outs := dest.DeliverBatch(bctx, ds)
	for i, d := range ds {
		out := outs[i]
		if out.Err != nil && errors.Is(out.Err, context.DeadlineExceeded) && bctx.Err() != nil {
			out.Err = fmt.Errorf("no answer within %s", 2*s.timeout)
		}
		as = append(as, s.attempted(ctx, d, at, out))
	}
	return as
}

// Timeout is how long one attempt's request may take.
func (s *Sender) Timeout() time.Duration { return s.timeout }

// attemptSafely is attempt, except that a panic in it is logged once, with its stack,
// and counts as a failed attempt (retried on schedule) instead of ending the process.
func (s *Sender) attemptSafely(ctx context.Context, d *store.Dispatch) (a store.Attempted) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("recovered from a panic in a webhook delivery attempt", "delivery", d.ID, "loop", d.LoopID,
				"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if s.panicked != nil {
				s.panicked()
			}
			now := s.db.Now().UTC().Truncate(time.Millisecond)
			a = store.Attempted{Dispatch: d, Attempt: &store.Attempt{At: now, Ended: now,
				Err: "the delivery failed on our side (an internal error); it is retried on schedule"}}
		}
	}()
	return s.attempt(ctx, d)
}

// send posts the delivery, signed at the given time with the Loop's secret (and the
// one a rotation replaced, during its grace period), in both header sets. Any 2xx
// acknowledges; a redirect is not followed and fails the attempt like any other
// answer. retryAfter is what a 429 or 503 asked for in Retry-After.
func (s *Sender) send(ctx context.Context, d *store.Dispatch, at time.Time) (status int, retryAfter time.Duration, err error) {
	if !s.allowHTTP && !strings.HasPrefix(d.URL, "https://") {
		// A URL accepted under a development setting is not sent in the clear by a
		// server running without it.
		return 0, 0, errors.New("the webhook URL does not use https; give the Loop an https URL")
	}
	reqCtx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, d.URL, bytes.NewReader(d.Payload))
	if err != nil {
		return 0, 0, fmt.Errorf("the webhook URL cannot be used: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set(HeaderEvent, d.Event)
	secrets := []string{d.Secret}
	if d.PreviousSecret != "" {
		secrets = append(secrets, d.PreviousSecret)
	}
	signature.SetHeaders(req.Header, d.ID, d.Payload, at, secrets...)
	resp, err := s.client.Do(req)
	if err != nil {
		switch {
		case errors.Is(err, netguard.ErrNotPublic):
			return 0, 0, errors.New("the webhook URL resolves to an address that is not publicly reachable")
		case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
			return 0, 0, fmt.Errorf("no response within %s", s.timeout)
		}
		return 0, 0, fmt.Errorf("could not reach the receiver: %v", unwrapURLError(err))
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch code := resp.StatusCode; {
	case code >= 200 && code <= 299:
		return code, 0, nil
	case code == http.StatusGone:
		return code, 0, fmt.Errorf("the receiver answered %s; the Loop's destination is disabled", resp.Status)
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		wait := ParseRetryAfter(resp.Header.Get("Retry-After"), s.db.Now())
		if wait > 0 {
			return code, wait, fmt.Errorf("the receiver answered %s, Retry-After %s", resp.Status, wait)
		}
	case code >= 300 && code <= 399:
		return code, 0, fmt.Errorf("the receiver answered %s; redirects are not followed: give the Loop the URL that answers 2xx", resp.Status)
	}
	return resp.StatusCode, 0, fmt.Errorf("the receiver answered %s", resp.Status)
}

// maxRetryAfterSeconds bounds Retry-After before any arithmetic: a week, more than the
// schedule's longest delay, which is the cap that applies.
const maxRetryAfterSeconds = int64(7 * 24 * time.Hour / time.Second)

// ParseRetryAfter reads a Retry-After header: whole seconds (at most a week, however
// many digits), or an HTTP date, which is measured from now. 0 when absent,
// unreadable (a sign or a fraction included) or not in the future. The caller caps it
// (store.Attempt.Outcome caps it at the schedule's longest delay).
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if strings.Trim(v, "0123456789") == "" {
		// delay-seconds: digits only, however many. One too long for an int64 asks
		// for longer than any bound, not for nothing.
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			secs = maxRetryAfterSeconds
		}
		return time.Duration(min(secs, maxRetryAfterSeconds)) * time.Second
	}
	if at, err := http.ParseTime(v); err == nil && at.After(now) {
		return at.Sub(now).Round(time.Second)
	}
	return 0
}

// unwrapURLError drops the "Post <url>:" prefix the client adds: the URL is the Loop's.
func unwrapURLError(err error) error {
	var u *url.Error
	if errors.As(err, &u) {
		return u.Err
	}
	return err
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
