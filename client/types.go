package client

import (
	"encoding/json"
	"time"
)

// The types below are the API's JSON, declared here rather than imported from the
// server's packages: those link SQLite and the enrichment sources, which a program
// that only calls the API should not carry. The tests decode every response the real
// server gives them strictly into these types, so a field added there and not here
// fails them.

// Task statuses.
const (
	StatusQueued    = "queued"
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusCanceled  = "canceled"
)

// Object types of tasks and Loops.
const (
	ObjectCompany = "company"
	ObjectPerson  = "person"
)

// Task error codes: TaskError.Code of a failed task.
const (
	CodeNotFound            = "not_found"
	CodeAmbiguous           = "ambiguous"
	CodeProviderUnavailable = "provider_unavailable"
	CodeTimedOut            = "timed_out"
	CodeInvalidInput        = "invalid_input"
	CodeInternalError       = "internal_error"
)

// Task is an enrichment task.
type Task struct {
	ID             string          `json:"id"`
	ObjectType     string          `json:"object_type"` // company or person
	Operation      string          `json:"operation"`   // enrich
	Status         string          `json:"status"`
	Input          json.RawMessage `json:"input"`  // the request's fields as sent
	Target         string          `json:"target"` // the normalized domain, network URL or email
	CreditsCharged int64           `json:"credits_charged"`
	LoopID         *string         `json:"loop_id"`
	WatchID        *string         `json:"watch_id"` // the watch this task checks, if any
	IdempotencyKey *string         `json:"idempotency_key"`
	CreatedAt      time.Time       `json:"created_at"`
	QueuedAt       *time.Time      `json:"queued_at"`
	StartedAt      *time.Time      `json:"started_at"`
	FinishedAt     *time.Time      `json:"finished_at"`
	ExpiresAt      time.Time       `json:"expires_at"`
	// ErasedAt is when an erasure of the person the task was about (Client.Erase) took
	// its input (then {}), target (then ErasedMarker) and result: the task stays, with
	// its charge, and answers without Data.
	ErasedAt *time.Time `json:"erased_at"`
}

// ErasedMarker is the Target of an erased task, and what stands for each value an
// erasure took from a batch row or a task's error message.
const ErasedMarker = "[erased]"

// Settled reports whether the task has reached a final status: succeeded, failed or
// canceled.
func (t *Task) Settled() bool {
	return t.Status == StatusSucceeded || t.Status == StatusFailed || t.Status == StatusCanceled
}

// TaskError is why a task failed.
type TaskError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Candidates is how many current employees an ambiguous address fits.
	Candidates *int `json:"candidates,omitempty"`
	// HintsAccepted names the PersonInput hints (fullName, title, location) that can
	// break an ambiguous tie on a retry.
	HintsAccepted []string `json:"hintsAccepted,omitempty"`
}

func (e *TaskError) Error() string { return e.Message + " (" + e.Code + ")" }

// Enqueued is the answer to an enrichment call: the task, and its error when it
// already failed inside the request. Branch on Task.Status: a task can be settled
// already (a fresh stored record, an idempotent replay, a refused address).
type Enqueued struct {
	Task  Task       `json:"task"`
	Error *TaskError `json:"error,omitempty"`
	// StatusCode is 202 when this call queued the task, 200 when the task settled
	// inside the request or the call is an idempotent replay of an earlier one.
	StatusCode int `json:"-"`
	// Replayed is true when the call was an idempotent replay: the task is the one the
	// key was first sent with, and nothing was charged now.
	Replayed bool `json:"-"`
}

// TaskResult is GET /v1/tasks/{id}: the task, its result once succeeded (Data, read
// it with Company or Person), where each field of the result came from and what each
// source was asked, and its error once failed.
type TaskResult struct {
	Task Task            `json:"task"`
	Data json.RawMessage `json:"data,omitempty"`
	// Provenance names, for every field of Data a source gave, that source ("slogan":
	// "enrichlayer"); a result served from the store has the provenance it was stored
	// with. Empty when there is no data.
	Provenance map[string]string `json:"provenance"`
	// Sources are the sources asked for the task, in order; none for a result served
	// from the store.
	Sources []SourceCall `json:"sources"`
	Error   *TaskError   `json:"error,omitempty"`
	// RetryAfter is the server's hint for the next poll while the task is unsettled.
	RetryAfter time.Duration `json:"-"`
}

