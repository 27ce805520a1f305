package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/jackc/pgx/v5"
)

// record is a stored company or person as found by one of its keys.
type record struct {
	id           int64
	objectType   string
	data         []byte
	lastEnriched time.Time
	redirect     sql.NullInt64 // set when the key is a domain alias
}

func (r *record) result(in enrich.Input) (enrich.Result, error) {
	return store.RecordResult(r.objectType, r.data, r.redirect.Valid && r.redirect.Int64 == 1, in)
}

func findRecord(ctx context.Context, q querier, origin, key string) (*record, error) {
	var r record
	var last int64
	var data string
	err := q.QueryRow(ctx, `SELECT r.id, r.object_type, r.data, r.last_enriched_at, k.redirect
		FROM record_keys k JOIN records r ON r.id = k.record_id
		WHERE k.origin = $1 AND k.key = $2`, origin, key).Scan(&r.id, &r.objectType, &data, &last, &r.redirect)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r.data, r.lastEnriched = []byte(data), fromMS(last)
	return &r, nil
}

// saveRecord inserts or replaces the record named by identity and points keys at it,
// as store.saveRecord does. The keys are written in their sorted order: two
// transactions saving records that share keys then lock them in the same order, and
// the second waits for the first instead of deadlocking with it.
func saveRecord(ctx context.Context, tx pgx.Tx, origin string, res enrich.Result, keys store.RecordKeys, identity string, lastEnriched, now time.Time) error {
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
		if _, err := tx.Exec(ctx, `UPDATE records SET data = $1, last_enriched_at = $2, updated_at = $3 WHERE id = $4`,
			string(raw), ms(lastEnriched), ms(now), id); err != nil {
			return err
		}
	} else if err := tx.QueryRow(ctx, `INSERT INTO records (origin, object_type, data, last_enriched_at, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`, origin, objectType, string(raw), ms(lastEnriched), ms(now), ms(now)).Scan(&id); err != nil {
		return err
	}
	names := make([]string, 0, len(keys))
	for key := range keys {
		names = append(names, key)
	}
	slices.Sort(names)
	for _, key := range names {
		previous, err := exec{q: tx}.PointRecordKey(ctx, origin, key, id, keys[key])
		if err != nil {
			return err
		}
		if previous != 0 && previous != id {
			if _, err := tx.Exec(ctx, `DELETE FROM records WHERE id = $1
				AND NOT EXISTS (SELECT 1 FROM record_keys WHERE record_id = $1)`, previous); err != nil {
				return err
			}
		}
	}
	if c := res.Company; c != nil {
		canonical := ""
		if c.Domain != nil {
			canonical = store.Key("domain", *c.Domain)
		}
		_, err := tx.Exec(ctx, `UPDATE record_keys SET redirect = 0
			WHERE record_id = $1 AND key LIKE 'domain:%' AND key <> $2 AND redirect IS NULL`, id, canonical)
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM positions WHERE record_id = $1`, id); err != nil {
		return err
	}
	for i, p := range res.Person.Positions {
		var domain *string
		if p.Company != nil {
			domain = p.Company.Domain
		}
		isCurrent := 0 // kept as SQLite keeps it, so rows copy between the engines as they are
		if p.IsCurrent {
			isCurrent = 1
		}
		if _, err := tx.Exec(ctx, `INSERT INTO positions (record_id, ord, title, company_name, company_network_url, company_domain, is_current)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, id, i, store.IndexedText(p.Title), store.IndexedText(p.CompanyName), store.IndexedText(p.CompanyNetworkURL), store.IndexedText(domain), isCurrent); err != nil {
			return err
		}
	}
	return nil
}

// PointRecordKey points the key at the record id and returns the record it named
// before (0: none). A key another transaction is adding is waited for (the insert's
// conflict check) and then read, locked, and moved: what it named is not lost, so a
// record left without keys is deleted whichever of the two commits last.
func (e exec) PointRecordKey(ctx context.Context, origin, key string, id int64, redirect sql.NullInt64) (int64, error) {
	for {
		n, err := e.Exec(ctx, `INSERT INTO record_keys (origin, key, record_id, redirect) VALUES (?, ?, ?, ?)
			ON CONFLICT (origin, key) DO NOTHING`, origin, key, id, redirect)
		if err != nil || n == 1 {
			return 0, err
		}
		var previous int64
		err = e.QueryRow(ctx, `SELECT record_id FROM record_keys WHERE origin = ? AND key = ? FOR UPDATE`, origin, key).Scan(&previous)
		if errors.Is(err, store.ErrNoRows) {
			continue // deleted with its record since the insert saw it
		}
		if err != nil {
			return 0, err
		}
		_, err = e.Exec(ctx, `UPDATE record_keys SET record_id = ?, redirect = ? WHERE origin = ? AND key = ?`,
			id, redirect, origin, key)
		return previous, err
	}
}

// FoldedEquals compares lower(column), which an index of positions serves (SQLite's
// COLLATE NOCASE folds ASCII only; the shortlist it serves is checked in Go either way).
func (db *DB) FoldedEquals(column string) string { return `lower(` + column + `) = lower(?)` }

// storeFetched saves what an enrichment of in fetched at fetchedAt into the 30-day
// store and returns the result as the task shows it (store.storeFetched).
func storeFetched(ctx context.Context, tx pgx.Tx, in enrich.Input, res enrich.Result, byTarget bool, fetchedAt, now time.Time) (enrich.Result, error) {
	stored, shown, keys := store.FetchedRecord(in, res, byTarget, fetchedAt, now)
	identity := store.IdentityKey(stored, store.RecordKey(in.Lookup, in.Target))
	// A profile retrieved earlier never replaces a newer record of the same subject.
	held, err := findRecord(ctx, tx, store.OriginStore, identity)
	if err != nil {
		return shown, err
	}
	if held != nil && held.lastEnriched.After(fetchedAt) {
		return shown, nil
	}
	return shown, saveRecord(ctx, tx, store.OriginStore, stored, keys, identity, fetchedAt, now)
}
