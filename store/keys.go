package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"enrichd/enrich"

	"github.com/google/uuid"
)

// apiKeyPrefix starts every API key, so a key pasted where it should not be is
// recognized, and a string without it is refused without a read.
const apiKeyPrefix = "enr_"

// NewAPIKey makes a key named name, created at now: the plaintext, shown once, the
// hash stored in its place, and the key as listed. The caller sets its OrgID.
func NewAPIKey(name string, now time.Time) (plain string, hash [sha256.Size]byte, key *APIKey, err error) {
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return "", hash, nil, err
	}
	plain = apiKeyPrefix + base64.RawURLEncoding.EncodeToString(secret[:])
	key = &APIKey{ID: uuid.NewString(), Name: name, Prefix: plain[:KeyPrefixLen], CreatedAt: now}
	return plain, sha256.Sum256([]byte(plain)), key, nil
}

// APIKeyHash is the hash a plaintext key is looked up by; ok is false for a string
// that cannot be one of ours.
func APIKeyHash(plain string) (hash [sha256.Size]byte, ok bool) {
	if !strings.HasPrefix(plain, apiKeyPrefix) {
		return hash, false
	}
	return sha256.Sum256([]byte(plain)), true
}

// Unauthorized is the one answer to a missing, unknown or revoked API key.
func Unauthorized() error { return enrich.Errorf(enrich.KindUnauthorized, "Unauthorized") }

// OrgNotFound is the answer to an organization named that does not exist.
func OrgNotFound(name string) error {
	return enrich.Errorf(enrich.KindNotFound, "no organization named %q (create it with: enrichd orgs create %s)", name, name)
}

// OrgIDNotFound is the answer to an organization id that does not exist.
func OrgIDNotFound() error {
	return &enrich.Error{Kind: enrich.KindNotFound, Code: "not_found", Message: "organization not found"}
}

// KeyNotFound is the answer to revoking a key the organization does not have.
func KeyNotFound(orgName, idOrPrefix string) error {
	return enrich.Errorf(enrich.KindNotFound, "organization %s has no key %q (see: enrichd keys list --org %s)", orgName, idOrPrefix, orgName)
}

// KeyUseResolution is how stale a key's last use may get before a request writes it
// again: the one write a minute a busy key costs.
const KeyUseResolution = time.Minute

// KeyTouches are the writes of keys' last use under way. They run beside the request
// that authenticated: a read-only request must not wait for a write, and a failed write
// costs nothing but a stale "last used".
type KeyTouches struct {
	mu       sync.Mutex
	inFlight map[string]bool // by key id: many requests at the minute's turn make one write
	// written is the last use written, by key id: a request that read the key just
	// before that write committed, and asks once it is done, has nothing to write.
	written map[string]time.Time
	closed  bool // Close has begun: no new write may start
	wg      sync.WaitGroup
	started atomic.Int64 // writes started since Open, for tests
}

// touchKeysMax bounds the last uses remembered; past it the maps start again empty,
// which costs a key at most one redundant UPDATE, which its age check makes a no-op.
const touchKeysMax = 10_000

// Touch runs write, the UPDATE of keyID's last use to now (which checks the
// age again, so writes that race still make one change a minute), on a goroutine of
// its own, unless a write of the key is under way or one wrote a use within
// KeyUseResolution. failed, when not nil, runs if the write fails.
func (t *KeyTouches) Touch(keyID string, now time.Time, write func(context.Context) error, failed func()) {
	t.mu.Lock()
	if t.closed || t.inFlight[keyID] || now.Sub(t.written[keyID]) < KeyUseResolution {
		t.mu.Unlock()
		return
	}
	if t.inFlight == nil || len(t.written) >= touchKeysMax {
		t.inFlight, t.written = map[string]bool{}, map[string]time.Time{}
	}
	t.inFlight[keyID] = true
	t.wg.Add(1)
	t.started.Add(1)
	t.mu.Unlock()
	go func() {
		defer t.wg.Done()
		// Best effort: the request is already authenticated; a failure is retried by the
		// next request, and a storage failure is logged by the store once a minute.
		err := write(context.Background())
		t.mu.Lock()
		delete(t.inFlight, keyID)
		if err == nil {
			t.written[keyID] = now
		} else if failed != nil {
			failed()
		}
		t.mu.Unlock()
	}()
}

