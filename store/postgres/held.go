package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/jackc/pgx/v5"
)

// staffQueries find people by a current position's company page, domain or name, by
// store.StaffBy; each is served by one index of positions. The name is compared by lower(), served by an
// index on lower(company_name) (SQLite's is COLLATE NOCASE, which folds ASCII only;
// the shortlist is checked in Go either way).
var staffQueries = []string{
	`SELECT r.id, r.data, r.last_enriched_at FROM positions p JOIN records r ON r.id = p.record_id
		WHERE p.company_network_url = $1 AND p.is_current = 1 AND r.origin = $2 LIMIT $3`,
	`SELECT r.id, r.data, r.last_enriched_at FROM positions p JOIN records r ON r.id = p.record_id
		WHERE p.company_domain = $1 AND p.is_current = 1 AND r.origin = $2 LIMIT $3`,
	`SELECT r.id, r.data, r.last_enriched_at FROM positions p JOIN records r ON r.id = p.record_id
		WHERE lower(p.company_name) = lower($1) AND p.is_current = 1 AND r.origin = $2 LIMIT $3`,
}

// FindStaff returns up to limit people of origin with a current position at the
// company whose page, domain or name (by) is value.
func (db *DB) FindStaff(ctx context.Context, origin string, by store.StaffBy, value string, limit int) ([]store.StoredRecord, error) {
	rows, err := db.pool.Query(ctx, staffQueries[by], value, origin, limit)
	if err != nil {
		return nil, db.readChecked(err)
	}
	defer rows.Close()
	var out []store.StoredRecord
	for rows.Next() {
		r := store.StoredRecord{ObjectType: enrich.ObjectPerson}
		var last int64
		var data string
		if err := rows.Scan(&r.ID, &data, &last); err != nil {
			return nil, db.readChecked(err)
		}
		r.Data, r.LastEnriched = []byte(data), fromMS(last)
		out = append(out, r)
	}
	return out, db.readChecked(rows.Err())
}

// Gathering returns what a lookup of the address gathered at or after since; nil when
// nothing was.
func (db *DB) Gathering(ctx context.Context, address string, since time.Time) (*enrich.Gathering, error) {
	var g enrich.Gathering
	err := db.readTx(ctx, func(tx pgx.Tx) error {
		g = enrich.Gathering{}
		var company string
		var at int64
		err := tx.QueryRow(ctx, `SELECT company, gathered_at FROM email_gatherings WHERE address = $1 AND gathered_at >= $2`,
			address, ms(since)).Scan(&company, &at)
		if err != nil {
			return err
		}
		g.Address, g.GatheredAt = address, fromMS(at)
		if err := json.Unmarshal([]byte(company), &g.Company); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT method, pattern, person, retrieved_at FROM email_candidates
			WHERE address = $1 ORDER BY ord`, address)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c enrich.Candidate
			var person string
			var retrieved int64
			if err := rows.Scan(&c.Method, &c.Pattern, &person, &retrieved); err != nil {
				return err
			}
			if err := json.Unmarshal([]byte(person), &c.Person); err != nil {
				return err
			}
			c.RetrievedAt = fromMS(retrieved)
			g.Candidates = append(g.Candidates, c)
		}
		return rows.Err()
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &g, nil
}

// keepGathering replaces what was gathered for the address, and deletes what was
// gathered for any address before keepSince. The gathering's row is upserted first:
// two settles gathering the same address at once then take turns on it, where a
// delete-then-insert would have both insert and one fail on the key.
func keepGathering(ctx context.Context, tx pgx.Tx, g *enrich.Gathering, keepSince time.Time) error {
	if _, err := tx.Exec(ctx, `DELETE FROM email_gatherings WHERE gathered_at < $1 AND address <> $2`, ms(keepSince), g.Address); err != nil {
		return err
	}
	company, err := json.Marshal(g.Company)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO email_gatherings (address, company, gathered_at) VALUES ($1, $2, $3)
		ON CONFLICT (address) DO UPDATE SET company = excluded.company, gathered_at = excluded.gathered_at`,
		g.Address, string(company), ms(g.GatheredAt)); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM email_candidates WHERE address = $1`, g.Address); err != nil {
		return err
	}
	for i, c := range g.Candidates {
		person, err := json.Marshal(c.Person)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO email_candidates (address, ord, method, pattern, person, retrieved_at)
			VALUES ($1, $2, $3, $4, $5, $6)`, g.Address, i, c.Method, c.Pattern, string(person), ms(c.RetrievedAt)); err != nil {
			return err
		}
	}
	return nil
}

func forgetGathering(ctx context.Context, tx pgx.Tx, address string) error {
	_, err := tx.Exec(ctx, `DELETE FROM email_gatherings WHERE address = $1`, address)
	return err
}
