package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"enrichd/enrich"
	"enrichd/store"
)

// NewInstallLink makes a new first-start link, voiding any earlier one, and returns its
// token; once the database has a user it makes none and returns "".
func (db *DB) NewInstallLink(ctx context.Context) (string, error) {
	plain, hash, err := store.NewToken()
	if err != nil {
		return "", err
	}
	err = db.inTx(ctx, func(tx *Tx) error {
		if has, err := hasUsers(ctx, tx); err != nil || has {
			plain = ""
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM install_links`); err != nil {
			return err
		}
		now := db.now()
		_, err := tx.ExecContext(ctx, `INSERT INTO install_links (hash, expires_at, created_at) VALUES (?, ?, ?)`,
			hash, ms(now.Add(store.InstallLinkTTL)), ms(now))
		return err
	})
	if err != nil {
		return "", err
	}
	return plain, nil
}

// HasUsers reports whether the database has any user, disabled or not.
func (db *DB) HasUsers(ctx context.Context) (bool, error) {
	return hasUsers(ctx, db.read)
}

func hasUsers(ctx context.Context, q querier) (bool, error) {
	var has bool
	err := q.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM users)`).Scan(&has)
	return has, err
}

// CheckInstallLink refuses a first-start token that Install would refuse.
func (db *DB) CheckInstallLink(ctx context.Context, token string) error {
	return checkInstallLink(ctx, db.read, token, db.now)
}

func checkInstallLink(ctx context.Context, q querier, token string, now func() time.Time) error {
	hash := store.TokenHash(token)
	if hash == nil {
		return store.InstallLinkInvalid()
	}
	var stored []byte
	var expires int64
	var has bool
	err := q.QueryRowContext(ctx, `SELECT hash, expires_at, EXISTS (SELECT 1 FROM users) FROM install_links WHERE hash = ?`, hash).
		Scan(&stored, &expires, &has)
	if errors.Is(err, sql.ErrNoRows) {
		return store.InstallLinkInvalid()
	}
	if err != nil {
		return err
	}
	if !store.InstallLinkUsable(stored, hash, fromMS(expires), now(), has) {
		return store.InstallLinkInvalid()
	}
	return nil
}

// Install uses a first-start link: in one transaction it creates the organization
// unless one of that name exists, adds the admin with the password hash, and voids
// every first-start link. A second use, or a use once any user exists, is refused.
func (db *DB) Install(ctx context.Context, token string, in store.NewInstall) (*User, error) {
	u, err := store.CheckInstall(in, db.now())
	if err != nil {
		return nil, err
	}
	err = db.inTx(ctx, func(tx *Tx) error {
		if err := checkInstallLink(ctx, tx, token, db.now); err != nil {
			return err
		}
		org, err := findOrg(ctx, tx, in.OrgName)
		var e *enrich.Error
		if errors.As(err, &e) && e.Kind == enrich.KindNotFound {
			org, err = db.createOrg(ctx, tx, in.OrgName)
		}
		if err != nil {
			return err
		}
		u.OrgID, u.OrgName = org.ID, org.Name
		if _, err := tx.ExecContext(ctx, `INSERT INTO users (id, org_id, email, role, password_hash, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			u.ID, u.OrgID, u.Email, u.Role, in.PasswordHash, ms(u.CreatedAt)); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM install_links`)
		return err
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}
