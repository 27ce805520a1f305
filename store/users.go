package store

import (
	"crypto/subtle"
	"fmt"
	"time"

	"enrichd/enrich"

	"github.com/google/uuid"
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

// NewUser is the user CreateUser adds for email and role, before its organization is
// set: the address normalized and checked, a role of "" made a viewer, any other
// than admin or viewer refused.
func NewUser(email, role string, now time.Time) (*User, error) {
	// Before lower-casing, which would turn bytes that are not UTF-8 into U+FFFD.
	if err := enrich.CheckText("email", email); err != nil {
		return nil, err
	}
	email = NormalEmail(email)
	if err := CheckEmail(email); err != nil {
		return nil, err
	}
	if role == "" {
		role = RoleViewer
	}
	if role != RoleAdmin && role != RoleViewer {
		return nil, enrich.Errorf(enrich.KindInvalid, "role %q must be %s or %s", role, RoleAdmin, RoleViewer)
	}
	return &User{ID: uuid.NewString(), Email: email, Role: role, CreatedAt: now}, nil
}

// CheckPasswordHash refuses a hash SetPassword would not store.
func CheckPasswordHash(h string) error {
	if h == "" || len(h) > MaxPasswordHash {
		return fmt.Errorf("a password hash of %d bytes: want 1 to %d", len(h), MaxPasswordHash)
	}
	return nil
}

// CheckSessionLength refuses a session's absolute length that is not positive.
func CheckSessionLength(absolute time.Duration) error {
	if absolute <= 0 {
		return fmt.Errorf("a session of %v: want a positive length", absolute)
	}
	return nil
}

// CheckIdleTimeout refuses a sessions' idle timeout that is not positive.
func CheckIdleTimeout(idle time.Duration) error {
	if idle <= 0 {
		return fmt.Errorf("an idle timeout of %v: want a positive one", idle)
	}
	return nil
}

// LinkUsable reports whether a set-password link of u, whose stored hash is stored
// and which expires at expires, may be used at now by a token of hash: unexpired, and
// for a user who is not disabled.
func LinkUsable(u *User, stored, hash []byte, expires, now time.Time) bool {
	return subtle.ConstantTimeCompare(stored, hash) == 1 && now.Before(expires) && u.DisabledAt == nil
}

// SessionRefresh is how stale a session's last_seen_at may get before a request writes
// it: a write per page view would be most of the dashboard's writes.
const SessionRefresh = time.Minute

// SessionLive reports whether a session of u (stored hash stored, last seen at
// lastSeen, ending at expires) still admits a token of hash at now: the user enabled,
// the session neither past its end nor idle for longer than idle.
func SessionLive(u *User, stored, hash []byte, lastSeen, expires, now time.Time, idle time.Duration) bool {
	return subtle.ConstantTimeCompare(stored, hash) == 1 && u.DisabledAt == nil &&
		now.Before(expires) && now.Sub(lastSeen) <= idle
}
