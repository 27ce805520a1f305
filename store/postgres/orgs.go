package postgres

import (
	"context"
	"crypto/subtle"
	"errors"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// querier is what a transaction and the pool have in common, for helpers that read
// inside a write or on their own.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// isUniqueViolation reports whether err is a unique constraint's refusal, constraint
// naming the one expected ("" for any).
func isUniqueViolation(err error, constraint string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && (constraint == "" || pe.ConstraintName == constraint)
}

// CreateOrg creates an organization. Names are 1-100 letters, digits, '.', '_', '-'.
func (db *DB) CreateOrg(ctx context.Context, name string) (*store.Org, error) {
	var org *store.Org
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		org, err = db.createOrg(ctx, tx, name)
		return err
	})
	return org, err
}

// createOrg inserts the organization. Two transactions creating the same name at once
// both find it missing; the unique name lets one in and the other, waiting for it,
// inserts nothing (ON CONFLICT DO NOTHING, which leaves its transaction usable) and
// gets org_exists.
func (db *DB) createOrg(ctx context.Context, tx pgx.Tx, name string) (*store.Org, error) {
	if err := store.CheckOrgName(name); err != nil {
		return nil, err
	}
	if _, err := findOrg(ctx, tx, name); err == nil {
		return nil, store.OrgExists(name)
	}
	org := &store.Org{ID: uuid.NewString(), Name: name, CreatedAt: db.now()}
	tag, err := tx.Exec(ctx, `INSERT INTO orgs (id, name, created_at) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING`,
		org.ID, org.Name, ms(org.CreatedAt))
	if err != nil {
		return nil, err
	}
	if tag.RowsAffected() == 0 {
		return nil, store.OrgExists(name)
	}
	return org, nil
}

// FindOrg returns the organization with the given name.
func (db *DB) FindOrg(ctx context.Context, name string) (*store.Org, error) {
	org, err := findOrg(ctx, db.pool, name)
	return org, db.readChecked(err)
}

func findOrg(ctx context.Context, q querier, name string) (*store.Org, error) {
	var o store.Org
	var created int64
	err := q.QueryRow(ctx, `SELECT id, name, created_at FROM orgs WHERE name = $1`, name).Scan(&o.ID, &o.Name, &created)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.OrgNotFound(name)
	}
	if err != nil {
		return nil, err
	}
	o.CreatedAt = fromMS(created)
	return &o, nil
}

// GetOrg returns the organization with the given id.
func (db *DB) GetOrg(ctx context.Context, id string) (*store.Org, error) {
	var o store.Org
	var created int64
	err := db.pool.QueryRow(ctx, `SELECT id, name, created_at FROM orgs WHERE id = $1`, id).Scan(&o.ID, &o.Name, &created)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.OrgIDNotFound()
	}
	if err != nil {
		return nil, db.readChecked(err)
	}
	o.CreatedAt = fromMS(created)
	return &o, nil
}

// ListOrgs lists every organization by name.
func (db *DB) ListOrgs(ctx context.Context) ([]store.Org, error) {
	rows, err := db.pool.Query(ctx, `SELECT id, name, created_at FROM orgs ORDER BY name`)
	if err != nil {
		return nil, db.readChecked(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Org, error) {
		var o store.Org
		var created int64
		err := r.Scan(&o.ID, &o.Name, &created)
		o.CreatedAt = fromMS(created)
		return o, err
	})
	return out, db.readChecked(err)
}

