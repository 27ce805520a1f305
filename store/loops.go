package store

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"

	"enrichd/enrich"

	"golang.org/x/text/unicode/norm"
)

// Loop is a webhook destination. Its JSON is the Loop of the API; the signing secret is
// in it only when the Loop has just been created or its secret rotated.
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
	// Failing is true when the Loop's last FailingAfter delivery attempts all failed,
	// whichever deliveries they were; an acknowledged attempt clears it.
	Failing bool `json:"failing"`
	// ConsecutiveFailures counts the failed attempts since the last acknowledged one.
	ConsecutiveFailures int `json:"consecutive_failures"`
	// LastDeliveryError is the error of the Loop's last failed attempt, and when.
	LastDeliveryError   *string    `json:"last_delivery_error"`
	LastDeliveryErrorAt *time.Time `json:"last_delivery_error_at"`

	OrgID string `json:"-"`
}

// FailingAfter is how many failed delivery attempts in a row, with none acknowledged
// between them, make a Loop failing. The schemas' loops_failing index and the drivers'
// LoopTrouble say 3 too.
const FailingAfter = 3

// Destination is where a Loop's events go.
type Destination struct {
	Kind string `json:"kind"`
	URL  string `json:"url"`
	// Enabled is false once the receiver answered 410 Gone (or the destination was
	// disabled on request): nothing is sent to it until it is enabled again. It is
	// apart from the Loop's own enabled, which only stops new runs.
	Enabled bool `json:"enabled"`
	// DisabledReason and DisabledAt say why and when the destination was disabled.
	DisabledReason *string    `json:"disabled_reason,omitempty"`
	DisabledAt     *time.Time `json:"disabled_at,omitempty"`
	Secret         string     `json:"secret,omitempty"`
	// PreviousSecretExpiresAt is when the secret the last rotation replaced stops
	// (or stopped) signing deliveries beside the new one; absent before any rotation.
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at,omitempty"`
}

// SetState fills in what the Loop's stored columns say of its destination and its
// deliveries: the time the destination was disabled and why (nil when enabled), when
// the last rotation's previous secret expires, and the failure streak.
func (l *Loop) SetState(disabledAt *time.Time, disabledReason *string, previousExpires *time.Time, failures int, lastErr *string, lastErrAt *time.Time) {
	l.Destination.Enabled = disabledAt == nil
	if disabledAt != nil {
		reason := "disabled"
		if disabledReason != nil {
			reason = *disabledReason
		}
		l.Destination.DisabledAt, l.Destination.DisabledReason = disabledAt, &reason
	}
	l.Destination.PreviousSecretExpiresAt = previousExpires
	l.ConsecutiveFailures, l.Failing = failures, failures >= FailingAfter
	l.LastDeliveryError, l.LastDeliveryErrorAt = lastErr, lastErrAt
}

// Secret rotation's grace period: how long the replaced secret keeps signing
// deliveries beside the new one.
const (
	DefaultSecretGrace = 24 * time.Hour
	MaxSecretGrace     = 7 * 24 * time.Hour
)

// SecretRotation replaces a Loop's signing secret with Secret (made by NewLoopSecret,
// before the transaction); the replaced one keeps signing for Grace (0: not at all).
type SecretRotation struct {
	Secret string
	Grace  time.Duration
}

// Why a destination is disabled.
const (
	ReasonDisabledOnRequest = "disabled on request"
	ReasonGone              = "the receiver answered 410 Gone"
)

// NotSentError is the last_error of a delivery given up because its Loop's
// destination is disabled for reason.
func NotSentError(reason string) string {
	return "not sent: the Loop's destination is disabled (" + reason + "); enable it (PATCH {\"destination\": {\"enabled\": true}}) and retry the delivery"
}

// NewLoop is a request to create a Loop. The webhook URL must already be checked.
type NewLoop struct {
	OrgID      string
	Name       string
	ObjectType string
	WebhookURL string
	Enabled    bool
}

// NotSentErrorParts is NotSentError around its reason, for SQL that joins them to a
// reason it reads.
func NotSentErrorParts() (before, after string) {
	before, after, _ = strings.Cut(NotSentError("\x00"), "\x00")
	return before, after
}

// DestinationDisabled refuses to retry a delivery of a Loop whose destination is
// disabled.
func DestinationDisabled(reason string) error {
	return &enrich.Error{Kind: enrich.KindConflict, Code: "destination_disabled",
		Message: "the Loop's destination is disabled (" + reason + "); enable it (PATCH {\"destination\": {\"enabled\": true}}) before retrying"}
}

