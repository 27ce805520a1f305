package store

import (
	"time"

	"enrichd/enrich"
)

// Claim is a task a worker holds under a lease. Only the holder of Token can settle it.
type Claim struct {
	TaskID    string
	OrgID     string
	Input     enrich.Input
	ExpiresAt time.Time
	Token     string
	// QueuedAt is when the task entered the queue; a task put back keeps it, so the
	// claim lag it shows counts the whole wait.
	QueuedAt time.Time
	// WatchID is the watch whose check this task is, if it is one: a check asks the
	// sources afresh and never serves a stored record in their place.
	WatchID *string
}

// Outcome is how a claimed task ends: with a result or with an error.
type Outcome struct {
	Result *enrich.Result
	// Fetched marks a result obtained from a source, to be kept in the store; a
	// stored record served because its refresh failed is not.
	Fetched bool
	// FetchedAt is when a fetched result was retrieved; zero means now.
	FetchedAt time.Time
	Err       *enrich.TaskError
	// Gathered is what an email lookup that fit several people gathered, kept for a
	// retry with a hint until KeepGathered has passed.
	Gathered     *enrich.Gathering
	KeepGathered time.Duration
	// TieBroken marks an email lookup's person picked by a hint among several: the
	// address is not remembered as theirs, and what was gathered for it stays.
	TieBroken bool
}

// ExpiredTask is a task ExpireTasks failed as timed_out, or RequeueAbandoned as
// internal_error, and refunded.
type ExpiredTask struct {
	ID             string
	ObjectType     string
	CreditsCharged int64
	LoopID         *string
}

// MaxTaskAttempts is how many times a task may be claimed and its claim lost (its
// lease ran out before it settled: a crash, a kill, or a lease that could not be
// extended) before it fails as internal_error instead of being claimed again for ever. A claim
// given back at a shutdown (ReleaseTask) is not counted.
const MaxTaskAttempts = 5
