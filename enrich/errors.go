package enrich

import (
	"errors"
	"fmt"
)

// Kind says what went wrong in terms a caller can act on. The server maps each kind to
// one HTTP status in one place (statusOf in server/encode.go); nothing else picks a status.
type Kind string

const (
	KindInvalid          Kind = "invalid"            // 400
	KindUnauthorized     Kind = "unauthorized"       // 401
	KindPaymentRequired  Kind = "payment_required"   // 402
	KindForbidden        Kind = "forbidden"          // 403: signed in, but the role or the origin may not do this
	KindNotFound         Kind = "not_found"          // 404
	KindMethodNotAllowed Kind = "method_not_allowed" // 405
	KindConflict         Kind = "conflict"           // 409
	KindUnprocessable    Kind = "unprocessable"      // 422
	KindTooManyRequests  Kind = "too_many_requests"  // 429
	KindInternal         Kind = "internal"           // 500
	KindUnavailable      Kind = "unavailable"        // 503: the service cannot do it now (storage_unavailable); retry after RetryAfter
)

// Error is the one error type of enrichd. Code is the machine-readable `code` of the
// API's error bodies where the contract names one (insufficient_credits, queue_full,
// ...); Message is the sentence a person reads.
type Error struct {
	Kind    Kind
	Code    string
	Message string

	CreditsRemaining *int64 // 402
	QueuedTasks      *int64 // 429 queue_full
	RetryAfter       int    // 429 and 503: whole seconds, at least 1
	// Rows are the refused rows of an upload (a batch), each with why.
	Rows []RowError
}

// RowError is why one row of an upload is refused: Row counts the data rows from 1,
// Line is the line of the file it starts on.
type RowError struct {
	Row     int    `json:"row"`
	Line    int    `json:"line"`
	Message string `json:"error"`
}

func (e *Error) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("%s (%s)", e.Message, e.Code)
	}
	return e.Message
}

// Errorf returns an *Error of the given kind without an API code.
func Errorf(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// KindOf returns the kind of err, KindInternal for anything that is not an *Error.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindInternal
}

// Task error codes: the `error.code` of a failed task, on polling and on webhooks.
const (
	CodeNotFound            = "not_found"
	CodeAmbiguous           = "ambiguous"
	CodeProviderUnavailable = "provider_unavailable"
	CodeTimedOut            = "timed_out"
	CodeInvalidInput        = "invalid_input"
	CodeInternalError       = "internal_error"
)

// TaskError is why a task failed, as the API shows it.
type TaskError struct {
	Code          string   `json:"code"`
	Message       string   `json:"message"`
	Candidates    *int     `json:"candidates,omitempty"`
	HintsAccepted []string `json:"hintsAccepted,omitzero"` // [] on an ambiguous failure no hint can help
}

// Sentinel errors a Source returns. Wrap them to add detail.
var (
	// ErrNotFound: the source knows nothing of this company or person.
	ErrNotFound = errors.New("not found")
	// ErrUnavailable: the source could not answer now; asking again later may work.
	ErrUnavailable = errors.New("provider unavailable")
	// ErrSearchIncomplete: a staff search answered, but could not ask for every name it
	// was given (a vendor's length limit): its hits are returned with it, and people
	// the address may stand for may be missing from them.
	ErrSearchIncomplete = errors.New("the staff search could not ask for every name")
	// ErrSearchBeyondPage: a staff search billed per record (StaffPager) says, with its
	// first page, that more people match than a whole page (StaffSearchMax) shows.
	// The lookup could confirm nobody among them, so the rest of the page is not
	// bought: the search counts as cut off, as a whole page full would.
	ErrSearchBeyondPage = errors.New("the staff search matches more people than a whole page shows")
)