// What a source's part in a task came to (SourceCall.Outcome).
const (
	OutcomeHit     = "hit"
	OutcomeMiss    = "miss"
	OutcomeError   = "error"
	OutcomeSkipped = "skipped"
)

// SourceCall is one source's part in a task.
type SourceCall struct {
	Name    string `json:"name"`
	Outcome string `json:"outcome"` // hit, miss, error or skipped
	// Reason says why it was skipped, or why a miss was one: filled, not_supported,
	// budget, budget_unread, key_failing, known_miss, other_subject, timed_out,
	// nothing_new.
	Reason        string `json:"reason,omitempty"`
	VendorCalls   int64  `json:"vendor_calls"`   // requests sent upstream, retries included
	VendorCredits int64  `json:"vendor_credits"` // what they cost, in the vendor's credits
	MS            int64  `json:"ms"`
}

// Company decodes Data of a succeeded company task.
func (r *TaskResult) Company() (*Company, error) {
	return decodeData[Company](r, ObjectCompany)
}

// Person decodes Data of a succeeded person task.
func (r *TaskResult) Person() (*Person, error) {
	return decodeData[Person](r, ObjectPerson)
}

func decodeData[T any](r *TaskResult, objectType string) (*T, error) {
	if r.Task.ObjectType != objectType {
		return nil, &usageError{"task " + r.Task.ID + " enriches a " + r.Task.ObjectType + ", not a " + objectType}
	}
	if r.Task.Status != StatusSucceeded || len(r.Data) == 0 {
		return nil, &usageError{"task " + r.Task.ID + " is " + r.Task.Status + " and has no result; only a succeeded task has one"}
	}
	var v T
	if err := decodeJSON(r.Data, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

type usageError struct{ msg string }

func (e *usageError) Error() string { return "enrichd: " + e.msg }

// TaskList is a page of GET /v1/tasks.
type TaskList struct {
	Data  []Task `json:"data"`
	Total int64  `json:"total"` // every task matching the filter, on all pages
}

// Company is the company result.
type Company struct {
	Name             string         `json:"name"`
	EnrichmentStatus string         `json:"enrichment_status"`
	Domain           *string        `json:"domain"`
	NetworkURL       *string        `json:"network_url"`
	NetworkID        *string        `json:"network_id"`
	NetworkFollowers *int64         `json:"network_followers"`
	EmployeeCount    *int64         `json:"employee_count"`
	EmployeeRange    *string        `json:"employee_range"`
	PrimaryIndustry  *string        `json:"primary_industry"`
	OrganizationType *string        `json:"organization_type"`
	YearFounded      *int           `json:"year_founded"`
	About            *string        `json:"about"`
	Slogan           *string        `json:"slogan"`
	Headquarters     map[string]any `json:"headquarters"`
	CreatedAt        *time.Time     `json:"created_at"`
	UpdatedAt        *time.Time     `json:"updated_at"`
	Redirect         *Redirect      `json:"redirect,omitempty"`
}

// Redirect says that the domain sent stands for another, canonical one.
type Redirect struct {
	From      string `json:"from"`
	To        string `json:"to"`
	Confirmed bool   `json:"confirmed"`
}

// Person is the person result.
type Person struct {
	NetworkURL         *string     `json:"network_url"`
	FullName           *string     `json:"full_name"`
	FirstName          *string     `json:"first_name"`
	LastName           *string     `json:"last_name"`
	Headline           *string     `json:"headline"`
	About              *string     `json:"about"`
	AvatarURL          *string     `json:"avatar_url"`
	City               *string     `json:"city"`
	CountryCode        *string     `json:"country_code"`
	NetworkFollowers   *int64      `json:"network_followers"`
	NetworkConnections *int64      `json:"network_connections"`
	Memorialized       *bool       `json:"memorialized"`
	EnrichmentStatus   string      `json:"enrichment_status"`
	LastEnrichedAt     *time.Time  `json:"last_enriched_at"`
	Positions          []Position  `json:"positions"`
	EmailMatch         *EmailMatch `json:"email_match,omitempty"`
}

// Current returns the person's first current position (current roles come first), or
// nil.
func (p *Person) Current() *Position {
	for i := range p.Positions {
		if p.Positions[i].IsCurrent {
			return &p.Positions[i]
		}
	}
	return nil
}

// Position is one role in a person's employment history.
type Position struct {
	Title              *string          `json:"title"`
	CompanyName        *string          `json:"company_name"`
	Company            *PositionCompany `json:"company"`
	CompanyNetworkURL  *string          `json:"company_network_url"`
	EmploymentType     *string          `json:"employment_type"`
	Location           *string          `json:"location"`
	StartDate          *string          `json:"start_date"` // YYYY-MM-DD
	StartDatePrecision *string          `json:"start_date_precision"`
	EndDate            *string          `json:"end_date"`
	EndDatePrecision   *string          `json:"end_date_precision"`
	IsCurrent          bool             `json:"is_current"`
}

// PositionCompany is the company record a position was matched to.
type PositionCompany struct {
	Name   *string `json:"name"`
	Domain *string `json:"domain"`
}

// EmailMatch tells how an email lookup found its person: method exact, resolved or
// inferred.
type EmailMatch struct {
	Method  string  `json:"method"`
	Email   string  `json:"email"`
	Pattern *string `json:"pattern"`
	// Source names the source that found the person (pdl, apollo, ...); nil when
	// what the server already held answered.
	Source *string `json:"source"`
	// MatchedBy names the vendor whose own match by the address answered (pdl,
	// apollo): the answer rests on its record of the address, not on the name. nil
	// when the address was resolved by the name, or is on record in the server.
	MatchedBy *string `json:"matched_by"`
}

// Loop is a destination of enrichment results: a webhook or HubSpot's CRM.
type Loop struct {
	ID          string      `json:"id"`
	Name        string      `json:"name"`
	Slug        string      `json:"slug"`
	ObjectType  string      `json:"object_type"`
	Operation   string      `json:"operation"`
	Enabled     bool        `json:"enabled"`
	CreatedAt   time.Time   `json:"created_at"`
	UpdatedAt   time.Time   `json:"updated_at"`
	Destination Destination `json:"destination"`
	// Failing: the Loop's last 3 delivery attempts all failed (an acknowledged one
	// clears it); ConsecutiveFailures counts them, LastDeliveryError is the last.
	Failing             bool       `json:"failing"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	LastDeliveryError   *string    `json:"last_delivery_error"`
	LastDeliveryErrorAt *time.Time `json:"last_delivery_error_at"`
}

// Destination is where a Loop's events go: a webhook (URL, signed with Secret) or
// HubSpot (its token shown by TokenLast4 alone, and its options).
type Destination struct {
	Kind string `json:"kind"` // webhook or hubspot
	URL  string `json:"url,omitempty"`
	// TokenLast4 is a HubSpot destination's token, shown by its last four characters.
	TokenLast4 string `json:"token_last4,omitempty"`
	// A HubSpot destination's options (see NewDestination).
	Refresh    *bool             `json:"refresh,omitempty"`
	Provenance *bool             `json:"provenance,omitempty"`
	GDPRDelete *bool             `json:"gdpr_delete,omitempty"`
	Mapping    map[string]string `json:"mapping,omitempty"`
	// Enabled is false once the receiver answered 410 Gone, or HubSpot refused the
	// token (DisabledReason and DisabledAt say so): nothing is sent until
	// EnableDestination.
	Enabled        bool       `json:"enabled"`
	DisabledReason *string    `json:"disabled_reason,omitempty"`
	DisabledAt     *time.Time `json:"disabled_at,omitempty"`
	// Secret signs the deliveries. Only CreateLoop and a rotation return it, once:
	// keep it.
	Secret string `json:"secret,omitempty"`
	// PreviousSecretExpiresAt is when the secret the last rotation replaced stops
	// (or stopped) signing deliveries beside the new one.
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at,omitempty"`
}

// Delivery is one event sent, or to be sent, to a Loop's webhook.
type Delivery struct {
	ID             string     `json:"id"`
	LoopID         string     `json:"loop_id"`
	Event          string     `json:"event"` // task.succeeded, task.failed, test, a watch's, or person.erased
	TaskID         *string    `json:"task_id"`
	Status         string     `json:"status"` // pending, succeeded or failed
	Attempts       int        `json:"attempts"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
	LastAttemptAt  *time.Time `json:"last_attempt_at"`
	LastStatusCode *int       `json:"last_status_code"`
	LastError      *string    `json:"last_error"`
	CreatedAt      time.Time  `json:"created_at"`
	// ErasureID is the erasure a person.erased event announces, or the one that took
	// a task's event's payload out of the history (it cannot be retried).
	ErasureID *string `json:"erasure_id"`
	// Summary says what a HubSpot destination did: the object created, the properties
	// filled and kept, or why nothing was written ("skipped: ..."). nil for a webhook.
	Summary *string `json:"summary"`
}

// DeliveryList is a page of a Loop's deliveries, newest first.
type DeliveryList struct {
	Data  []Delivery `json:"data"`
	Total int64      `json:"total"`
}

// Status is GET /v1/status: what each configured source has cost upstream since the
// server started, in the order the sources are asked.
type Status struct {
	Sources []SourceStats `json:"sources"`
}

// SourceStats counts one source's upstream calls; nil counters are ones the source
// does not keep.
type SourceStats struct {
	Name        string     `json:"name"`
	Calls       *int64     `json:"calls"`
	Errors      *int64     `json:"errors"`
	LastError   *string    `json:"last_error"`
	LastErrorAt *time.Time `json:"last_error_at"`
}

// Sources is GET /v1/sources: the organization's figures of each configured source for
// one UTC month, in the order the sources are asked.
type Sources struct {
	Month   string        `json:"month"` // "2026-11"
	Sources []SourceMonth `json:"sources"`
}

// SourceUse is what asks of a source came to: the asks by outcome, the requests they
// sent upstream and the vendor credits those cost by the vendor's published price.
// Unknown asks (their process ended before their answers were recorded) and Pending
// ones (under way now) count in Calls and VendorCredits at their full price.
type SourceUse struct {
	Calls         int64 `json:"calls"`
	Hits          int64 `json:"hits"`
	Misses        int64 `json:"misses"`
	Errors        int64 `json:"errors"`
	Unknown       int64 `json:"unknown"`
	Pending       int64 `json:"pending"`
	VendorCredits int64 `json:"vendor_credits"`
}

// SourceMonth is one source's month for the organization.
type SourceMonth struct {
	Name string `json:"name"`
	SourceUse
	OwnKeyVendorCredits int64 `json:"own_key_vendor_credits"`
	// CreditUSD and USD are nil where the operator set no price of a credit.
	CreditUSD *float64     `json:"credit_usd"`
	USD       *float64     `json:"usd"`
	Budget    SourceBudget `json:"budget"`
	Key       SourceKey    `json:"key"`
	Days      []SourceDay  `json:"days"`
}

// SourceBudget is a source's monthly caps of vendor credits; nil where none is set.
type SourceBudget struct {
	Organization *int64 `json:"organization"`
	Installation *int64 `json:"installation"`
	Remaining    *int64 `json:"remaining"`
}

// SourceKey is whose vendor key a source uses: "organization", "installation" or
// "none".
type SourceKey struct {
	Owner    string  `json:"owner"`
	Last4    *string `json:"last4"`
	Failing  bool    `json:"failing"`
	Fallback bool    `json:"fallback"`
}

// SourceDay is one day of a source's month.
type SourceDay struct {
	Day string `json:"day"` // 2026-11-05
	SourceUse
}
