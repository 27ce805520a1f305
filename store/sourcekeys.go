package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// SourceKey is an organization's own API key for a vendor source as stored: sealed
// (package secret), never in clear. Sealed and KeyID are for the process that opens
// it; everything else may be shown.
type SourceKey struct {
	OrgID  string
	Source string
	// Sealed is the key sealed under the secret key file KeyID names.
	Sealed string
	KeyID  string
	// Last4 is how the key is shown: its last 4 characters.
	Last4 string
	// AllowFallback lets the organization's tasks use the installation's key for this
	// source while its own is failing.
	AllowFallback bool
	// Generation grows with each set of the key: a refusal is recorded against the
	// generation that was refused, never a newer one.
	Generation int64
	// FailingAt is when the vendor refused the key, nil while it is not failing;
	// FailingReason is what was said.
	FailingAt     *time.Time
	FailingReason string
	UpdatedAt     time.Time
}

// Failing says whether the vendor refused the key since it was set.
func (k *SourceKey) Failing() bool { return k != nil && k.FailingAt != nil }

// SetSourceKey stores the organization's own key for source, sealed, replacing any it
// had and clearing a failing mark: a new key is a new start.
func (db *DB) SetSourceKey(ctx context.Context, orgID, source, sealed, keyID, last4 string, allowFallback bool) error {
	return db.Write(ctx, func(tx Tx) error {
		var id string
		if err := tx.QueryRow(ctx, `SELECT id FROM orgs WHERE id = ?`, orgID).Scan(&id); errors.Is(err, ErrNoRows) {
			return OrgIDNotFound()
		} else if err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO org_source_keys
			(org_id, source, sealed, key_id, last4, allow_fallback, generation, failing_at, failing_reason, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, 1, NULL, NULL, ?)
			ON CONFLICT (org_id, source) DO UPDATE SET sealed = excluded.sealed, key_id = excluded.key_id,
				last4 = excluded.last4, allow_fallback = excluded.allow_fallback,
				generation = org_source_keys.generation + 1, failing_at = NULL, failing_reason = NULL,
				updated_at = excluded.updated_at`,
			orgID, source, sealed, keyID, last4, boolInt(allowFallback), ms(db.now()))
		return err
	})
}

// SetSourceKeyFallback changes whether the organization's tasks may fall back to the
// installation's key for source while its own is failing. It reports false when the
// organization has no key of its own for source.
func (db *DB) SetSourceKeyFallback(ctx context.Context, orgID, source string, allow bool) (bool, error) {
	var changed bool
	err := db.Write(ctx, func(tx Tx) error {
		n, err := tx.Exec(ctx, `UPDATE org_source_keys SET allow_fallback = ?, updated_at = ? WHERE org_id = ? AND source = ?`,
			boolInt(allow), ms(db.now()), orgID, source)
		changed = n == 1
		return err
	})
	return changed, err
}

// ClearSourceKey forgets the organization's own key for source: its tasks use the
// installation's key again. It reports false when there was none.
func (db *DB) ClearSourceKey(ctx context.Context, orgID, source string) (bool, error) {
	var cleared bool
	err := db.Write(ctx, func(tx Tx) error {
		n, err := tx.Exec(ctx, `DELETE FROM org_source_keys WHERE org_id = ? AND source = ?`, orgID, source)
		cleared = n == 1
		return err
	})
	return cleared, err
}

// MarkSourceKeyFailing records that the vendor refused the organization's key of the
// given generation, with its words. A key set again since is left alone, and a key
// already failing keeps the first refusal's time.
func (db *DB) MarkSourceKeyFailing(ctx context.Context, orgID, source string, generation int64, reason string) error {
	if len(reason) > 300 {
		reason = reason[:300]
	}
	return db.Write(ctx, func(tx Tx) error {
		_, err := tx.Exec(ctx, `UPDATE org_source_keys SET failing_at = ?, failing_reason = ?
			WHERE org_id = ? AND source = ? AND generation = ? AND failing_at IS NULL`,
			ms(db.now()), reason, orgID, source, generation)
		return err
	})
}

const sourceKeyColumns = `org_id, source, sealed, key_id, last4, allow_fallback, generation, failing_at, failing_reason, updated_at`

func scanSourceKey(row Row) (SourceKey, error) {
	var k SourceKey
	var allow int
	var failingAt sql.NullInt64
	var reason sql.NullString
	var updated int64
	err := row.Scan(&k.OrgID, &k.Source, &k.Sealed, &k.KeyID, &k.Last4, &allow, &k.Generation, &failingAt, &reason, &updated)
	k.AllowFallback, k.FailingReason, k.UpdatedAt = allow == 1, reason.String, fromMS(updated)
	if failingAt.Valid {
		t := fromMS(failingAt.Int64)
		k.FailingAt = &t
	}
	return k, err
}

// OrgSourceKey returns the organization's own key for source, or nil: one read by
// primary key.
func (db *DB) OrgSourceKey(ctx context.Context, orgID, source string) (*SourceKey, error) {
	k, err := scanSourceKey(db.Reader().QueryRow(ctx, `SELECT `+sourceKeyColumns+` FROM org_source_keys WHERE org_id = ? AND source = ?`, orgID, source))
	if errors.Is(err, ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &k, nil
}

// OrgSourceKeys lists the organization's own keys, by source name.
func (db *DB) OrgSourceKeys(ctx context.Context, orgID string) ([]SourceKey, error) {
	rows, err := db.Reader().Query(ctx, `SELECT `+sourceKeyColumns+` FROM org_source_keys WHERE org_id = ? ORDER BY source`, orgID)
	return collect(rows, err, scanSourceKey)
}

// SourceKeysSealedElsewhere counts the organizations' keys not sealed under the key
// file keyID names ("" counts them all): serve says so when it starts. The table
// holds a row per organization and source with a key, so it is read whole.
func (db *DB) SourceKeysSealedElsewhere(ctx context.Context, keyID string) (int, error) {
	var n int
	err := db.Reader().QueryRow(ctx, `SELECT count(*) FROM org_source_keys WHERE key_id <> ?`, keyID).Scan(&n)
	return n, err
}

// SourceKeyLabel is what an organization's key for a source is sealed for (secret's
// label): a sealed key copied onto another organization's or source's row does not
// open.
func SourceKeyLabel(orgID, source string) string { return orgID + "/" + source }