// CreateKey makes a new API key for the organization and returns it: the only time
// the key is ever seen. With createOrg, a missing organization is created first.
func (db *DB) CreateKey(ctx context.Context, orgName, keyName string, createOrg bool) (string, *store.APIKey, error) {
	plain, hash, key, err := store.NewAPIKey(keyName, db.now())
	if err != nil {
		return "", nil, err
	}
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		org, err := findOrg(ctx, tx, orgName)
		if enrich.KindOf(err) == enrich.KindNotFound && createOrg {
			org, err = db.createOrg(ctx, tx, orgName)
			if enrich.KindOf(err) == enrich.KindConflict {
				// Created by another transaction since findOrg: committed, as the
				// unique index waited for it, so a fresh statement sees it.
				org, err = findOrg(ctx, tx, orgName)
			}
		}
		if err != nil {
			return err
		}
		key.OrgID = org.ID
		_, err = tx.Exec(ctx, `INSERT INTO api_keys (id, org_id, name, prefix, hash, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
			key.ID, key.OrgID, key.Name, key.Prefix, hash[:], ms(key.CreatedAt))
		return err
	})
	if err != nil {
		return "", nil, err
	}
	return plain, key, nil
}

// ListKeys lists an organization's keys, revoked ones included.
func (db *DB) ListKeys(ctx context.Context, orgName string) ([]store.APIKey, error) {
	org, err := db.FindOrg(ctx, orgName)
	if err != nil {
		return nil, err
	}
	rows, err := db.pool.Query(ctx, `SELECT id, org_id, name, prefix, created_at, revoked_at, last_used_at
		FROM api_keys WHERE org_id = $1 ORDER BY created_at, id`, org.ID)
	if err != nil {
		return nil, db.readChecked(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.APIKey, error) {
		var k store.APIKey
		var created int64
		var revoked, used *int64
		err := r.Scan(&k.ID, &k.OrgID, &k.Name, &k.Prefix, &created, &revoked, &used)
		k.CreatedAt, k.RevokedAt, k.LastUsedAt = fromMS(created), fromNullMS(revoked), fromNullMS(used)
		return k, err
	})
	return out, db.readChecked(err)
}

// RevokeKey revokes the organization's key named by its id or its prefix. It takes
// effect on the next request to any replica: keys are not cached (see Authenticate).
func (db *DB) RevokeKey(ctx context.Context, orgName, idOrPrefix string) error {
	return db.inTx(ctx, func(tx pgx.Tx) error {
		org, err := findOrg(ctx, tx, orgName)
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE api_keys SET revoked_at = coalesce(revoked_at, $1)
			WHERE org_id = $2 AND (id = $3 OR prefix = $3)`, ms(db.now()), org.ID, idOrPrefix)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return store.KeyNotFound(orgName, idOrPrefix)
		}
		return nil
	})
}

// Authenticate returns the principal of a plaintext API key, or an unauthorized error
// for a missing, unknown or revoked key. It records the key's use when the last one
// recorded is a minute old or more (see touchKey).
//
// Keys are read from the database on every request, not cached as the SQLite store
// caches them: a key revoked through one replica must stop working on all of them at
// once, and the read is one primary-key lookup on the unique hash index, where a cache
// would need its invalidations sent to every replica (LISTEN) and a rule for the time
// the listener is reconnecting.
func (db *DB) Authenticate(ctx context.Context, plain string) (*store.Principal, error) {
	unauthorized := store.Unauthorized()
	hash, ok := store.APIKeyHash(plain)
	if !ok {
		return nil, unauthorized
	}
	now := db.now()
	var p store.Principal
	var stored []byte
	var revoked, used *int64
	err := db.pool.QueryRow(ctx, `SELECT id, org_id, hash, revoked_at, last_used_at FROM api_keys WHERE hash = $1`, hash[:]).
		Scan(&p.KeyID, &p.OrgID, &stored, &revoked, &used)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, unauthorized
	}
	if err != nil {
		return nil, db.readChecked(err)
	}
	if subtle.ConstantTimeCompare(stored, hash[:]) != 1 || revoked != nil {
		return nil, unauthorized
	}
	if store.KeyUseDue(fromNullMS(used), now) {
		db.touchKey(p.KeyID, now)
	}
	return &p, nil
}

// touchKey records that the key was used at now, unless a write of it is already under
// way here or the storage is failing. The UPDATE checks the age again, so replicas
// that touch the same key at the same minute still make one change.
func (db *DB) touchKey(keyID string, now time.Time) {
	if db.StorageFailing() {
		return // the probes, not a key's last use, find out when writes work again
	}
	db.touches.Touch(keyID, now, func(ctx context.Context) error {
		return db.inTx(ctx, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `UPDATE api_keys SET last_used_at = $1
				WHERE id = $2 AND (last_used_at IS NULL OR last_used_at <= $3)`,
				ms(now), keyID, ms(now.Add(-store.KeyUseResolution)))
			return err
		})
	}, nil)
}
