package store

import (
	"time"
)

// Org is an organization: the owner of keys, credits and tasks.
type Org struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// APIKey describes a key without the key itself, which is never stored.
type APIKey struct {
	ID        string     `json:"id"`
	OrgID     string     `json:"org_id"`
	Name      string     `json:"name"`
	Prefix    string     `json:"prefix"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at"`
	// LastUsedAt is when a request last authenticated with the key, to the minute:
	// it is written at most once a minute (see Authenticate).
	LastUsedAt *time.Time `json:"last_used_at"`
}

// Principal is who a request acts for.
type Principal struct {
	OrgID string
	KeyID string
}