// Close stops new writes of keys' last use and waits for those under way.
func (t *KeyTouches) Close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.wg.Wait()
}

// Wait waits for the writes under way, for tests.
func (t *KeyTouches) Wait() { t.wg.Wait() }

// Started counts the writes started since Open, for tests.
func (t *KeyTouches) Started() int64 { return t.started.Load() }

// CreateKey makes a new API key for the organization and returns it: the only time
// the key is ever seen. With createOrg, a missing organization is created first. A
// name that is not one line of valid text (enrich.CheckText) is refused, whoever asks:
// the dashboard, the CLI or a test.
func (db *DB) CreateKey(ctx context.Context, by By, orgName, keyName string, createOrg bool) (string, *APIKey, error) {
	if err := enrich.CheckText("the key's name", keyName); err != nil {
		return "", nil, err
	}
	plain, hash, key, err := NewAPIKey(keyName, db.now())
	if err != nil {
		return "", nil, err
	}
	err = db.Write(ctx, func(tx Tx) error {
		org, err := findOrg(ctx, tx, orgName)
		if enrich.KindOf(err) == enrich.KindNotFound && createOrg {
			org, err = db.createOrg(ctx, tx, orgName)
			if enrich.KindOf(err) == enrich.KindConflict {
				// Created by another transaction since findOrg (PostgreSQL): committed,
				// as the unique index waited for it, so a fresh statement sees it.
				org, err = findOrg(ctx, tx, orgName)
			}
		}
		if err != nil {
			return err
		}
		key.OrgID = org.ID
		if _, err = tx.Exec(ctx, `INSERT INTO api_keys (id, org_id, name, prefix, hash, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			key.ID, key.OrgID, key.Name, key.Prefix, hash[:], ms(key.CreatedAt)); err != nil {
			return err
		}
		return db.appendAudit(ctx, tx, by, keyEntry(AuditKeyCreated, key.OrgID, key.ID, key.Name, key.Prefix))
	})
	if err != nil {
		return "", nil, err
	}
	return plain, key, nil
}

// listKeysQuery lists keys in the order of the api_keys_org index; keys created in
// the same millisecond come in the index's order.
const listKeysQuery = `SELECT id, org_id, name, prefix, created_at, revoked_at, last_used_at
	FROM api_keys WHERE org_id = ? ORDER BY created_at`

// ListKeys lists an organization's keys, revoked ones included.
func (db *DB) ListKeys(ctx context.Context, orgName string) ([]APIKey, error) {
	org, err := db.FindOrg(ctx, orgName)
	if err != nil {
		return nil, err
	}
	rows, err := db.Reader().Query(ctx, listKeysQuery, org.ID)
	return collect(rows, err, func(r Row) (APIKey, error) {
		var k APIKey
		var created int64
		var revoked, used sql.NullInt64
		err := r.Scan(&k.ID, &k.OrgID, &k.Name, &k.Prefix, &created, &revoked, &used)
		k.CreatedAt, k.RevokedAt, k.LastUsedAt = fromMS(created), fromNullMS(revoked), fromNullMS(used)
		return k, err
	})
}

// RevokeKey revokes the organization's key named by its id or its prefix. It takes
// effect on the next request through this process, whose cache is emptied; another
// process's cache is emptied within its driver's poll for foreign writes (SQLite), or
// when its LISTEN connection hears the commit (PostgreSQL, every replica).
func (db *DB) RevokeKey(ctx context.Context, by By, orgName, idOrPrefix string) error {
	if c := db.KeyCache(); c != nil {
		// Emptied again once the revoke is committed: a request that read the key in
		// between must not have put it back.
		c.Invalidate()
		defer c.Invalidate()
	}
	return db.Write(ctx, func(tx Tx) error {
		org, err := findOrg(ctx, tx, orgName)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `UPDATE api_keys SET revoked_at = ?
			WHERE org_id = ? AND (id = ? OR prefix = ?) AND revoked_at IS NULL RETURNING id, name, prefix`,
			ms(db.now()), org.ID, idOrPrefix, idOrPrefix)
		revoked, err := collect(rows, err, func(r Row) (k APIKey, err error) { return k, r.Scan(&k.ID, &k.Name, &k.Prefix) })
		if err != nil {
			return err
		}
		if len(revoked) == 0 {
			// Revoked already is revoked: only a key the organization lacks is refused.
			var one int
			err := tx.QueryRow(ctx, `SELECT 1 FROM api_keys WHERE org_id = ? AND (id = ? OR prefix = ?)`, org.ID, idOrPrefix, idOrPrefix).Scan(&one)
			if errors.Is(err, ErrNoRows) {
				return KeyNotFound(orgName, idOrPrefix)
			}
			return err
		}
		for _, k := range revoked {
			if err := db.appendAudit(ctx, tx, by, keyEntry(AuditKeyRevoked, org.ID, k.ID, k.Name, k.Prefix)); err != nil {
				return err
			}
		}
		return nil
	})
}

// keyEntry is the audit entry of a key made or revoked, named by its id, name and
// prefix (never the key).
func keyEntry(action, orgID, id, name, prefix string) NewAuditEntry {
	return NewAuditEntry{OrgID: orgID, Action: action, ObjectID: &id, Detail: map[string]string{"name": name, "prefix": prefix}}
}

// Authenticate returns the principal of a plaintext API key, or an unauthorized error
// for a missing, unknown or revoked key. It records the key's use when the last one
// recorded is a minute old or more (see touchKey).
//
// On the hot path of every request: a key in the driver's KeyCache is answered from
// memory; without one (PostgreSQL while its LISTEN connection is not known to work)
// the key is read, one lookup on the unique hash index.
func (db *DB) Authenticate(ctx context.Context, plain string) (*Principal, error) {
	unauthorized := Unauthorized()
	hash, ok := APIKeyHash(plain)
	if !ok {
		return nil, unauthorized
	}
	now := db.now()
	cache := db.KeyCache()
	var gen uint64
	if cache != nil {
		if p, touch, ok := cache.use(hash, now); ok {
			if touch {
				db.touchKey(p.KeyID, now, cache)
			}
			return &p, nil
		}
		gen = cache.generation()
	}
	var p Principal
	var stored []byte
	var revoked, used sql.NullInt64
	var prefix string
	err := db.Reader().QueryRow(ctx, `SELECT id, org_id, name, prefix, hash, revoked_at, last_used_at FROM api_keys WHERE hash = ?`, hash[:]).
		Scan(&p.KeyID, &p.OrgID, &p.KeyName, &prefix, &stored, &revoked, &used)
	if errors.Is(err, ErrNoRows) {
		return nil, unauthorized
	}
	if err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare(stored, hash[:]) != 1 || revoked.Valid {
		return nil, unauthorized
	}
	if p.KeyName == "" {
		p.KeyName = prefix
	}
	lastUse := time.Time{}
	if used.Valid {
		lastUse = fromMS(used.Int64)
	}
	if now.Sub(lastUse) >= KeyUseResolution {
		db.touchKey(p.KeyID, now, cache)
		lastUse = now
	}
	if cache != nil {
		cache.put(gen, hash, p, lastUse)
	}
	return &p, nil
}

// touchKey records that the key was used at now, unless a write of it is already under
// way in this process or the storage is failing. The UPDATE checks the age again, so
// writes that race past the read in Authenticate, or replicas that touch the same key
// at the same minute, still make one change a minute. A failed write empties cache,
// which took the use as written: the next request reads the stale one and tries again.
func (db *DB) touchKey(keyID string, now time.Time, cache *KeyCache) {
	if db.StorageFailing() {
		return // the probes, not a key's last use, find out when writes work again
	}
	var failed func()
	if cache != nil {
		failed = cache.Invalidate
	}
	db.KeyTouches().Touch(keyID, now, func(ctx context.Context) error {
		return db.Write(ctx, func(tx Tx) error {
			_, err := tx.Exec(ctx, `UPDATE api_keys SET last_used_at = ?
				WHERE id = ? AND (last_used_at IS NULL OR last_used_at <= ?)`,
				ms(now), keyID, ms(now.Add(-KeyUseResolution)))
			return err
		})
	}, failed)
}
