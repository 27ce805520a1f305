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

// staffQueries find people by a current position's company page, domain or name,
// by store.StaffBy; each is served by one index of positions (see TestListQueriesUseIndexes).
var staffQueries = []string{
	`SELECT r.id, r.data, r.last_enriched_at FROM positions p JOIN records r ON r.id = p.record_id
		WHERE p.company_network_url = ? AND p.is_current = 1 AND r.origin = ? LIMIT ?`,
	`SELECT r.id, r.data, r.last_enriched_at FROM positions p JOIN records r ON r.id = p.record_id
		WHERE p.company_domain = ? AND p.is_current = 1 AND r.origin = ? LIMIT ?`,
	`SELECT r.id, r.data, r.last_enriched_at FROM positions p JOIN records r ON r.id = p.record_id
		WHERE p.company_name = ? COLLATE NOCASE AND p.is_current = 1 AND r.origin = ? LIMIT ?`,
}

// FindStaff returns up to limit people of origin with a current position at the
// company whose page, domain or name (by) is value.
func (db *DB) FindStaff(ctx context.Context, origin string, by store.StaffBy, value string, limit int) ([]store.StoredRecord, error) {
	rows, err := db.read.QueryContext(ctx, staffQueries[by], value, origin, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.StoredRecord
	for rows.Next() {
		r := store.StoredRecord{ObjectType: enrich.ObjectPerson}
		var last int64
		if err := rows.Scan(&r.ID, &r.Data, &last); err != nil {
			return nil, err
		}
		r.LastEnriched = fromMS(last)
		out = append(out, r)
	}
	return out, rows.Err()
}

// Gathering returns what a lookup of the address gathered at or after since; nil when
// nothing was.
func (db *DB) Gathering(ctx context.Context, address string, since time.Time) (*enrich.Gathering, error) {
	var g enrich.Gathering
	err := db.inReadTx(ctx, func(tx *Tx) error {
		var company string
		var at int64
		err := tx.QueryRowContext(ctx, `SELECT company, gathered_at FROM email_gatherings WHERE address = ? AND gathered_at >= ?`,
			address, ms(since)).Scan(&company, &at)
		if err != nil {
			return err
		}
		g.Address, g.GatheredAt = address, fromMS(at)
		if err := json.Unmarshal([]byte(company), &g.Company); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT method, pattern, person, retrieved_at FROM email_candidates
			WHERE address = ? ORDER BY ord`, address)
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
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &g, nil
}

// keepGathering replaces what was gathered for the address, and deletes what was
// gathered for any address before keepSince: it would not be read again.
func keepGathering(ctx context.Context, tx *Tx, g *enrich.Gathering, keepSince time.Time) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM email_gatherings WHERE gathered_at < ?`, ms(keepSince)); err != nil {
		return err
	}
	if err := forgetGathering(ctx, tx, g.Address); err != nil {
		return err
	}
	company, err := json.Marshal(g.Company)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO email_gatherings (address, company, gathered_at) VALUES (?, ?, ?)`,
		g.Address, string(company), ms(g.GatheredAt)); err != nil {
		return err
	}
	for i, c := range g.Candidates {
		person, err := json.Marshal(c.Person)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO email_candidates (address, ord, method, pattern, person, retrieved_at)
			VALUES (?, ?, ?, ?, ?, ?)`, g.Address, i, c.Method, c.Pattern, string(person), ms(c.RetrievedAt)); err != nil {
			return err
		}
	}
	return nil
}

func forgetGathering(ctx context.Context, tx *Tx, address string) error {
	_, err := tx.ExecContext(ctx, `DELETE FROM email_gatherings WHERE address = ?`, address)
	return err
}
