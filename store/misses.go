package store

import (
	"context"
	"time"

	"enrichd/enrich"
)

// A priced source's miss of a subject is remembered (source_misses), so that it is not
// asked, nor paid, for that subject again within the freshness window: see
// enrich.Misses. The subject is the lookup's record key (RecordKey); the scope is ""
// for a miss found with the installation's keys, which counts for every organization,
// or the organization whose own vendor key found it.

// SourceMiss is one miss remembered.
type SourceMiss struct {
	Source   string
	OrgID    string // "" for the installation's keys
	MissedAt time.Time
}

// The statements of the misses, by name, for the drivers' tests of their plans.
var MissQueries = map[string]struct {
	Query string
	Args  []any
}{
	"SourceMisses": {sourceMissesQuery, []any{"domain:acme.com", int64(5)}},
	"ForgetMisses": {forgetMissesQuery, []any{"domain:acme.com", "pdl"}},
	"PurgeMisses":  {purgeMissesQuery, []any{int64(5), 500}},
}

const (
	// The subject's rows: a range of the primary key.
	sourceMissesQuery = `SELECT source, org_id, missed_at FROM source_misses WHERE subject = ? AND missed_at >= ?
		ORDER BY source, org_id`
	rememberMissQuery = `INSERT INTO source_misses (subject, source, org_id, missed_at, subject_hash) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (subject, source, org_id) DO UPDATE SET missed_at = excluded.missed_at, subject_hash = excluded.subject_hash`
	forgetMissesQuery = `DELETE FROM source_misses WHERE subject = ? AND source = ?`
	// The oldest first, through source_misses_missed.
	purgeMissesQuery = `DELETE FROM source_misses WHERE (subject, source, org_id) IN (
		SELECT subject, source, org_id FROM source_misses WHERE missed_at < ? ORDER BY missed_at LIMIT ? FOR UPDATE SKIP LOCKED)`
)

// SourceMisses returns the misses of in's subject remembered since since, in every
// scope, ordered by source and scope: one read of the primary key's range.
func (db *DB) SourceMisses(ctx context.Context, in enrich.Input, since time.Time) ([]SourceMiss, error) {
	r, err := db.Reader().Query(ctx, sourceMissesQuery, RecordKey(in.Lookup, in.Target), ms(since))
	return collect(r, err, func(r Row) (SourceMiss, error) {
		var m SourceMiss
		var at int64
		err := r.Scan(&m.Source, &m.OrgID, &at)
		m.MissedAt = fromMS(at)
		return m, err
	})
}

// RememberMiss records that source did not know in's subject, now, for orgID ("": with
// the installation's keys, for everyone). A miss remembered again starts its window
// again.
func (db *DB) RememberMiss(ctx context.Context, in enrich.Input, source, orgID string) error {
	h, err := db.hasher()
	if err != nil {
		return err
	}
	subject := RecordKey(in.Lookup, in.Target)
	hash := keyHash(h, subject, noSubject)
	return db.Write(ctx, func(tx Tx) error {
		_, err := tx.Exec(ctx, rememberMissQuery, subject, source, orgID, ms(db.now()), hash)
		return err
	})
}

// ForgetMisses deletes every miss of in's subject remembered of source, in every
// scope, and returns how many it deleted: the source has answered for the subject.
func (db *DB) ForgetMisses(ctx context.Context, in enrich.Input, source string) (int, error) {
	var n int64
	err := db.Write(ctx, func(tx Tx) error {
		var err error
		n, err = tx.Exec(ctx, forgetMissesQuery, RecordKey(in.Lookup, in.Target), source)
		return err
	})
	return int(n), err
}

// PurgeMisses deletes up to limit of the misses remembered before cutoff, oldest first,
// in one short transaction, and returns how many it deleted: past the freshness window
// they are no longer read. Call it again until it deletes fewer than limit.
func (db *DB) PurgeMisses(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	var n int64
	err := db.Write(ctx, func(tx Tx) error {
		var err error
		n, err = tx.Exec(ctx, purgeMissesQuery, ms(cutoff), limit)
		return err
	})
	return int(n), err
}
