package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"enrichd/enrich"
	"enrichd/store"
)

// Record origins.

// record is a stored company or person as found by one of its keys.
type record struct {
	id           int64
	objectType   string
	data         []byte
	lastEnriched time.Time
	redirect     sql.NullInt64 // set when the key is a domain alias
}

func findRecord(ctx context.Context, q querier, origin, key string) (*record, error) {
	var r record
	var last int64
	err := q.QueryRowContext(ctx, `SELECT r.id, r.object_type, r.data, r.last_enriched_at, k.redirect
		FROM record_keys k JOIN records r ON r.id = k.record_id
		WHERE k.origin = ? AND k.key = ?`, origin, key).Scan(&r.id, &r.objectType, &r.data, &last, &r.redirect)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r.lastEnriched = fromMS(last)
	return &r, nil
}

// result decodes a record as the result of looking up in (see store.RecordResult).
func (r *record) result(in enrich.Input) (enrich.Result, error) {
	return store.RecordResult(r.objectType, r.data, r.redirect.Valid && r.redirect.Int64 == 1, in)
}

type recordKeys = store.RecordKeys

// saveRecord inserts or replaces the record named by identity and points keys at it.
// A key that named another record moves to this one (a record left with no key is
// deleted), and a domain this company answered for that is no longer its canonical
// domain is kept as an alias, so looking it up answers with redirect.
func saveRecord(ctx context.Context, tx *Tx, origin string, res enrich.Result, keys recordKeys, identity string, lastEnriched, now time.Time) error {
	objectType := enrich.ObjectCompany
	var data any = res.Company
	if res.Person != nil {
		objectType, data = enrich.ObjectPerson, res.Person
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return err
	}
	if _, ok := keys[identity]; !ok {
		keys[identity] = sql.NullInt64{}
	}
	var id int64
	if rec, err := findRecord(ctx, tx, origin, identity); err != nil {
		return err
	} else if rec != nil && rec.objectType == objectType {
		id = rec.id
		_, err = tx.ExecContext(ctx, `UPDATE records SET data = ?, last_enriched_at = ?, updated_at = ? WHERE id = ?`,
			raw, ms(lastEnriched), ms(now), id)
		if err != nil {
			return err
		}
	} else if err := tx.QueryRowContext(ctx, `INSERT INTO records (origin, object_type, data, last_enriched_at, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?) RETURNING id`, origin, objectType, raw, ms(lastEnriched), ms(now), ms(now)).Scan(&id); err != nil {
		return err
	}
	for key, redirect := range keys {
		previous, err := txExec{tx}.PointRecordKey(ctx, origin, key, id, redirect)
		if err != nil {
			return err
		}
		if previous != 0 && previous != id {
			if _, err := tx.ExecContext(ctx, `DELETE FROM records WHERE id = ?
				AND NOT EXISTS (SELECT 1 FROM record_keys WHERE record_id = ?)`, previous, previous); err != nil {
				return err
			}
		}
	}
	if c := res.Company; c != nil {
		canonical := ""
		if c.Domain != nil {
			canonical = store.Key("domain", *c.Domain)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE record_keys SET redirect = 0
			WHERE record_id = ? AND key LIKE 'domain:%' AND key != ? AND redirect IS NULL`, id, canonical); err != nil {
			return err
		}
		return nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM positions WHERE record_id = ?`, id); err != nil {
		return err
	}
	for i, p := range res.Person.Positions {
		var domain *string
		if p.Company != nil {
			domain = p.Company.Domain
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO positions (record_id, ord, title, company_name, company_network_url, company_domain, is_current)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, id, i, store.IndexedText(p.Title), store.IndexedText(p.CompanyName), store.IndexedText(p.CompanyNetworkURL), store.IndexedText(domain), p.IsCurrent); err != nil {
			return err
		}
	}
	return nil
}

// storeFetched saves what an enrichment of in fetched at fetchedAt into the 30-day
// store and returns the result as the task shows it: stamped as enriched then, with
// the redirect of the domain that was looked up. The record is saved under the target
// looked up when byTarget is set: a person found by email then has the address on
// record, and the next lookup of it is exact.
func storeFetched(ctx context.Context, tx *Tx, in enrich.Input, res enrich.Result, byTarget bool, fetchedAt, now time.Time) (enrich.Result, error) {
	stored, shown, keys := store.FetchedRecord(in, res, byTarget, fetchedAt, now)
	lookedUp := store.RecordKey(in.Lookup, in.Target)
	identity := store.IdentityKey(stored, lookedUp)
	// A profile retrieved earlier (one gathered for an ambiguous address, settled
	// later by a hint) never replaces a newer record of the same subject.
	held, err := findRecord(ctx, tx, store.OriginStore, identity)
	if err != nil {
		return shown, err
	}
	if held != nil && held.lastEnriched.After(fetchedAt) {
		return shown, nil
	}
	return shown, saveRecord(ctx, tx, store.OriginStore, stored, keys, identity, fetchedAt, now)
}

// PointRecordKey points the key at the record and returns the record it named before
// (0: none): the single writer needs no lock to read it first.
func (e txExec) PointRecordKey(ctx context.Context, origin, key string, recordID int64, redirect sql.NullInt64) (int64, error) {
	var previous int64
	err := e.tx.QueryRowContext(ctx, `SELECT record_id FROM record_keys WHERE origin = ? AND key = ?`, origin, key).Scan(&previous)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, err
	}
	_, err = e.tx.ExecContext(ctx, `INSERT OR REPLACE INTO record_keys (origin, key, record_id, redirect) VALUES (?, ?, ?, ?)`,
		origin, key, recordID, redirect)
	return previous, err
}

// FoldedEquals compares column COLLATE NOCASE, as its index does (it folds ASCII only;
// the shortlist it serves is checked in Go).
func (db *DB) FoldedEquals(column string) string { return column + ` = ? COLLATE NOCASE` }
