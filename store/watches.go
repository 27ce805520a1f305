package store

import (
	"encoding/json"
	"time"

	"enrichd/enrich"
)

// Watch keeps one company or person fresh on a schedule: every EveryDays a task asks
// the source afresh, and what changed since the last result kept (Baseline) goes to
// the watch's Loop. Its JSON is the Watch of the API.
type Watch struct {
	ID              string          `json:"id"`
	ObjectType      string          `json:"object_type"`
	Input           json.RawMessage `json:"input"`
	LoopID          string          `json:"loop_id"`
	EveryDays       int             `json:"every_days"`
	Fields          []string        `json:"fields"` // nil: every field
	NotifyUnchanged bool            `json:"notify_unchanged"`
	Enabled         bool            `json:"enabled"`
	NextRunAt       *time.Time      `json:"next_run_at"`
	LastRunAt       *time.Time      `json:"last_run_at"`
	LastTaskID      *string         `json:"last_task_id"`
	PausedReason    *string         `json:"paused_reason"`
	CreatedAt       time.Time       `json:"created_at"`
	UpdatedAt       time.Time       `json:"updated_at"`

	OrgID          string          `json:"-"`
	Lookup         enrich.Lookup   `json:"-"`
	Target         string          `json:"-"`
	NotFoundStreak int             `json:"-"`
	Baseline       json.RawMessage `json:"-"` // the last result kept, what the next is compared with
}

// NewWatch is a request to create a watch. Input is already checked and normalized by
// the code the enrichment endpoints use; RawInput is the request's input fields as
// sent (normalized), shown as the watch's input and given to its tasks.
type NewWatch struct {
	OrgID           string
	ObjectType      string
	Input           enrich.Input
	RawInput        json.RawMessage
	LoopID          string
	EveryDays       int
	Fields          []string // nil: every field
	NotifyUnchanged bool
	Enabled         bool
	FirstRunAt      time.Time // when a new enabled watch is first due (watch.FirstRun)
}

// WatchPatch changes the fields it sets.
type WatchPatch struct {
	LoopID          *string
	EveryDays       *int
	Fields          *[]string // a pointer to nil: every field
	NotifyUnchanged *bool
	Enabled         *bool
	// NextRunAt is when the watch is next due, set by the caller when it enables the
	// watch or changes every_days (the store does not plan schedules).
	NextRunAt *time.Time
}

// WatchFilter selects a page of an organization's watches, newest first, paged like
// ListTasks (WatchPage bounds it). LoopID "" does not filter; another organization's
// Loop selects nothing.
type WatchFilter struct {
	LoopID   string
	Page     int // 0 for the first
	PageSize int
}

// DueWatch is a watch the scheduler has claimed, with what its organization has spent
// on watch tasks this UTC month (refunds deducted) and the cap it set (nil: none).
// Watch.NextRunAt is the time the watch was due, not the claim's retry time that the
// database now holds: the scheduler plans the next run from it (watch.NextRun), so a
// watch keeps its offset. MonthSpend is read once per organization per DueWatches
// call: the scheduler adds the cost of each task it enqueues in the same round.
type DueWatch struct {
	Watch      *Watch
	MonthSpend int64
	MonthlyCap *int64
}

// WatchResult is one row of a bulk import: the watch created, or why not.
type WatchResult struct {
	Watch *Watch
	Err   error
}

// WatchUpdate is what a settled watch task changes on its watch (WatchSettled): the
// new baseline (nil keeps the old one), the not_found streak, why it pauses (nil: it
// does not), and the events to send to its Loop.
type WatchUpdate struct {
	Baseline       json.RawMessage
	NotFoundStreak int
	PausedReason   *string
	Events         []WatchEvent
}

// WatchEvent is one event for a watch's Loop and its exact body.
type WatchEvent struct {
	Event   string
	Payload []byte
}

// The events a watch sends to its Loop.
const (
	EventRecordChanged   = "record.changed"
	EventJobChanged      = "person.job_changed"
	EventRecordUnchanged = "record.unchanged"
)

// WatchRetry is how long a watch claimed by DueWatches waits before it is due again if
// its task is never scheduled (a crash, a refused enqueue): long enough that another
// scheduler does not run it twice, short enough that a refusal is soon retried.
const WatchRetry = 5 * time.Minute

// PausedNotFound is the paused_reason of a watch whose target the source no longer
// finds (not_found twice in a row).
const PausedNotFound = "not_found"

// Watch bounds.
const (
	MinWatchDays     = 7
	MaxWatchDays     = 365
	DefaultWatchDays = 30
	MaxWatchFields   = 30
	MaxWatchImport   = 1000
	DefaultWatchPage = 50
	MaxWatchPage     = 100
)

// WatchNotFound is the answer for a watch that does not exist or is another
// organization's.
func WatchNotFound() error {
	return &enrich.Error{Kind: enrich.KindNotFound, Code: "not_found", Message: "watch not found"}
}

// WatchExists refuses a second watch of the same input for the same Loop.
func WatchExists() error {
	return &enrich.Error{Kind: enrich.KindConflict, Code: "watch_exists",
		Message: "your organization already watches this input for this Loop; change that watch instead (PATCH /v1/watches/{id})"}
}

// WatchLoopMismatch refuses a Loop that takes another object type than the watch's.
func WatchLoopMismatch(loopSlug, loopType, objectType string) error {
	return enrich.Errorf(enrich.KindInvalid, "loop_id: the Loop %s takes %s records, not %s ones", loopSlug, loopType, objectType)
}
