package store

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"enrichd/enrich"

	"github.com/google/uuid"
)

// Task statuses.
const (
	StatusQueued    = "queued"
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusCanceled  = "canceled"
)

// IsStatus reports whether s is one of the task statuses.
func IsStatus(s string) bool {
	switch s {
	case StatusQueued, StatusRunning, StatusSucceeded, StatusFailed, StatusCanceled:
		return true
	}
	return false
}

// Task is an enrichment task. Its JSON is the Task of the API.
type Task struct {
	ID             string          `json:"id"`
	ObjectType     string          `json:"object_type"`
	Operation      string          `json:"operation"`
	Status         string          `json:"status"`
	Input          json.RawMessage `json:"input"`
	Target         string          `json:"target"`
	CreditsCharged int64           `json:"credits_charged"`
	LoopID         *string         `json:"loop_id"`
	WatchID        *string         `json:"watch_id"` // the watch this task checks, if any
	IdempotencyKey *string         `json:"idempotency_key"`
	CreatedAt      time.Time       `json:"created_at"`
	QueuedAt       *time.Time      `json:"queued_at"`
	StartedAt      *time.Time      `json:"started_at"`
	FinishedAt     *time.Time      `json:"finished_at"`
	ExpiresAt      time.Time       `json:"expires_at"`

	OrgID  string            `json:"-"`
	Lookup enrich.Lookup     `json:"-"`
	Data   json.RawMessage   `json:"-"` // the result once succeeded
	Error  *enrich.TaskError `json:"-"` // why it failed once failed
}

// Settled reports whether the task has reached a final status.
func (t *Task) Settled() bool {
	return t.Status == StatusSucceeded || t.Status == StatusFailed || t.Status == StatusCanceled
}

// NewTask is a request to create a task.
type NewTask struct {
	OrgID    string
	Input    enrich.Input
	RawInput json.RawMessage // the request fields as sent, shown as the task's input
	LoopID   *string
	// WatchID marks a watch's task: when it settles, its result is compared with the
	// watch's baseline (WatchSettled). Such a task has Freshness 0 and no LoopID.
	WatchID        *string
	IdempotencyKey string // "" when none was sent
	// Endpoint is the method and path the request was sent to ("POST /v1/people/enrich"),
	// kept with the key so a reuse on another endpoint is told apart from another body.
	Endpoint   string
	BodyHash   string // what the idempotency key is bound to: the endpoint and the body
	TTL        time.Duration
	MaxBacklog int64
	Freshness  time.Duration // a stored record younger than this settles the task at once
	// Fail, when set, is why the task fails inside the request (a refused email
	// address): it is created failed with this error, charged and refunded at once,
	// and never queued.
	Fail *enrich.TaskError
	// Batch, when set, is the batch row the task is made for: the row is linked to
	// the task in the task's transaction. A replay links nothing (the first did).
	Batch *BatchRowRef
}

// Enqueued is what CreateTask did.
type Enqueued struct {
	Task     *Task
	Replayed bool // the idempotency key named an earlier task, which is returned as it is
}

// Task list bounds: a page of the dashboard's task list.
const (
	DefaultTaskPage = 50
	MaxTaskPage     = 100
)

// TaskFilter selects an organization's tasks. Empty fields do not filter.
type TaskFilter struct {
	Status     string    // one of the task statuses
	ObjectType string    // company or person
	LoopID     string    // the Loop the task runs for; another organization's selects nothing
	From, To   time.Time // created_at in [From, To); a zero time leaves that end open
	Before     *TaskCursor
	Limit      int // 1..MaxTaskPage; 0 means DefaultTaskPage, more than the most means the most
}

// TaskCursor is where a page of tasks ends: the next page holds the tasks listed after
// it, newest first by (created_at, id). Keyset paging costs the same on the thousandth
// page as on the first, which OFFSET does not.
type TaskCursor struct {
	CreatedAt time.Time
	ID        string
}

// String is the cursor as it goes in a URL: the creation time in milliseconds, "_",
// the task's id.
func (c TaskCursor) String() string {
	return strconv.FormatInt(c.CreatedAt.UnixMilli(), 10) + "_" + c.ID
}

// ParseTaskCursor reads a cursor written by TaskCursor.String.
func ParseTaskCursor(s string) (*TaskCursor, error) {
	invalid := &enrich.Error{Kind: enrich.KindInvalid, Code: "invalid_cursor",
		Message: "the page cursor is not one this server gave; start again from the first page"}
	if len(s) > 100 {
		return nil, invalid
	}
	at, id, ok := strings.Cut(s, "_")
	t, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil || t < 0 {
		return nil, invalid
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return nil, invalid
	}
	return &TaskCursor{CreatedAt: time.UnixMilli(t).UTC(), ID: u.String()}, nil
}
