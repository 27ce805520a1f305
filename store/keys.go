package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
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

// KeyUseDue reports whether a request authenticated at now by a key last used at used
// (nil: never) writes the use.
func KeyUseDue(used *time.Time, now time.Time) bool {
	return used == nil || now.Sub(*used) >= KeyUseResolution
}

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

// Touch runs write, the driver's UPDATE of keyID's last use to now (which checks the
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

// CreateKey makes a key for the organization, refusing a name that is not one line of
// valid text (enrich.CheckText), whoever asks: the dashboard, the CLI or a test.
func (db *DB) CreateKey(ctx context.Context, orgName, keyName string, createOrg bool) (string, *APIKey, error) {
	if err := enrich.CheckText("the key's name", keyName); err != nil {
		return "", nil, err
	}
	return db.Driver.CreateKey(ctx, orgName, keyName, createOrg)
}
