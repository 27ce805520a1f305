package store

import (
	"net/http"
	"slices"
	"strings"
	"time"
)

// Delivery statuses.
const (
	DeliveryPending   = "pending"
	DeliverySucceeded = "succeeded"
	DeliveryFailed    = "failed"
)

// Event kinds.
const (
	EventTaskSucceeded = "task.succeeded"
	EventTaskFailed    = "task.failed"
	EventTest          = "test"
)

// RetrySchedule is how long after a failed attempt the next one is due: attempt 1 is
// immediate, attempt 2 comes 10 seconds after the first failed, and so on. After the
// last attempt fails the delivery is failed.
var RetrySchedule = []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 6 * time.Hour}

// MaxAttempts is how many scheduled attempts a delivery gets.
var MaxAttempts = len(RetrySchedule) + 1

// Delivery is one event sent (or to be sent) to a Loop's webhook. Its JSON is the
// delivery of the API.
type Delivery struct {
	ID             string     `json:"id"`
	LoopID         string     `json:"loop_id"`
	Event          string     `json:"event"`
	TaskID         *string    `json:"task_id"`
	Status         string     `json:"status"`
	Attempts       int        `json:"attempts"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
	LastAttemptAt  *time.Time `json:"last_attempt_at"`
	LastStatusCode *int       `json:"last_status_code"`
	LastError      *string    `json:"last_error"`
	CreatedAt      time.Time  `json:"created_at"`

	OrgID string `json:"-"`
}

// Dispatch is a delivery handed to the sender: what to send, where, and with which
// secret to sign it.
type Dispatch struct {
	ID     string
	LoopID string
	Event  string
	URL    string
	Secret string
	// PreviousSecret is the secret a rotation replaced, while its grace period lasts:
	// the delivery is signed with both. Empty otherwise.
	PreviousSecret string
	// DisabledReason is why the Loop's destination is disabled, if it is: the
	// delivery, queued as it was being disabled, is not sent.
	DisabledReason string
	Payload        []byte
	Attempt        int // 1 for the first
	// LeaseUntil is the lease this claim holds (ms since the epoch). Recording the
	// attempt checks it: a sender whose lease ran out, and whose delivery another
	// sender claimed and sent since, must not overwrite that sender's outcome.
	LeaseUntil int64
}

// Attempt is how one attempt to send a delivery went.
type Attempt struct {
	At         time.Time // when it was sent
	Ended      time.Time // when it failed or was acknowledged: the next attempt is scheduled from here
	StatusCode int       // 0 when no response came
	Err        string    // "" when the receiver acknowledged
	// RetryAfter is what a 429 or 503 answer's Retry-After asked for (0: nothing).
	RetryAfter time.Duration
	// NotSent: no request left, because the Loop's destination was disabled when the
	// delivery was claimed (Dispatch.DisabledReason). The delivery fails as the
	// destination's pending ones did, and no attempt is counted, of the delivery or of
	// the Loop's failure streak.
	NotSent bool
}

// Outcome is what recording the attempt of d writes: acknowledged, the delivery
// succeeded; a 410 Gone, it failed (and the destination is disabled: see Heard), as
// it did when it was not sent to a disabled destination;
// otherwise the next attempt is due on the schedule, no sooner than the receiver's
// Retry-After (capped at the schedule's longest delay), or after the last attempt
// the delivery failed.
func (a *Attempt) Outcome(d *Dispatch) (status string, next *time.Time) {
	switch {
	case a.Err == "":
		return DeliverySucceeded, nil
	case a.NotSent || a.StatusCode == http.StatusGone || d.Attempt >= MaxAttempts:
		return DeliveryFailed, nil
	}
	ended := a.Ended
	if ended.IsZero() {
		ended = a.At
	}
	wait := max(RetrySchedule[d.Attempt-1], min(a.RetryAfter, RetrySchedule[len(RetrySchedule)-1]))
	at := ended.Add(wait)
	return DeliveryPending, &at
}

// Heard is what a batch of attempts says of one Loop's receiver.
type Heard struct {
	LoopID string
	// Acknowledged: some attempt was; the failure streak restarts at Failures.
	Acknowledged bool
	// Failures is how many attempts failed after the last acknowledged one (all of
	// them when none was).
	Failures    int
	LastError   string
	LastErrorAt time.Time
	// Gone: the receiver answered 410; the destination is to be disabled.
	Gone bool
}

// AllAcknowledged reports whether every attempt of the batch was acknowledged: then
// only a failure streak is cleared. Otherwise, even with an acknowledged attempt after
// the failed ones, the Loop's last error is written, a 410 Gone among them disables
// the destination, and the failed ones rescheduled to a disabled destination fail.
func (h Heard) AllAcknowledged() bool { return h.LastError == "" }

// HeardFrom sums up a batch of attempts by Loop, in Loop id order (the order drivers
// lock Loops in). Attempts cut short, and those not sent, say nothing.
func HeardFrom(batch []Attempted) []Heard {
	done := make([]Attempted, 0, len(batch))
	for _, a := range batch {
		if a.Attempt != nil && !a.Attempt.NotSent {
			done = append(done, a)
		}
	}
	slices.SortStableFunc(done, func(a, b Attempted) int {
		if c := strings.Compare(a.Dispatch.LoopID, b.Dispatch.LoopID); c != 0 {
			return c
		}
		return a.Attempt.Ended.Compare(b.Attempt.Ended)
	})
	var out []Heard
	for _, a := range done {
		if len(out) == 0 || out[len(out)-1].LoopID != a.Dispatch.LoopID {
			out = append(out, Heard{LoopID: a.Dispatch.LoopID})
		}
		h := &out[len(out)-1]
		if a.Attempt.Err == "" {
			h.Acknowledged, h.Failures = true, 0
			continue
		}
		h.Failures++
		h.LastError, h.LastErrorAt = a.Attempt.Err, a.Attempt.At
		h.Gone = h.Gone || a.Attempt.StatusCode == http.StatusGone
	}
	return out
}

// Attempted is a delivery and how its attempt went; a nil Attempt means the attempt
// was cut short (the sender is stopping) and is not counted: the delivery is due again.
type Attempted struct {
	Dispatch *Dispatch
	Attempt  *Attempt
}
