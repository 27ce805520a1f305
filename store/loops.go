package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"enrichd/enrich"

	"github.com/google/uuid"
	"golang.org/x/text/unicode/norm"
)

// Loop is a destination of enrichment results: a webhook or HubSpot's CRM. Its JSON is
// the Loop of the API; the signing secret is in it only when the Loop has just been
// created or its secret rotated, and a HubSpot token never (its last four characters
// alone).
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

// Destination kinds.
const (
	KindWebhook = "webhook"
	KindHubSpot = "hubspot"
)

// Destination is where a Loop's events go: a webhook's URL, or HubSpot's CRM with the
// Loop's options (HubSpotOptions, nil for a webhook).
type Destination struct {
	Kind string `json:"kind"`
	URL  string `json:"url,omitempty"`
	// TokenLast4 is how a HubSpot destination's token is shown once stored.
	TokenLast4 string `json:"token_last4,omitempty"`
	*HubSpotOptions
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

// HubSpotOptions are a HubSpot destination's choices.
type HubSpotOptions struct {
	// Refresh lets a delivery rewrite a property enrichd itself wrote earlier (its
	// value still the one enrichd wrote); a value enrichd did not write is never
	// overwritten either way.
	Refresh bool `json:"refresh"`
	// Provenance writes which source gave each written field into the property
	// enrichd_provenance.
	Provenance bool `json:"provenance"`
	// GDPRDelete makes a person.erased event delete the contact under HubSpot's GDPR
	// delete; otherwise the CRM keeps it.
	GDPRDelete bool `json:"gdpr_delete"`
	// Mapping overrides the default mapping: HubSpot property to enrichd field, "" to
	// leave a default property unwritten.
	Mapping map[string]string `json:"mapping,omitempty"`
}

// HubSpotToken is a HubSpot private app token as stored: sealed (package secret) under
// the key file KeyID names, shown by Last4.
type HubSpotToken struct {
	Sealed, KeyID, Last4 string
}

// column is a token's value as stored: NULL for a Loop that has no token.
func (t HubSpotToken) column(v string) any {
	if t.Sealed == "" {
		return nil
	}
	return v
}

// HubSpotTokenLabel is what a Loop's token is sealed for: a sealed token copied onto
// another Loop does not open.
func HubSpotTokenLabel(loopID string) string { return "hubspot token\x00" + loopID }

// NewLoop is a request to create a Loop. The webhook URL, or the HubSpot token, must
// already be checked; ID is the new Loop's when the caller needs it first (a token is
// sealed for it), else one is made.
type NewLoop struct {
	ID         string
	OrgID      string
	Name       string
	ObjectType string
	WebhookURL string
	Enabled    bool
	// HubSpot and Options make a HubSpot destination.
	HubSpot *HubSpotToken
	Options *HubSpotOptions
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
	// HubSpotToken replaces a HubSpot destination's token, HubSpotOptions its options.
	HubSpotToken   *HubSpotToken
	HubSpotOptions *HubSpotOptions
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
	if p.HubSpotToken != nil {
		l.Destination.TokenLast4 = p.HubSpotToken.Last4
	}
	if p.HubSpotOptions != nil {
		l.Destination.HubSpotOptions = p.HubSpotOptions
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

// ParseHubSpotOptions reads a HubSpot destination's stored options (nil: the defaults).
func ParseHubSpotOptions(stored *string) (*HubSpotOptions, error) {
	o := &HubSpotOptions{}
	if stored != nil && *stored != "" {
		if err := json.Unmarshal([]byte(*stored), o); err != nil {
			return nil, fmt.Errorf("a Loop's HubSpot options: %w", err)
		}
	}
	return o, nil
}

// boolInt is a boolean as the schemas keep it: the integers 0 and 1 (so rows copy
// between the engines unchanged).
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

const loopColumns = `id, org_id, name, slug, object_type, operation, enabled, webhook_url, created_at, updated_at,
	destination_disabled_at, destination_disabled_reason, previous_secret_expires_at, delivery_failures,
	last_delivery_error, last_delivery_error_at, destination_kind, hubspot_token_last4, hubspot_options`

func scanLoop(row Row) (*Loop, error) {
	var l Loop
	var created, updated int64
	var enabled, failures int
	var disabledAt, previousExpires, lastErrAt sql.NullInt64
	var reason, lastErr, last4, options *string
	if err := row.Scan(&l.ID, &l.OrgID, &l.Name, &l.Slug, &l.ObjectType, &l.Operation, &enabled,
		&l.Destination.URL, &created, &updated, &disabledAt, &reason, &previousExpires, &failures, &lastErr, &lastErrAt,
		&l.Destination.Kind, &last4, &options); err != nil {
		return nil, err
	}
	l.Enabled = enabled != 0
	l.CreatedAt, l.UpdatedAt = fromMS(created), fromMS(updated)
	if l.Destination.Kind == KindHubSpot {
		if last4 != nil {
			l.Destination.TokenLast4 = *last4
		}
		o, err := ParseHubSpotOptions(options)
		if err != nil {
			return nil, err
		}
		l.Destination.HubSpotOptions = o
	}
	l.SetState(fromNullMS(disabledAt), reason, fromNullMS(previousExpires), failures, lastErr, fromNullMS(lastErrAt))
	return &l, nil
}

const findLoopQuery = `SELECT ` + loopColumns + ` FROM loops WHERE id = ? AND org_id = ?`

// findLoop returns the organization's Loop id, or loop_not_found.
func findLoop(ctx context.Context, q Executor, orgID, id string) (*Loop, error) {
	return loopFound(scanLoop(q.QueryRow(ctx, findLoopQuery, id, orgID)))
}

// lockLoop is findLoop holding the Loop's row (PostgreSQL), so two changes to it apply
// one after the other. FOR NO KEY UPDATE does not hold up the deliveries and tasks
// that refer to the Loop.
func lockLoop(ctx context.Context, tx Tx, orgID, id string) (*Loop, error) {
	return loopFound(scanLoop(tx.QueryRow(ctx, findLoopQuery+` FOR NO KEY UPDATE`, id, orgID)))
}

func loopFound(l *Loop, err error) (*Loop, error) {
	if errors.Is(err, ErrNoRows) {
		return nil, LoopNotFound()
	}
	return l, err
}

// uniqueSlug is base, or base-2, base-3, ...: the first no other Loop of the
// organization holds (self, the Loop being renamed, may keep its own). The caller
// holds the organization's row (Tx.LockOrgs), which orders the writers that must see
// each other's Loops: two Loops named alike get different slugs.
func uniqueSlug(ctx context.Context, tx Tx, orgID, self, base string) (string, error) {
	return UniqueSlug(base, func(slug string) (bool, error) {
		var taken bool
		err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM loops WHERE org_id = ? AND slug = ? AND id <> ?)`,
			orgID, slug, self).Scan(&taken)
		return taken, err
	})
}

// CreateLoop creates a Loop with a new signing secret, which the returned Loop carries
// this once. Its slug is unique in the organization: "-2", "-3", ... are appended.
func (db *DB) CreateLoop(ctx context.Context, nl NewLoop) (*Loop, error) {
	secret, err := NewLoopSecret()
	if err != nil {
		return nil, err
	}
	var l *Loop
	err = db.Write(ctx, func(tx Tx) error {
		if err := tx.LockOrgs(ctx, nl.OrgID); err != nil {
			return err
		}
		now := db.now()
		slug, err := uniqueSlug(ctx, tx, nl.OrgID, "", Slugify(nl.Name))
		if err != nil {
			return err
		}
		id := nl.ID
		if id == "" {
			id = uuid.Must(uuid.NewV7()).String()
		}
		l = &Loop{ID: id, OrgID: nl.OrgID, Name: nl.Name, Slug: slug,
			ObjectType: nl.ObjectType, Operation: "enrich", Enabled: nl.Enabled, CreatedAt: now, UpdatedAt: now,
			Destination: Destination{Kind: KindWebhook, URL: nl.WebhookURL, Enabled: true, Secret: secret}}
		var token HubSpotToken
		var options *string
		if nl.HubSpot != nil {
			// A HubSpot destination signs nothing: its secret is kept but never shown.
			token = *nl.HubSpot
			o := nl.Options
			if o == nil {
				o = &HubSpotOptions{}
			}
			b, err := json.Marshal(o)
			if err != nil {
				return err
			}
			options = new(string)
			*options = string(b)
			l.Destination = Destination{Kind: KindHubSpot, Enabled: true, TokenLast4: token.Last4, HubSpotOptions: o}
		}
		_, err = tx.Exec(ctx, `INSERT INTO loops (id, org_id, name, slug, object_type, operation, enabled, webhook_url,
			secret, created_at, updated_at, destination_kind, hubspot_token, hubspot_token_key_id, hubspot_token_last4, hubspot_options)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			l.ID, l.OrgID, l.Name, l.Slug, l.ObjectType, l.Operation, boolInt(l.Enabled), l.Destination.URL, secret, ms(now), ms(now),
			l.Destination.Kind, token.column(token.Sealed), token.column(token.KeyID), token.column(token.Last4), options)
		return err
	})
	return l, err
}

// GetLoop returns one of the organization's Loops, without its secret.
func (db *DB) GetLoop(ctx context.Context, orgID, id string) (*Loop, error) {
	return findLoop(ctx, db.Reader(), orgID, id)
}

// ListLoops returns the organization's Loops, oldest first, without their secrets.
func (db *DB) ListLoops(ctx context.Context, orgID string) ([]*Loop, error) {
	rows, err := db.Reader().Query(ctx, `SELECT `+loopColumns+` FROM loops WHERE org_id = ? ORDER BY created_at, id`, orgID)
	loops, err := collect(rows, err, scanLoop)
	if loops == nil && err == nil {
		loops = []*Loop{}
	}
	return loops, err
}

// UpdateLoop changes what the patch sets, in one transaction. A disabled Loop takes no
// new runs; the tasks it has in flight still deliver. A rotation keeps the replaced
// secret for its grace period (none when 0: a leaked secret is not kept). Disabling
// the destination fails the Loop's pending deliveries that are not being sent (those
// are failed as their attempt is recorded). A rename takes the organization's lock
// first (Tx.LockOrgs, see uniqueSlug), then the Loop's row.
func (db *DB) UpdateLoop(ctx context.Context, orgID, id string, p LoopPatch) (*Loop, error) {
	var l *Loop
	err := db.Write(ctx, func(tx Tx) error {
		if p.Name != nil {
			if err := tx.LockOrgs(ctx, orgID); err != nil {
				return err
			}
		}
		var err error
		if l, err = lockLoop(ctx, tx, orgID, id); err != nil {
			return err
		}
		if p.Rotate != nil && l.Destination.Kind == KindHubSpot {
			return enrich.Errorf(enrich.KindInvalid, "a hubspot destination signs nothing: there is no secret to rotate")
		}
		wasEnabled := l.Destination.Enabled
		if p.Apply(l, db.now()) {
			if l.Slug, err = uniqueSlug(ctx, tx, orgID, id, Slugify(l.Name)); err != nil {
				return err
			}
		}
		if _, err = tx.Exec(ctx, `UPDATE loops SET name = ?, slug = ?, webhook_url = ?, enabled = ?, updated_at = ? WHERE id = ?`,
			l.Name, l.Slug, l.Destination.URL, boolInt(l.Enabled), ms(l.UpdatedAt), id); err != nil {
			return err
		}
		if t := p.HubSpotToken; t != nil {
			if _, err = tx.Exec(ctx, `UPDATE loops SET hubspot_token = ?, hubspot_token_key_id = ?, hubspot_token_last4 = ? WHERE id = ?`,
				t.Sealed, t.KeyID, t.Last4, id); err != nil {
				return err
			}
		}
		if o := p.HubSpotOptions; o != nil {
			b, err := json.Marshal(o)
			if err != nil {
				return err
			}
			if _, err = tx.Exec(ctx, `UPDATE loops SET hubspot_options = ? WHERE id = ?`, string(b), id); err != nil {
				return err
			}
		}
		if r := p.Rotate; r != nil {
			// The right-hand secret is the one being replaced.
			if _, err = tx.Exec(ctx, `UPDATE loops SET previous_secret = CASE WHEN ? = 1 THEN secret END,
				previous_secret_expires_at = ?, secret = ? WHERE id = ?`,
				boolInt(r.Grace > 0), ms(*l.Destination.PreviousSecretExpiresAt), r.Secret, id); err != nil {
				return err
			}
		}
		switch {
		case !wasEnabled && l.Destination.Enabled:
			_, err = tx.Exec(ctx, `UPDATE loops SET destination_disabled_at = NULL, destination_disabled_reason = NULL,
				delivery_failures = 0 WHERE id = ?`, id)
		case wasEnabled && !l.Destination.Enabled:
			err = disableDestination(ctx, tx, id, *l.Destination.DisabledReason, l.UpdatedAt)
		}
		return err
	})
	return l, err
}

// disableDestination disables the Loop's destination, if it is not already, and fails
// its pending deliveries that are not being sent, giving the reason it was disabled
// for first.
func disableDestination(ctx context.Context, tx Tx, loopID, reason string, now time.Time) error {
	var current string
	err := tx.QueryRow(ctx, `UPDATE loops SET destination_disabled_at = coalesce(destination_disabled_at, ?),
		destination_disabled_reason = CASE WHEN destination_disabled_at IS NULL THEN ? ELSE destination_disabled_reason END
		WHERE id = ? RETURNING destination_disabled_reason`, ms(now), reason, loopID).Scan(&current)
	if err != nil {
		return err
	}
	return failPending(ctx, tx, loopID, current, now)
}

// failPending fails the Loop's pending deliveries that are not being sent, because its
// destination is disabled for reason. Each keeps its attempts; last_attempt_at is set
// when there was none, so that retention deletes it in time.
func failPending(ctx context.Context, tx Tx, loopID, reason string, now time.Time) error {
	_, err := tx.Exec(ctx, `UPDATE deliveries SET status = 'failed', next_attempt_at = NULL, lease_until = NULL,
		last_error = ?, last_attempt_at = coalesce(last_attempt_at, ?), payload = `+spendErasureEvent+`
		WHERE loop_id = ? AND status = 'pending' AND (lease_until IS NULL OR lease_until <= ?)`,
		NotSentError(reason), ms(now), loopID, ms(now))
	return err
}

// DeleteLoop deletes a Loop and its deliveries, sent or not; tasks keep their loop_id.
func (db *DB) DeleteLoop(ctx context.Context, orgID, id string) error {
	return db.Write(ctx, func(tx Tx) error {
		n, err := tx.Exec(ctx, `DELETE FROM loops WHERE id = ? AND org_id = ?`, id, orgID)
		if err == nil && n == 0 {
			err = LoopNotFound()
		}
		return err
	})
}

// checkLoopForRun is the check a new task naming a Loop must pass (CheckLoopForRun),
// on the organization's Loop loopID as q reads it.
func checkLoopForRun(ctx context.Context, q Executor, orgID, loopID, objectType string) error {
	l, err := findLoop(ctx, q, orgID, loopID)
	return CheckLoopForRun(l, err, loopID, objectType)
}

// LoopTrouble counts the Loops that are failing (see Loop.Failing) and those whose
// destination is disabled, across organizations, for /metrics; each count reads a
// partial index that holds only those Loops.
func (db *DB) LoopTrouble(ctx context.Context) (failing, disabled int64, err error) {
	err = db.Reader().QueryRow(ctx, `SELECT (SELECT count(*) FROM loops WHERE delivery_failures >= 3),
		(SELECT count(*) FROM loops WHERE destination_disabled_at IS NOT NULL)`).Scan(&failing, &disabled)
	return failing, disabled, err
}
