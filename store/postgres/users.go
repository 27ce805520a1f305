package postgres

import (
	"context"
	"errors"
	"time"

	"enrichd/store"

	"github.com/jackc/pgx/v5"
)

const userColumns = `u.id, u.org_id, o.name, u.email, u.role, u.password_hash IS NOT NULL, u.created_at, u.disabled_at, u.last_login_at`

func scanUser(row pgx.Row, extra ...any) (*store.User, error) {
	var u store.User
	var created int64
	var disabled, lastLogin *int64
	dest := append([]any{&u.ID, &u.OrgID, &u.OrgName, &u.Email, &u.Role, &u.PasswordSet, &created, &disabled, &lastLogin}, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	u.CreatedAt, u.DisabledAt, u.LastLoginAt = fromMS(created), fromNullMS(disabled), fromNullMS(lastLogin)
	return &u, nil
}

// CreateUser adds a user to the organization, without a password, and returns it with
// the plaintext token of its set-password link (valid store.SetupLinkTTL, for one use).
// A role of "" is a viewer. Two creations of one email at once make one user: the
// unique email lets one in, and the other gets user_exists.
func (db *DB) CreateUser(ctx context.Context, orgName, email, role string) (*store.User, string, error) {
	u, err := store.NewUser(email, role, db.now())
	if err != nil {
		return nil, "", err
	}
	plain, hash, err := store.NewToken()
	if err != nil {
		return nil, "", err
	}
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		org, err := findOrg(ctx, tx, orgName)
		if err != nil {
			return err
		}
		u.OrgID, u.OrgName = org.ID, org.Name
		tag, err := tx.Exec(ctx, `INSERT INTO users (id, org_id, email, role, created_at) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (email) DO NOTHING`, u.ID, u.OrgID, u.Email, u.Role, ms(u.CreatedAt))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return store.UserExists(u.Email)
		}
		return db.addLink(ctx, tx, u.ID, hash)
	})
	if err != nil {
		return nil, "", err
	}
	return u, plain, nil
}

func (db *DB) addLink(ctx context.Context, tx pgx.Tx, userID string, hash []byte) error {
	now := db.now()
	_, err := tx.Exec(ctx, `INSERT INTO user_links (hash, user_id, expires_at, created_at) VALUES ($1, $2, $3, $4)`,
		hash, userID, ms(now.Add(store.SetupLinkTTL)), ms(now))
	return err
}

// ListUsers lists the organization's users by email, or with orgName "" every
// organization's, by organization name and email.
func (db *DB) ListUsers(ctx context.Context, orgName string) ([]store.User, error) {
	var rows pgx.Rows
	var err error
	if orgName == "" {
		rows, err = db.pool.Query(ctx, `SELECT `+userColumns+` FROM orgs o JOIN users u ON u.org_id = o.id ORDER BY o.name, u.email`)
	} else {
		var org *store.Org
		if org, err = db.FindOrg(ctx, orgName); err != nil {
			return nil, err
		}
		rows, err = db.pool.Query(ctx, `SELECT `+userColumns+` FROM users u JOIN orgs o ON o.id = u.org_id WHERE u.org_id = $1 ORDER BY u.email`, org.ID)
	}
	if err != nil {
		return nil, db.readChecked(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.User, error) {
		u, err := scanUser(r)
		if err != nil {
			return store.User{}, err
		}
		return *u, nil
	})
	return out, db.readChecked(err)
}

// userByEmail reads the user; forUpdate locks its row, so that what the caller decides
// from it (disabled or not) holds until the transaction ends.
func userByEmail(ctx context.Context, q querier, email string, forUpdate bool) (*store.User, error) {
	if len(email) > store.MaxEmail {
		return nil, store.UserNotFound(email[:store.MaxEmail] + "…")
	}
	lock := ""
	if forUpdate {
		lock = " FOR UPDATE OF u"
	}
	u, err := scanUser(q.QueryRow(ctx, `SELECT `+userColumns+` FROM users u JOIN orgs o ON o.id = u.org_id WHERE u.email = $1`+lock, email))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.UserNotFound(email)
	}
	return u, err
}

// endAccess ends every session of the user and voids every link.
func endAccess(ctx context.Context, tx pgx.Tx, userID string) error {
	if _, err := tx.Exec(ctx, `DELETE FROM sessions WHERE user_id = $1`, userID); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `DELETE FROM user_links WHERE user_id = $1`, userID)
	return err
}

