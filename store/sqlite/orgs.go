package sqlite

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
		return nil, enrich.Errorf(enrich.KindNotFound, "no organization named %q (create it with: enrichd orgs create %s)", name, name)
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
		return nil, &enrich.Error{Kind: enrich.KindNotFound, Code: "not_found", Message: "organization not found"}
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
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return "", nil, err
	}
	plain := "enr_" + base64.RawURLEncoding.EncodeToString(secret[:])
	hash := sha256.Sum256([]byte(plain))
	key := &APIKey{ID: uuid.NewString(), Name: keyName, Prefix: plain[:store.KeyPrefixLen], CreatedAt: db.now()}
	err := db.inTx(ctx, func(tx *Tx) error {
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
			return enrich.Errorf(enrich.KindNotFound, "organization %s has no key %q (see: enrichd keys list --org %s)", orgName, idOrPrefix, orgName)
		}
		return nil
	})
}

// Authenticate returns the principal of a plaintext API key, or an unauthorized error
// for a missing, unknown or revoked key. It records the key's use when the last one
// recorded is a minute old or more (see touchKey).
func (db *DB) Authenticate(ctx context.Context, plain string) (*Principal, error) {
	unauthorized := enrich.Errorf(enrich.KindUnauthorized, "Unauthorized")
	if !strings.HasPrefix(plain, "enr_") {
		return nil, unauthorized
	}
	hash := sha256.Sum256([]byte(plain))
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
	if now.Sub(lastUse) >= keyUseResolution {
		db.touchKey(p.KeyID, now)
		lastUse = now
	}
	db.keys.put(gen, hash, p, lastUse)
	return &p, nil
}

// keyUseResolution is how stale a key's last use may get before a request writes it
// again: the one write a minute a busy key costs.
const keyUseResolution = time.Minute

// keyTouches are the writes of keys' last use under way. They run beside the request
// that authenticated: a read-only request must not wait for the writer, which may be
// busy, and a failed write costs nothing but a stale "last used".
type keyTouches struct {
	mu       sync.Mutex
	inFlight map[string]bool // by key id: many requests at the minute's turn make one write
	// written is the last use written, by key id: a request that read the key just
	// before that write committed, and asks once it is done, has nothing to write.
	written map[string]time.Time
	closed  bool // Close has begun: no new write may start
	wg      sync.WaitGroup
	started atomic.Int64 // writes started since Open, for tests
}

// touchKey records that the key was used at now, unless a write of it is already under
// way or the storage is failing. The UPDATE checks the age again, so writes that race
// past the read in Authenticate still make one change a minute.
func (db *DB) touchKey(keyID string, now time.Time) {
	t := &db.touches
	if db.StorageFailing() {
		return // the probes, not a key's last use, find out when writes work again
	}
	t.mu.Lock()
	if t.closed || t.inFlight[keyID] || now.Sub(t.written[keyID]) < keyUseResolution {
		t.mu.Unlock()
		return
	}
	if t.inFlight == nil {
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
		err := db.inTx(context.Background(), func(tx *Tx) error {
			_, err := tx.ExecContext(context.Background(), `UPDATE api_keys SET last_used_at = ?
				WHERE id = ? AND (last_used_at IS NULL OR last_used_at <= ?)`,
				ms(now), keyID, ms(now.Add(-keyUseResolution)))
			return err
		})
		t.mu.Lock()
		delete(t.inFlight, keyID)
		if err == nil {
			t.written[keyID] = now
		} else {
			// The cache took the use as written; forgetting the keys makes the next
			// request read the stale use and try again.
			db.keys.invalidate()
		}
		t.mu.Unlock()
	}()
}

// waitTouches stops new writes of keys' last use and waits for those under way.
func (db *DB) waitTouches() {
	db.touches.mu.Lock()
	db.touches.closed = true
	db.touches.mu.Unlock()
	db.touches.wg.Wait()
}
