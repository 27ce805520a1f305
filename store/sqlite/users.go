package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"enrichd/store"
)

const userColumns = `u.id, u.org_id, o.name, u.email, u.role, u.password_hash IS NOT NULL, u.created_at, u.disabled_at, u.last_login_at`

func scanUser(row scanner, extra ...any) (*User, error) {
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
// role of "" is a viewer.
func (db *DB) CreateUser(ctx context.Context, orgName, email, role string) (*User, string, error) {
	u, err := store.NewUser(email, role, db.now())
	if err != nil {
		return nil, "", err
	}
	plain, hash, err := store.NewToken()
	if err != nil {
		return nil, "", err
	}
	err = db.inTx(ctx, func(tx *Tx) error {
		org, err := findOrg(ctx, tx, orgName)
		if err != nil {
			return err
		}
		u.OrgID, u.OrgName = org.ID, org.Name
		var taken int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM users WHERE email = ?`, u.Email).Scan(&taken); err != nil {
			return err
		}
		if taken > 0 {
			return store.UserExists(u.Email)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO users (id, org_id, email, role, created_at) VALUES (?, ?, ?, ?, ?)`,
			u.ID, u.OrgID, u.Email, u.Role, ms(u.CreatedAt)); err != nil {
			return err
		}
		return db.addLink(ctx, tx, u.ID, hash)
	})
	if err != nil {
		return nil, "", err
	}
	return u, plain, nil
}

func (db *DB) addLink(ctx context.Context, tx *Tx, userID string, hash []byte) error {
	now := db.now()
	_, err := tx.ExecContext(ctx, `INSERT INTO user_links (hash, user_id, expires_at, created_at) VALUES (?, ?, ?, ?)`,
		hash, userID, ms(now.Add(SetupLinkTTL)), ms(now))
	return err
}

// ListUsers lists the organization's users by email, or with orgName "" every
// organization's, by organization name and email.
func (db *DB) ListUsers(ctx context.Context, orgName string) ([]User, error) {
	var rows *sql.Rows
	var err error
	if orgName == "" {
		rows, err = db.read.QueryContext(ctx, `SELECT `+userColumns+` FROM orgs o JOIN users u ON u.org_id = o.id ORDER BY o.name, u.email`)
	} else {
		var org *Org
		if org, err = db.FindOrg(ctx, orgName); err != nil {
			return nil, err
		}
		rows, err = db.read.QueryContext(ctx, `SELECT `+userColumns+` FROM users u JOIN orgs o ON o.id = u.org_id WHERE u.org_id = ? ORDER BY u.email`, org.ID)
	}
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []User
	for rows.Next() {
		u, err := scanUser(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *u)
	}
	return out, rows.Err()
}

func userByEmail(ctx context.Context, q querier, email string) (*User, error) {
	if len(email) > MaxEmail {
		return nil, store.UserNotFound(email[:MaxEmail] + "…")
	}
	u, err := scanUser(q.QueryRowContext(ctx, `SELECT `+userColumns+` FROM users u JOIN orgs o ON o.id = u.org_id WHERE u.email = ?`, email))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.UserNotFound(email)
	}
	return u, err
}

// endAccess ends every session of the user and voids every link.
func endAccess(ctx context.Context, tx *Tx, userID string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE user_id = ?`, userID); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM user_links WHERE user_id = ?`, userID)
	return err
}