// DisableUser disables the user for good: its sessions end at once and its links no
// longer work. Disabling a disabled user keeps the first date.
func (db *DB) DisableUser(ctx context.Context, email string) (*store.User, error) {
	email = store.NormalEmail(email)
	var u *store.User
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		if u, err = userByEmail(ctx, tx, email, true); err != nil {
			return err
		}
		if u.DisabledAt == nil {
			now := db.now()
			if _, err := tx.Exec(ctx, `UPDATE users SET disabled_at = $1 WHERE id = $2`, ms(now), u.ID); err != nil {
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
// earlier links stop working. A disabled user gets no link. The user's row is locked,
// so a DisableUser at the same moment cannot leave a link behind it.
func (db *DB) NewSetupLink(ctx context.Context, email string) (string, error) {
	email = store.NormalEmail(email)
	plain, hash, err := store.NewToken()
	if err != nil {
		return "", err
	}
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		u, err := userByEmail(ctx, tx, email, true)
		if err != nil {
			return err
		}
		if u.DisabledAt != nil {
			return store.UserDisabled(email)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM user_links WHERE user_id = $1`, u.ID); err != nil {
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
func (db *DB) LinkUser(ctx context.Context, token string) (*store.User, error) {
	u, err := db.linkUser(ctx, db.pool, token, false)
	return u, db.readChecked(err)
}

// linkUser reads the link's user; forUpdate locks the link, so that of two uses of one
// link at once the second waits, finds it deleted, and is refused.
func (db *DB) linkUser(ctx context.Context, q querier, token string, forUpdate bool) (*store.User, error) {
	hash := store.TokenHash(token)
	if hash == nil {
		return nil, store.LinkInvalid()
	}
	lock := ""
	if forUpdate {
		lock = " FOR UPDATE OF l, u"
	}
	var stored []byte
	var expires int64
	u, err := scanUser(q.QueryRow(ctx, `SELECT `+userColumns+`, l.hash, l.expires_at FROM user_links l
		JOIN users u ON u.id = l.user_id JOIN orgs o ON o.id = u.org_id WHERE l.hash = $1`+lock, hash), &stored, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
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

// SetPassword uses a set-password link: it stores passwordHash as the user's, voids all
// the user's links, this one included, and ends all its sessions, in one transaction.
func (db *DB) SetPassword(ctx context.Context, token, passwordHash string) (*store.User, error) {
	if err := store.CheckPasswordHash(passwordHash); err != nil {
		return nil, err
	}
	var u *store.User
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		if u, err = db.linkUser(ctx, tx, token, true); err != nil {
			return err
		}
		if err := endAccess(ctx, tx, u.ID); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE users SET password_hash = $1 WHERE id = $2`, passwordHash, u.ID)
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
func (db *DB) UserForLogin(ctx context.Context, email string) (*store.User, string, error) {
	email = store.NormalEmail(email)
	if len(email) > store.MaxEmail {
		return nil, "", store.LoginFailed()
	}
	var hash *string
	u, err := scanUser(db.pool.QueryRow(ctx, `SELECT `+userColumns+`, u.password_hash FROM users u
		JOIN orgs o ON o.id = u.org_id WHERE u.email = $1`, email), &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, "", store.LoginFailed()
	}
	if err != nil {
		return nil, "", db.readChecked(err)
	}
	if u.DisabledAt != nil || hash == nil {
		return nil, "", store.LoginFailed()
	}
	return u, *hash, nil
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
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		now := db.now()
		tag, err := tx.Exec(ctx, `UPDATE users SET last_login_at = $1 WHERE id = $2 AND disabled_at IS NULL`, ms(now), userID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return store.LoginFailed()
		}
		_, err = tx.Exec(ctx, `INSERT INTO sessions (hash, user_id, created_at, last_seen_at, expires_at) VALUES ($1, $2, $3, $4, $5)`,
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
// unauthorized. The session's last_seen_at is written only once it is a minute old,
// best effort.
func (db *DB) SessionUser(ctx context.Context, token string, idle time.Duration) (*store.User, error) {
	if err := store.CheckIdleTimeout(idle); err != nil {
		return nil, err
	}
	hash := store.TokenHash(token)
	if hash == nil {
		return nil, store.SessionInvalid()
	}
	var stored []byte
	var lastSeen, expires int64
	u, err := scanUser(db.pool.QueryRow(ctx, `SELECT `+userColumns+`, s.hash, s.last_seen_at, s.expires_at FROM sessions s
		JOIN users u ON u.id = s.user_id JOIN orgs o ON o.id = u.org_id WHERE s.hash = $1`, hash), &stored, &lastSeen, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.SessionInvalid()
	}
	if err != nil {
		return nil, db.readChecked(err)
	}
	now := db.now()
	if !store.SessionLive(u, stored, hash, fromMS(lastSeen), fromMS(expires), now, idle) {
		return nil, store.SessionInvalid()
	}
	if now.Sub(fromMS(lastSeen)) >= store.SessionRefresh {
		db.inTx(ctx, func(tx pgx.Tx) error {
			// The condition keeps two requests that race here from writing twice.
			_, err := tx.Exec(ctx, `UPDATE sessions SET last_seen_at = $1 WHERE hash = $2 AND last_seen_at <= $3`,
				ms(now), hash, ms(now.Add(-store.SessionRefresh)))
			return err
		})
	}
	return u, nil
}

// EndSession ends the session of the token (logout). An unknown token is no error.
func (db *DB) EndSession(ctx context.Context, token string) error {
	hash := store.TokenHash(token)
	if hash == nil {
		return nil
	}
	return db.inTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `DELETE FROM sessions WHERE hash = $1`, hash)
		return err
	})
}

// PurgeSessions deletes the sessions SessionUser would refuse for age (past their
// absolute end, or idle for longer than idle) and the expired set-password links, and
// returns how many rows it deleted in all. One replica purges at a time: another that
// asks meanwhile deletes nothing and returns 0.
func (db *DB) PurgeSessions(ctx context.Context, idle time.Duration) (int, error) {
	if err := store.CheckIdleTimeout(idle); err != nil {
		return 0, err
	}
	var n int
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		n = 0
		if ok, err := db.tryAdvisoryXactLock(ctx, tx, lockPurgeSessions); err != nil || !ok {
			return err
		}
		now := db.now()
		for _, del := range []struct {
			query string
			at    time.Time
		}{
			{`DELETE FROM sessions WHERE expires_at <= $1`, now},
			{`DELETE FROM sessions WHERE last_seen_at < $1`, now.Add(-idle)},
			{`DELETE FROM user_links WHERE expires_at <= $1`, now},
		} {
			tag, err := tx.Exec(ctx, del.query, ms(del.at))
			if err != nil {
				return err
			}
			n += int(tag.RowsAffected())
		}
		return nil
	})
	return n, err
}
