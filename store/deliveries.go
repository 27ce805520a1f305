package store

import (
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
	ID      string
	LoopID  string
	Event   string
	URL     string
	Secret  string
	Payload []byte
	Attempt int // 1 for the first
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
}

// Attempted is a delivery and how its attempt went; a nil Attempt means the attempt
// was cut short (the sender is stopping) and is not counted: the delivery is due again.
type Attempted struct {
	Dispatch *Dispatch
	Attempt  *Attempt
}