// DisableUser disables the user for good: its sessions end at once and its links no
// longer work. Disabling a disabled user keeps the first date.
func (db *DB) DisableUser(ctx context.Context, email string) (*User, error) {
	email = store.NormalEmail(email)
	var u *User
	err := db.inTx(ctx, func(tx *Tx) error {
		var err error
		if u, err = userByEmail(ctx, tx, email); err != nil {
			return err
		}
		if u.DisabledAt == nil {
			now := db.now()
			if _, err := tx.ExecContext(ctx, `UPDATE users SET disabled_at = ? WHERE id = ?`, ms(now), u.ID); err != nil {
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
// used. A disabled user gets no link: it could not use one.
func (db *DB) NewSetupLink(ctx context.Context, email string) (string, error) {
	email = store.NormalEmail(email)
	plain, hash, err := store.NewToken()
	if err != nil {
		return "", err
	}
	err = db.inTx(ctx, func(tx *Tx) error {
		u, err := userByEmail(ctx, tx, email)
		if err != nil {
			return err
		}
		if u.DisabledAt != nil {
			return store.UserDisabled(email)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM user_links WHERE user_id = ?`, u.ID); err != nil {
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
	return db.linkUser(ctx, db.read, token)
}

func (db *DB) linkUser(ctx context.Context, q querier, token string) (*User, error) {
	hash := store.TokenHash(token)
	if hash == nil {
		return nil, store.LinkInvalid()
	}
	var stored []byte
	var expires int64
	u, err := scanUser(q.QueryRowContext(ctx, `SELECT `+userColumns+`, l.hash, l.expires_at FROM user_links l
		JOIN users u ON u.id = l.user_id JOIN orgs o ON o.id = u.org_id WHERE l.hash = ?`, hash), &stored, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.LinkInvalid()
	}
	if err != nil {
		return nil, err
	}
	if !store.LinkUsable(u, stored, hash, fromMS(expires), db.now()) {
		return nil, store.LinkInvalid()
	}
	return u, nil
}

// SetPassword uses a set-password link: it stores passwordHash (made by the caller;
// the store never sees a password) as the user's, voids all the user's links, this
// one included, and ends all its sessions, all in one transaction.
func (db *DB) SetPassword(ctx context.Context, token, passwordHash string) (*User, error) {
	if err := store.CheckPasswordHash(passwordHash); err != nil {
		return nil, err
	}
	var u *User
	err := db.inTx(ctx, func(tx *Tx) error {
		var err error
		if u, err = db.linkUser(ctx, tx, token); err != nil {
			return err
		}
		if err := endAccess(ctx, tx, u.ID); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE users SET password_hash = ? WHERE id = ?`, passwordHash, u.ID)
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
	email = store.NormalEmail(email)
	if len(email) > MaxEmail {
		return nil, "", store.LoginFailed()
	}
	var hash sql.NullString
	u, err := scanUser(db.read.QueryRowContext(ctx, `SELECT `+userColumns+`, u.password_hash FROM users u
		JOIN orgs o ON o.id = u.org_id WHERE u.email = ?`, email), &hash)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, "", store.LoginFailed()
	}
	if err != nil {
		return nil, "", err
	}
	if u.DisabledAt != nil || !hash.Valid {
		return nil, "", store.LoginFailed()
	}
	return u, hash.String, nil
}

// CreateSession starts a session of the user that ends after absolute at the latest,
// records the login, and returns the session's plaintext token. A user disabled
// meanwhile gets the login's unauthorized error.
func (db *DB) CreateSession(ctx context.Context, userID string, absolute time.Duration) (string, error) {
	if err := store.CheckSessionLength(absolute); err != nil {
		return "", err
	}
	plain, hash, err := store.NewToken()
	if err != nil {
		return "", err
	}
	err = db.inTx(ctx, func(tx *Tx) error {
		now := db.now()
		res, err := tx.ExecContext(ctx, `UPDATE users SET last_login_at = ? WHERE id = ? AND disabled_at IS NULL`, ms(now), userID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return store.LoginFailed()
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO sessions (hash, user_id, created_at, last_seen_at, expires_at) VALUES (?, ?, ?, ?, ?)`,
			hash, userID, ms(now), ms(now), ms(now.Add(absolute)))
		return err
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
// the file takes no writes for a moment (the session then merely ages sooner).
func (db *DB) SessionUser(ctx context.Context, token string, idle time.Duration) (*User, error) {
	if err := store.CheckIdleTimeout(idle); err != nil {
		return nil, err
	}
	hash := store.TokenHash(token)
	if hash == nil {
		return nil, store.SessionInvalid()
	}
	var stored []byte
	var lastSeen, expires int64
	u, err := scanUser(db.read.QueryRowContext(ctx, `SELECT `+userColumns+`, s.hash, s.last_seen_at, s.expires_at FROM sessions s
		JOIN users u ON u.id = s.user_id JOIN orgs o ON o.id = u.org_id WHERE s.hash = ?`, hash), &stored, &lastSeen, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.SessionInvalid()
	}
	if err != nil {
		return nil, err
	}
	now := db.now()
	if !store.SessionLive(u, stored, hash, fromMS(lastSeen), fromMS(expires), now, idle) {
		return nil, store.SessionInvalid()
	}
	if now.Sub(fromMS(lastSeen)) >= store.SessionRefresh {
		db.inTx(ctx, func(tx *Tx) error {
			// The condition keeps two requests that race here from writing twice.
			_, err := tx.ExecContext(ctx, `UPDATE sessions SET last_seen_at = ? WHERE hash = ? AND last_seen_at <= ?`,
				ms(now), hash, ms(now.Add(-store.SessionRefresh)))
			return err
		})
	}
	return u, nil
}

// EndSession ends the session of the token (logout). An unknown token is no error:
// the session is ended either way.
func (db *DB) EndSession(ctx context.Context, token string) error {
	hash := store.TokenHash(token)
	if hash == nil {
		return nil
	}
	return db.inTx(ctx, func(tx *Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE hash = ?`, hash)
		return err
	})
}

// PurgeSessions deletes the sessions SessionUser would refuse for age (past their
// absolute end, or idle for longer than idle) and the expired set-password links, and
// returns how many rows it deleted in all.
func (db *DB) PurgeSessions(ctx context.Context, idle time.Duration) (int, error) {
	if err := store.CheckIdleTimeout(idle); err != nil {
		return 0, err
	}
	var n int
	err := db.inTx(ctx, func(tx *Tx) error {
		n = 0
		now := db.now()
		for _, del := range []struct {
			query string
			at    time.Time
		}{
			{`DELETE FROM sessions WHERE expires_at <= ?`, now},
			{`DELETE FROM sessions WHERE last_seen_at < ?`, now.Add(-idle)},
			{`DELETE FROM user_links WHERE expires_at <= ?`, now},
		} {
			res, err := tx.ExecContext(ctx, del.query, ms(del.at))
			if err != nil {
				return err
			}
			deleted, err := res.RowsAffected()
			if err != nil {
				return err
			}
			n += int(deleted)
		}
		return nil
	})
	return n, err
}
