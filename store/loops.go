package store

import (
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

	OrgID string `json:"-"`
}

// Destination is where a Loop's events go.
type Destination struct {
	Kind string `json:"kind"`
	URL  string `json:"url"`
	// Enabled is true: a Loop's webhook is never paused, because even a disabled Loop
	// still delivers the tasks it already has in flight.
	Enabled bool   `json:"enabled"`
	Secret  string `json:"secret,omitempty"`
}

// NewLoop is a request to create a Loop. The webhook URL must already be checked.
type NewLoop struct {
	OrgID      string
	Name       string
	ObjectType string
	WebhookURL string
	Enabled    bool
}

// LoopPatch changes the fields it sets.
type LoopPatch struct {
	Name       *string
	WebhookURL *string
	Enabled    *bool
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
