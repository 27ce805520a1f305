package store

import (
	"context"
	"crypto/subtle"
	"database/sql"
	"errors"
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

const userColumns = `u.id, u.org_id, o.name, u.email, u.role, u.password_hash IS NOT NULL, u.created_at, u.disabled_at, u.last_login_at`

// scanUser reads userColumns, then into extra the columns a query adds after them.
func scanUser(row Row, extra ...any) (*User, error) {
	var u User
	var created int64
	var disabled, lastLogin sql.NullInt64
	dest := append([]any{&u.ID, &u.OrgID, &u.OrgName, &u.Email, &u.Role, &u.PasswordSet, &created, &disabled, &lastLogin}, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	u.CreatedAt, u.DisabledAt, u.LastLoginAt = fromMS(created), fromNullMS(disabled), fromNullMS(lastLogin)
	return &u, nil
}

// CreateUser adds a user to the organization, without a password, and returns it with
// the plaintext token of its set-password link (valid SetupLinkTTL, for one use). A
// role of "" is a viewer. Two creations of one email at once (PostgreSQL) make one
// user: the unique email lets one in, and the other, inserting nothing, gets
// user_exists.
func (db *DB) CreateUser(ctx context.Context, by By, orgName, email, role string) (*User, string, error) {
	u, err := NewUser(email, role, db.now())
	if err != nil {
		return nil, "", err
	}
	plain, hash, err := NewToken()
	if err != nil {
		return nil, "", err
	}
	err = db.Write(ctx, func(tx Tx) error {
		org, err := findOrg(ctx, tx, orgName)
		if err != nil {
			return err
		}
		u.OrgID, u.OrgName = org.ID, org.Name
		n, err := tx.Exec(ctx, `INSERT INTO users (id, org_id, email, role, created_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (email) DO NOTHING`, u.ID, u.OrgID, u.Email, u.Role, ms(u.CreatedAt))
		if err != nil {
			return err
		}
		if n == 0 {
			return UserExists(u.Email)
		}
		if err := db.addLink(ctx, tx, u.ID, hash); err != nil {
			return err
		}
		return db.appendAudit(ctx, tx, by, userAdded(u))
	})
	if err != nil {
		return nil, "", err
	}
	return u, plain, nil
}

// userAdded is the audit entry of a user added to their organization.
func userAdded(u *User) NewAuditEntry {
	id := u.ID
	return NewAuditEntry{OrgID: u.OrgID, Action: AuditUserAdded, ObjectID: &id,
		Detail: map[string]string{"email": u.Email, "role": u.Role}}
}

func (db *DB) addLink(ctx context.Context, tx Tx, userID string, hash []byte) error {
	now := db.now()
	_, err := tx.Exec(ctx, `INSERT INTO user_links (hash, user_id, expires_at, created_at) VALUES (?, ?, ?, ?)`,
		hash, userID, ms(now.Add(SetupLinkTTL)), ms(now))
	return err
}

// ListUsers lists the organization's users by email, or with orgName "" every
// organization's, by organization name and email.
func (db *DB) ListUsers(ctx context.Context, orgName string) ([]User, error) {
	q := db.Reader()
	if orgName == "" {
		rows, err := q.Query(ctx, `SELECT `+userColumns+` FROM orgs o JOIN users u ON u.org_id = o.id ORDER BY o.name, u.email`)
		return collect(rows, err, scanUserValue)
	}
	org, err := findOrg(ctx, q, orgName)
	if err != nil {
		return nil, err
	}
	rows, err := q.Query(ctx, `SELECT `+userColumns+` FROM users u JOIN orgs o ON o.id = u.org_id WHERE u.org_id = ? ORDER BY u.email`, org.ID)
	return collect(rows, err, scanUserValue)
}

func scanUserValue(row Row) (User, error) {
	u, err := scanUser(row)
	if err != nil {
		return User{}, err
	}
	return *u, nil
}

// userByEmail reads the user and locks its row (PostgreSQL), so that what the caller
// decides from it (disabled or not) holds until the transaction ends.
func userByEmail(ctx context.Context, tx Tx, email string) (*User, error) {
	if len(email) > MaxEmail {
		return nil, UserNotFound(email[:MaxEmail] + "…")
	}
	u, err := scanUser(tx.QueryRow(ctx, `SELECT `+userColumns+` FROM users u JOIN orgs o ON o.id = u.org_id WHERE u.email = ? FOR UPDATE OF u`, email))
	if errors.Is(err, ErrNoRows) {
		return nil, UserNotFound(email)
	}
	return u, err
}

// endAccess ends every session of the user and voids every link.
func endAccess(ctx context.Context, tx Tx, userID string) error {
	if _, err := tx.Exec(ctx, `DELETE FROM sessions WHERE user_id = ?`, userID); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `DELETE FROM user_links WHERE user_id = ?`, userID)
	return err
}

// DisableUser disables the user for good: its sessions end at once and its links no
// longer work. Disabling a disabled user keeps the first date.
func (db *DB) DisableUser(ctx context.Context, email string) (*User, error) {
	email = NormalEmail(email)
	var u *User
	err := db.Write(ctx, func(tx Tx) error {
		var err error
		if u, err = userByEmail(ctx, tx, email); err != nil {
			return err
		}
		if u.DisabledAt == nil {
			now := db.now()
			if _, err := tx.Exec(ctx, `UPDATE users SET disabled_at = ? WHERE id = ?`, ms(now), u.ID); err != nil {
				return err
			}
			u.DisabledAt = &now
		}
		return endAccess(ctx, tx, u.ID)
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}

// NewSetupLink gives the user a new set-password link and returns its plaintext token;
// earlier links stop working. The current password keeps working until the link is
// used. A disabled user gets no link: it could not use one. The user's row is locked,
// so a DisableUser at the same moment cannot leave a link behind it.
func (db *DB) NewSetupLink(ctx context.Context, email string) (string, error) {
	email = NormalEmail(email)
	plain, hash, err := NewToken()
	if err != nil {
		return "", err
	}
	err = db.Write(ctx, func(tx Tx) error {
		u, err := userByEmail(ctx, tx, email)
		if err != nil {
			return err
		}
		if u.DisabledAt != nil {
			return UserDisabled(email)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM user_links WHERE user_id = ?`, u.ID); err != nil {
			return err
		}
		return db.addLink(ctx, tx, u.ID, hash)
	})
	if err != nil {
		return "", err
	}
	return plain, nil
}

// LinkUser returns the user a set-password link is for, while the link is unused and
// unexpired and the user enabled; any other token is a not_found link_invalid error.
func (db *DB) LinkUser(ctx context.Context, token string) (*User, error) {
	return db.linkUser(ctx, db.Reader(), token, "")
}

// linkUser reads the link's user, with lock appended to the query: SetPassword locks
// the link and the user (PostgreSQL), so that of two uses of one link at once the
// second waits, finds it deleted, and is refused.
func (db *DB) linkUser(ctx context.Context, q Executor, token, lock string) (*User, error) {
	hash := TokenHash(token)
	if hash == nil {
		return nil, LinkInvalid()
	}
	var stored []byte
	var expires int64
	u, err := scanUser(q.QueryRow(ctx, `SELECT `+userColumns+`, l.hash, l.expires_at FROM user_links l
		JOIN users u ON u.id = l.user_id JOIN orgs o ON o.id = u.org_id WHERE l.hash = ?`+lock, hash), &stored, &expires)
	if errors.Is(err, ErrNoRows) {
		return nil, LinkInvalid()
	}
	if err != nil {
		return nil, err
	}
	if !LinkUsable(u, stored, hash, fromMS(expires), db.now()) {
		return nil, LinkInvalid()
	}
	return u, nil
}

// SetPassword uses a set-password link: it stores passwordHash (made by the caller;
// the store never sees a password) as the user's, voids all the user's links, this
// one included, and ends all its sessions, all in one transaction.
func (db *DB) SetPassword(ctx context.Context, token, passwordHash string) (*User, error) {
	if err := CheckPasswordHash(passwordHash); err != nil {
		return nil, err
	}
	var u *User
	err := db.Write(ctx, func(tx Tx) error {
		var err error
		if u, err = db.linkUser(ctx, tx, token, ` FOR UPDATE OF l, u`); err != nil {
			return err
		}
		if err := endAccess(ctx, tx, u.ID); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE users SET password_hash = ? WHERE id = ?`, passwordHash, u.ID)
		u.PasswordSet = true
		return err
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}

// UserForLogin returns the user with the email and its password hash, for the caller
// to check a password against. An unknown email, a disabled user and one without a
// password yet all get the same unauthorized error.
func (db *DB) UserForLogin(ctx context.Context, email string) (*User, string, error) {
	email = NormalEmail(email)
	if len(email) > MaxEmail {
		return nil, "", LoginFailed()
	}
	var hash *string
	u, err := scanUser(db.Reader().QueryRow(ctx, `SELECT `+userColumns+`, u.password_hash FROM users u
		JOIN orgs o ON o.id = u.org_id WHERE u.email = ?`, email), &hash)
	if errors.Is(err, ErrNoRows) {
		return nil, "", LoginFailed()
	}
	if err != nil {
		return nil, "", err
	}
	if u.DisabledAt != nil || hash == nil {
		return nil, "", LoginFailed()
	}
	return u, *hash, nil
}

// CreateSession starts a session of the user that ends after absolute at the latest,
// records the login, and returns the session's plaintext token. A user disabled
// meanwhile gets the login's unauthorized error.
func (db *DB) CreateSession(ctx context.Context, by By, userID string, absolute time.Duration) (string, error) {
	if err := CheckSessionLength(absolute); err != nil {
		return "", err
	}
	plain, hash, err := NewToken()
	if err != nil {
		return "", err
	}
	err = db.Write(ctx, func(tx Tx) error {
		now := db.now()
		var orgID, email string
		err := tx.QueryRow(ctx, `UPDATE users SET last_login_at = ? WHERE id = ? AND disabled_at IS NULL RETURNING org_id, email`,
			ms(now), userID).Scan(&orgID, &email)
		if errors.Is(err, ErrNoRows) {
			return LoginFailed()
		}
		if err != nil {
			return err
		}
		if _, err = tx.Exec(ctx, `INSERT INTO sessions (hash, user_id, created_at, last_seen_at, expires_at) VALUES (?, ?, ?, ?, ?)`,
			hash, userID, ms(now), ms(now), ms(now.Add(absolute))); err != nil {
			return err
		}
		// A sign-in is the user's own act, whoever by says acts.
		id := userID
		return db.appendAudit(ctx, tx, by, NewAuditEntry{OrgID: orgID, Action: AuditUserSignedIn, ObjectID: &id,
			Actor: Actor{Kind: ActorUser, ID: &id, Name: &email}})
	})
	if err != nil {
		return "", err
	}
	return plain, nil
}

// SessionUser returns the user of a session token. An unknown token, a session idle
// for longer than idle or past its absolute end, and a disabled user's session are
// unauthorized. The session's last_seen_at is written only once it is a minute old;
// that write is best effort, since a dashboard that reads should not fail because
// the database takes no writes for a moment (the session then merely ages sooner).
func (db *DB) SessionUser(ctx context.Context, token string, idle time.Duration) (*User, error) {
	if err := CheckIdleTimeout(idle); err != nil {
		return nil, err
	}
	hash := TokenHash(token)
	if hash == nil {
		return nil, SessionInvalid()
	}
	var stored []byte
	var lastSeen, expires int64
	u, err := scanUser(db.Reader().QueryRow(ctx, `SELECT `+userColumns+`, s.hash, s.last_seen_at, s.expires_at FROM sessions s
		JOIN users u ON u.id = s.user_id JOIN orgs o ON o.id = u.org_id WHERE s.hash = ?`, hash), &stored, &lastSeen, &expires)
	if errors.Is(err, ErrNoRows) {
		return nil, SessionInvalid()
	}
	if err != nil {
		return nil, err
	}
	now := db.now()
	if !SessionLive(u, stored, hash, fromMS(lastSeen), fromMS(expires), now, idle) {
		return nil, SessionInvalid()
	}
	if now.Sub(fromMS(lastSeen)) >= SessionRefresh {
		db.Write(ctx, func(tx Tx) error {
			// The condition keeps two requests that race here from writing twice.
			_, err := tx.Exec(ctx, `UPDATE sessions SET last_seen_at = ? WHERE hash = ? AND last_seen_at <= ?`,
				ms(now), hash, ms(now.Add(-SessionRefresh)))
			return err
		})
	}
	return u, nil
}

// EndSession ends the session of the token (logout). An unknown token is no error:
// the session is ended either way.
func (db *DB) EndSession(ctx context.Context, token string) error {
	hash := TokenHash(token)
	if hash == nil {
		return nil
	}
	return db.Write(ctx, func(tx Tx) error {
		_, err := tx.Exec(ctx, `DELETE FROM sessions WHERE hash = ?`, hash)
		return err
	})
}

// PurgeSessions deletes the sessions SessionUser would refuse for age (past their
// absolute end, or idle for longer than idle) and the expired set-password links, and
// returns how many rows it deleted in all. One process purges at a time: another that
// asks meanwhile (a PostgreSQL replica) deletes nothing and returns 0.
func (db *DB) PurgeSessions(ctx context.Context, idle time.Duration) (int, error) {
	if err := CheckIdleTimeout(idle); err != nil {
		return 0, err
	}
	var n int
	err := db.Write(ctx, func(tx Tx) error {
		n = 0
		if ok, err := tx.Hold(ctx, LockSessionPurge, false); err != nil || !ok {
			return err
		}
		now := db.now()
		for _, del := range []struct {
			query string
			at    time.Time
		}{
			{`DELETE FROM sessions WHERE expires_at <= ?`, now},
			{`DELETE FROM sessions WHERE last_seen_at < ?`, now.Add(-idle)},
			{`DELETE FROM user_links WHERE expires_at <= ?`, now},
		} {
			deleted, err := tx.Exec(ctx, del.query, ms(del.at))
			if err != nil {
				return err
			}
			n += int(deleted)
		}
		return nil
	})
	return n, err
}