// LoopPatch changes the fields it sets.
type LoopPatch struct {
	Name       *string
	WebhookURL *string
	Enabled    *bool
	// DestinationEnabled enables the destination (after a 410 Gone) or disables it.
	DestinationEnabled *bool
	// Rotate replaces the signing secret.
	Rotate *SecretRotation
}

// Slugify derives a Loop's slug from its name: lower case, accents dropped, runs of
// anything but letters and digits folded to one "-".
func Slugify(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range norm.NFKD.String(strings.ToLower(name)) {
		switch {
		case unicode.Is(unicode.Mn, r):
		case r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
		default:
			dash = true
		}
	}
	if b.Len() == 0 {
		return "loop"
	}
	return b.String()
}

// Apply sets on l what the patch sets, and stamps it updated at now. renamed tells
// the caller the name changed, so the slug is to be derived again (UniqueSlug).
func (p LoopPatch) Apply(l *Loop, now time.Time) (renamed bool) {
	if p.Name != nil && *p.Name != l.Name {
		l.Name, renamed = *p.Name, true
	}
	if p.WebhookURL != nil {
		l.Destination.URL = *p.WebhookURL
	}
	if p.Enabled != nil {
		l.Enabled = *p.Enabled
	}
	if p.DestinationEnabled != nil && *p.DestinationEnabled != l.Destination.Enabled {
		if *p.DestinationEnabled {
			l.Destination.Enabled, l.Destination.DisabledAt, l.Destination.DisabledReason = true, nil, nil
			// A destination enabled again starts its streak afresh; the last error stays.
			l.ConsecutiveFailures, l.Failing = 0, false
		} else {
			reason := ReasonDisabledOnRequest
			l.Destination.Enabled, l.Destination.DisabledAt, l.Destination.DisabledReason = false, &now, &reason
		}
	}
	if p.Rotate != nil {
		expires := now.Add(p.Rotate.Grace)
		l.Destination.Secret, l.Destination.PreviousSecretExpiresAt = p.Rotate.Secret, &expires
	}
	l.UpdatedAt = now
	return renamed
}

// UniqueSlug is base, or the first of base-2, base-3... that taken (a query of the
// organization's other Loops) reports free.
func UniqueSlug(base string, taken func(slug string) (bool, error)) (string, error) {
	slug := base
	for n := 2; ; n++ {
		t, err := taken(slug)
		if err != nil || !t {
			return slug, err
		}
		slug = fmt.Sprintf("%s-%d", base, n)
	}
}

// CheckLoopForRun is the check a new task naming a Loop must pass, given what finding
// the organization's Loop loopID gave (l, err): the Loop is the organization's, takes
// the task's object type, and is enabled.
func CheckLoopForRun(l *Loop, err error, loopID, objectType string) error {
	if err != nil {
		if enrich.KindOf(err) == enrich.KindNotFound {
			return enrich.Errorf(enrich.KindInvalid, "loop_id %s names no Loop of your organization", loopID)
		}
		return err
	}
	if l.ObjectType != objectType {
		return enrich.Errorf(enrich.KindInvalid, "the Loop %s takes %s enrichments, not %s ones", l.Slug, l.ObjectType, objectType)
	}
	if !l.Enabled {
		return &enrich.Error{Kind: enrich.KindConflict, Code: "loop_disabled",
			Message: fmt.Sprintf("the Loop %s is disabled; enable it (PATCH {\"enabled\": true}) to run it", l.Slug)}
	}
	return nil
}

// RotateLoopSecret gives the Loop a new signing secret, which the returned Loop carries
// this once: how a lost or leaked secret is replaced. For grace (0 to MaxSecretGrace)
// the old secret keeps signing every delivery beside the new one, so a receiver has
// time to take the new one; a second rotation within it drops the first's old secret.
func (db *DB) RotateLoopSecret(ctx context.Context, orgID, id string, grace time.Duration) (*Loop, error) {
	if grace < 0 || grace > MaxSecretGrace {
		return nil, enrich.Errorf(enrich.KindInvalid, "the grace period must be 0 to %d seconds (7 days)", int(MaxSecretGrace.Seconds()))
	}
	secret, err := NewLoopSecret()
	if err != nil {
		return nil, err
	}
	return db.UpdateLoop(ctx, orgID, id, LoopPatch{Rotate: &SecretRotation{Secret: secret, Grace: grace}})
}
