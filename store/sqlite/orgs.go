package sqlite

import (
	"context"
	"crypto/subtle"
	"database/sql"
	"errors"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/google/uuid"
)

// CreateOrg creates an organization. Names are 1-100 letters, digits, '.', '_', '-'.
func (db *DB) CreateOrg(ctx context.Context, name string) (*Org, error) {
	var org *Org
	err := db.inTx(ctx, func(tx *Tx) error {
		var err error
		org, err = db.createOrg(ctx, tx, name)
		return err
	})
	return org, err
}

func (db *DB) createOrg(ctx context.Context, tx *Tx, name string) (*Org, error) {
	if err := store.CheckOrgName(name); err != nil {
		return nil, err
	}
	if _, err := findOrg(ctx, tx, name); err == nil {
		return nil, store.OrgExists(name)
	}
	org := &Org{ID: uuid.NewString(), Name: name, CreatedAt: db.now()}
	_, err := tx.ExecContext(ctx, `INSERT INTO orgs (id, name, created_at) VALUES (?, ?, ?)`, org.ID, org.Name, ms(org.CreatedAt))
	return org, err
}

// FindOrg returns the organization with the given name.
func (db *DB) FindOrg(ctx context.Context, name string) (*Org, error) {
	return findOrg(ctx, db.read, name)
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func findOrg(ctx context.Context, q querier, name string) (*Org, error) {
	var o Org
	var created int64
	err := q.QueryRowContext(ctx, `SELECT id, name, created_at FROM orgs WHERE name = ?`, name).Scan(&o.ID, &o.Name, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.OrgNotFound(name)
	}
	if err != nil {
		return nil, err
	}
	o.CreatedAt = fromMS(created)
	return &o, nil
}

// GetOrg returns the organization with the given id.
func (db *DB) GetOrg(ctx context.Context, id string) (*Org, error) {
	var o Org
	var created int64
	err := db.read.QueryRowContext(ctx, `SELECT id, name, created_at FROM orgs WHERE id = ?`, id).Scan(&o.ID, &o.Name, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.OrgIDNotFound()
	}
	if err != nil {
		return nil, err
	}
	o.CreatedAt = fromMS(created)
	return &o, nil
}

// ListOrgs lists every organization by name.
func (db *DB) ListOrgs(ctx context.Context) ([]Org, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT id, name, created_at FROM orgs ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Org
	for rows.Next() {
		var o Org
		var created int64
		if err := rows.Scan(&o.ID, &o.Name, &created); err != nil {
			return nil, err
		}
		o.CreatedAt = fromMS(created)
		out = append(out, o)
	}
	return out, rows.Err()
}

// CreateKey makes a new API key for the organization and returns it: the only time
// the key is ever seen. With createOrg, a missing organization is created first.
func (db *DB) CreateKey(ctx context.Context, orgName, keyName string, createOrg bool) (string, *APIKey, error) {
	plain, hash, key, err := store.NewAPIKey(keyName, db.now())
	if err != nil {
		return "", nil, err
	}
	err = db.inTx(ctx, func(tx *Tx) error {
		org, err := findOrg(ctx, tx, orgName)
		if enrich.KindOf(err) == enrich.KindNotFound && createOrg {
			org, err = db.createOrg(ctx, tx, orgName)
		}
		if err != nil {
			return err
		}
		key.OrgID = org.ID
		_, err = tx.ExecContext(ctx, `INSERT INTO api_keys (id, org_id, name, prefix, hash, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			key.ID, key.OrgID, key.Name, key.Prefix, hash[:], ms(key.CreatedAt))
		return err
	})
	if err != nil {
		return "", nil, err
	}
	return plain, key, nil
}

const listKeysQuery = `SELECT id, org_id, name, prefix, created_at, revoked_at, last_used_at
	FROM api_keys WHERE org_id = ? ORDER BY created_at`

// ListKeys lists an organization's keys, revoked ones included.
func (db *DB) ListKeys(ctx context.Context, orgName string) ([]APIKey, error) {
	org, err := db.FindOrg(ctx, orgName)
	if err != nil {
		return nil, err
	}
	rows, err := db.read.QueryContext(ctx, listKeysQuery, org.ID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []APIKey
	for rows.Next() {
		var k APIKey
		var created int64
		var revoked, used sql.NullInt64
		if err := rows.Scan(&k.ID, &k.OrgID, &k.Name, &k.Prefix, &created, &revoked, &used); err != nil {
			return nil, err
		}
		k.CreatedAt, k.RevokedAt, k.LastUsedAt = fromMS(created), fromNullMS(revoked), fromNullMS(used)
		out = append(out, k)
	}
	return out, rows.Err()
}

// RevokeKey revokes the organization's key named by its id or its prefix. It takes
// effect on the next request (on a request to another process on the same file, within
// foreignWritePoll).
func (db *DB) RevokeKey(ctx context.Context, orgName, idOrPrefix string) error {
	// Emptied again once the revoke is committed: a request that read the key in
	// between must not have put it back.
	db.keys.invalidate()
	defer db.keys.invalidate()
	return db.inTx(ctx, func(tx *Tx) error {
		org, err := findOrg(ctx, tx, orgName)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?)
			WHERE org_id = ? AND (id = ? OR prefix = ?)`, ms(db.now()), org.ID, idOrPrefix, idOrPrefix)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return store.KeyNotFound(orgName, idOrPrefix)
		}
		return nil
	})
}

// Authenticate returns the principal of a plaintext API key, or an unauthorized error
// for a missing, unknown or revoked key. It records the key's use when the last one
// recorded is a minute old or more (see touchKey).
func (db *DB) Authenticate(ctx context.Context, plain string) (*Principal, error) {
	unauthorized := store.Unauthorized()
	hash, ok := store.APIKeyHash(plain)
	if !ok {
		return nil, unauthorized
	}
	now := db.now()
	if p, touch, ok := db.keys.use(hash, now); ok {
		if touch {
			db.touchKey(p.KeyID, now)
		}
		return &p, nil
	}
	gen := db.keys.generation()
	db.keys.reads.Add(1)
	var p Principal
	var stored []byte
	var revoked, used sql.NullInt64
	err := db.read.QueryRowContext(ctx, `SELECT id, org_id, hash, revoked_at, last_used_at FROM api_keys WHERE hash = ?`, hash[:]).
		Scan(&p.KeyID, &p.OrgID, &stored, &revoked, &used)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, unauthorized
	}
	if err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare(stored, hash[:]) != 1 || revoked.Valid {
		return nil, unauthorized
	}
	lastUse := time.Time{}
	if used.Valid {
		lastUse = fromMS(used.Int64)
	}
	if now.Sub(lastUse) >= store.KeyUseResolution {
		db.touchKey(p.KeyID, now)
		lastUse = now
	}
	db.keys.put(gen, hash, p, lastUse)
	return &p, nil
}

// touchKey records that the key was used at now, unless a write of it is already under
// way or the storage is failing. The UPDATE checks the age again, so writes that race
// past the read in Authenticate still make one change a minute.
func (db *DB) touchKey(keyID string, now time.Time) {
	if db.StorageFailing() {
		return // the probes, not a key's last use, find out when writes work again
	}
	db.touches.Touch(keyID, now, func(ctx context.Context) error {
		return db.inTx(ctx, func(tx *Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE api_keys SET last_used_at = ?
				WHERE id = ? AND (last_used_at IS NULL OR last_used_at <= ?)`,
				ms(now), keyID, ms(now.Add(-store.KeyUseResolution)))
			return err
		})
	}, db.keys.invalidate) // the cache took the use as written: the next request reads the stale one and tries again
}
