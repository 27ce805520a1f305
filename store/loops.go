package store

import (
	"strings"
	"time"
	"unicode"

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
