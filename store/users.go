package store

import (
	"time"
)

// Dashboard roles: an admin may change what the organization has (keys, Loops,
// retries, runs); a viewer only reads.
const (
	RoleAdmin  = "admin"
	RoleViewer = "viewer"
)

// SetupLinkTTL is how long a set-password link stays usable.
const SetupLinkTTL = 24 * time.Hour

// User is a person who signs in to the dashboard. The password hash is never part of
// it: only UserForLogin hands it out, to the one caller that checks a password.
type User struct {
	ID          string     `json:"id"`
	OrgID       string     `json:"org_id"`
	OrgName     string     `json:"org_name"`
	Email       string     `json:"email"`
	Role        string     `json:"role"`
	PasswordSet bool       `json:"password_set"`
	CreatedAt   time.Time  `json:"created_at"`
	DisabledAt  *time.Time `json:"disabled_at"`
	LastLoginAt *time.Time `json:"last_login_at"`
}
