package store

import (
	"context"
	"crypto/subtle"
	"errors"
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

// NewInstallLink makes a new first-start link, voiding any earlier one, and returns its
// token; once the database has a user it makes none and returns "".
func (db *DB) NewInstallLink(ctx context.Context) (string, error) {
	plain, hash, err := NewToken()
	if err != nil {
		return "", err
	}
	err = db.Write(ctx, func(tx Tx) error {
		if _, err := tx.Hold(ctx, LockInstall, true); err != nil {
			return err
		}
		if has, err := hasUsers(ctx, tx); err != nil || has {
			plain = ""
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM install_links`); err != nil {
			return err
		}
		now := db.now()
		_, err := tx.Exec(ctx, `INSERT INTO install_links (hash, expires_at, created_at) VALUES (?, ?, ?)`,
			hash, ms(now.Add(InstallLinkTTL)), ms(now))
		return err
	})
	if err != nil {
		return "", err
	}
	return plain, nil
}

// HasUsers reports whether the database has any user, disabled or not.
func (db *DB) HasUsers(ctx context.Context) (bool, error) {
	return hasUsers(ctx, db.Reader())
}

func hasUsers(ctx context.Context, q Executor) (bool, error) {
	var has bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users)`).Scan(&has)
	return has, err
}

// CheckInstallLink refuses a first-start token that Install would refuse.
func (db *DB) CheckInstallLink(ctx context.Context, token string) error {
	return db.checkInstallLink(ctx, db.Reader(), token)
}

func (db *DB) checkInstallLink(ctx context.Context, q Executor, token string) error {
	hash := TokenHash(token)
	if hash == nil {
		return InstallLinkInvalid()
	}
	var stored []byte
	var expires int64
	var has bool
	err := q.QueryRow(ctx, `SELECT hash, expires_at, EXISTS (SELECT 1 FROM users) FROM install_links WHERE hash = ?`, hash).
		Scan(&stored, &expires, &has)
	if errors.Is(err, ErrNoRows) {
		return InstallLinkInvalid()
	}
	if err != nil {
		return err
	}
	if !InstallLinkUsable(stored, hash, fromMS(expires), db.now(), has) {
		return InstallLinkInvalid()
	}
	return nil
}

// Install uses a first-start link: in one transaction it creates the organization
// unless one of that name exists, adds the admin with the password hash, and voids
// every first-start link. Of two uses at once, the second waits for the first's
// LockInstall, then finds a user and no link, and is refused.
func (db *DB) Install(ctx context.Context, by By, token string, in NewInstall) (*User, error) {
	u, err := CheckInstall(in, db.now())
	if err != nil {
		return nil, err
	}
	err = db.Write(ctx, func(tx Tx) error {
		if _, err := tx.Hold(ctx, LockInstall, true); err != nil {
			return err
		}
		if err := db.checkInstallLink(ctx, tx, token); err != nil {
			return err
		}
		org, err := findOrg(ctx, tx, in.OrgName)
		if enrich.KindOf(err) == enrich.KindNotFound {
			org, err = db.createOrg(ctx, tx, in.OrgName)
		}
		if err != nil {
			return err
		}
		u.OrgID, u.OrgName = org.ID, org.Name
		n, err := tx.Exec(ctx, `INSERT INTO users (id, org_id, email, role, password_hash, created_at) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (email) DO NOTHING`, u.ID, u.OrgID, u.Email, u.Role, in.PasswordHash, ms(u.CreatedAt))
		if err != nil {
			return err
		}
		if n == 0 {
			// `enrichd users create` made this user meanwhile (it takes no LockInstall):
			// the link is spent either way.
			return InstallLinkInvalid()
		}
		if _, err = tx.Exec(ctx, `DELETE FROM install_links`); err != nil {
			return err
		}
		// The first user adds themselves, with the first-start link.
		id, email := u.ID, u.Email
		e := userAdded(u)
		e.Actor = Actor{Kind: ActorUser, ID: &id, Name: &email}
		return db.appendAudit(ctx, tx, by, e)
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}
