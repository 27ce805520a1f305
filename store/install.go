package store

import (
	"crypto/subtle"
	"time"

	"enrichd/enrich"
)

// InstallLinkTTL is how long the first-start link `enrichd serve` prints stays usable.
const InstallLinkTTL = time.Hour

// NewInstall is what the first-start page makes: an organization (a new one, or the
// one of that name an operator made already), its first admin, and the admin's
// password hash (made by the caller: the store never sees a password).
type NewInstall struct {
	OrgName      string
	Email        string
	PasswordHash string
}

// CheckInstall refuses what Install would not store, before any transaction: the
// organization's name, the address, the hash. It returns the admin to add, with its
// email normalized.
func CheckInstall(in NewInstall, now time.Time) (*User, error) {
	if err := CheckOrgName(in.OrgName); err != nil {
		return nil, err
	}
	u, err := NewUser(in.Email, RoleAdmin, now)
	if err != nil {
		return nil, err
	}
	if err := CheckPasswordHash(in.PasswordHash); err != nil {
		return nil, err
	}
	u.PasswordSet = true
	return u, nil
}

// InstallLinkUsable reports whether a first-start link whose stored hash is stored
// and which expires at expires may be used at now by a token of hash, on a database
// whose users number hasUsers: unexpired, and while nobody can sign in yet.
func InstallLinkUsable(stored, hash []byte, expires, now time.Time, hasUsers bool) bool {
	return subtle.ConstantTimeCompare(stored, hash) == 1 && now.Before(expires) && !hasUsers
}

// InstallLinkInvalid is the one answer to a first-start link that cannot be used,
// whatever the reason.
func InstallLinkInvalid() error {
	return &enrich.Error{Kind: enrich.KindNotFound, Code: "link_invalid",
		Message: "This first-start link is not valid: it was used already, is more than an hour old, " +
			"or a newer one was printed since. While the database has no user, every start of enrichd serve prints a new one; " +
			"once it has one, an admin adds users with enrichd users create."}
}
