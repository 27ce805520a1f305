package webhook

import (
	"context"
	"time"

	"enrichd/store"
)

// Destination delivers a Loop's events somewhere other than a webhook URL (a CRM),
// under the sender's schedule, leases, history and failure streaks.
type Destination interface {
	Deliver(ctx context.Context, d *store.Dispatch) Outcome
}

// BatchDestination is a Destination that takes several task.succeeded deliveries of
// one Loop, due at once, in one go (a CRM's batch endpoints), and says how each went,
// in the order given: each is settled on its own, as if it had gone alone.
type BatchDestination interface {
	Destination
	DeliverBatch(ctx context.Context, ds []*store.Dispatch) []Outcome
}

// Outcome is how a destination's attempt went. Err nil acknowledges the delivery.
type Outcome struct {
	Status     int           // the last HTTP status the destination answered, 0 when none came
	RetryAfter time.Duration // what the destination asked to wait before the next attempt
	Err        error
	// Summary says what the destination did, or why nothing was done.
	Summary string
	// DisableReason disables the Loop's destination and fails the delivery (a
	// refused token), as a webhook's 410 Gone does.
	DisableReason string
	// Wrote is what was written, kept for the Loop and the delivery's subject.
	Wrote *store.CRMWrite
}
