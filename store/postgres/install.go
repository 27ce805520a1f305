package postgres

import (
	"context"
	"errors"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/jackc/pgx/v5"
)

// lockInstall makes the first start's transactions one at a time across replicas, so
// that "no user yet" still holds when a link is made or used.
const lockInstall = lockBase | 0x03

// NewInstallLink makes a new first-start link, voiding any earlier one, and returns its
// token; once the database has a user it makes none and returns "".
func (db *DB) NewInstallLink(ctx context.Context) (string, error) {
	plain, hash, err := store.NewToken()
	if err != nil {
		return "", err
	}
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockInstall); err != nil {
			return err
		}
		var has bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users)`).Scan(&has); err != nil || has {
			plain = ""
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM install_links`); err != nil {
			return err
		}
		now := db.now()
		_, err := tx.Exec(ctx, `INSERT INTO install_links (hash, expires_at, created_at) VALUES ($1, $2, $3)`,
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
	var has bool
	err := db.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users)`).Scan(&has)
	return has, db.readChecked(err)
}

// CheckInstallLink refuses a first-start token that Install would refuse.
func (db *DB) CheckInstallLink(ctx context.Context, token string) error {
	return db.readChecked(checkInstallLink(ctx, db.pool, token, db.now()))
}

func checkInstallLink(ctx context.Context, q querier, token string, now time.Time) error {
	hash := store.TokenHash(token)
	if hash == nil {
		return store.InstallLinkInvalid()
	}
	var stored []byte
	var expires int64
	var has bool
	err := q.QueryRow(ctx, `SELECT hash, expires_at, EXISTS (SELECT 1 FROM users) FROM install_links WHERE hash = $1`, hash).
		Scan(&stored, &expires, &has)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.InstallLinkInvalid()
	}
	if err != nil {
		return err
	}
	if !store.InstallLinkUsable(stored, hash, fromMS(expires), now, has) {
		return store.InstallLinkInvalid()
	}
	return nil
}

// Install uses a first-start link: in one transaction it creates the organization
// unless one of that name exists, adds the admin with the password hash, and voids
// every first-start link. Of two uses at once, the second waits for the first's lock,
// then finds a user and no link, and is refused.
func (db *DB) Install(ctx context.Context, token string, in store.NewInstall) (*store.User, error) {
	u, err := store.CheckInstall(in, db.now())
	if err != nil {
		return nil, err
	}
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockInstall); err != nil {
			return err
		}
		if err := checkInstallLink(ctx, tx, token, db.now()); err != nil {
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
		tag, err := tx.Exec(ctx, `INSERT INTO users (id, org_id, email, role, password_hash, created_at) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (email) DO NOTHING`, u.ID, u.OrgID, u.Email, u.Role, in.PasswordHash, ms(u.CreatedAt))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			// `enrichd users create` made this user meanwhile: the link is spent either way.
			return store.InstallLinkInvalid()
		}
		_, err = tx.Exec(ctx, `DELETE FROM install_links`)
		return err
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}
