package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"enrichd/enrich"
)

// What ambiguous email lookups gathered: the company an address's domain was
// identified as, and the candidates found for it, kept until they are settled or old.

// Gathering is enrich.Held's: what a lookup of address gathered at or after since; nil
// when nothing was.
func (db *DB) Gathering(ctx context.Context, address string, since time.Time) (*enrich.Gathering, error) {
	var g enrich.Gathering
	err := db.Read(ctx, func(q Executor) error {
		g = enrich.Gathering{}
		var company string
		var at int64
		err := q.QueryRow(ctx, `SELECT company, gathered_at FROM email_gatherings WHERE address = ? AND gathered_at >= ?`,
			address, ms(since)).Scan(&company, &at)
		if err != nil {
			return err
		}
		g.Address, g.GatheredAt = address, fromMS(at)
		if err := json.Unmarshal([]byte(company), &g.Company); err != nil {
			return err
		}
		rows, err := q.Query(ctx, `SELECT method, pattern, person, retrieved_at FROM email_candidates
			WHERE address = ? ORDER BY ord`, address)
		g.Candidates, err = collect(rows, err, func(row Row) (enrich.Candidate, error) {
			var c enrich.Candidate
			var person string
			var retrieved int64
			if err := row.Scan(&c.Method, &c.Pattern, &person, &retrieved); err != nil {
				return c, err
			}
			c.RetrievedAt = fromMS(retrieved)
			if err := json.Unmarshal([]byte(person), &c.Person); err != nil {
				return c, err
			}
			if c.Person != nil && c.Person.EmailMatch != nil {
				if m := c.Person.EmailMatch; m.Source != nil {
					c.Source = *m.Source
				}
				c.Person.EmailMatch = nil
			}
			return c, nil
		})
		return err
	})
	if errors.Is(err, ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &g, nil
}

// keepGathering replaces what was gathered for the address, and deletes what was
// gathered for any address before keepSince: it would not be read again. The
// gathering's row is upserted first: two settles gathering the same address at once
// (PostgreSQL) then take turns on it, where a delete-then-insert would have both
// insert and one fail on the key.
//
// The gathering and its candidates carry the hash of the address (subject_hash), each
// candidate also that of its profile (answer_hash).
func keepGathering(ctx context.Context, tx Tx, h *enrich.Subjects, g *enrich.Gathering, keepSince time.Time) error {
	address := hashOf(h, enrich.Subject{Kind: enrich.SubjectEmail, Value: g.Address}, true)
	if _, err := tx.Exec(ctx, `DELETE FROM email_gatherings WHERE gathered_at < ? AND address <> ?`, ms(keepSince), g.Address); err != nil {
		return err
	}
	company, err := json.Marshal(g.Company)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO email_gatherings (address, company, gathered_at, subject_hash) VALUES (?, ?, ?, ?)
		ON CONFLICT (address) DO UPDATE SET company = excluded.company, gathered_at = excluded.gathered_at, subject_hash = excluded.subject_hash`,
		g.Address, string(company), ms(g.GatheredAt), address); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM email_candidates WHERE address = ?`, g.Address); err != nil {
		return err
	}
	for i, c := range g.Candidates {
		// The person is kept with the email_match it would be answered with, which
		// names the source that found them (none when what is held did), so that a
		// retry decided by a hint names it too.
		var p *enrich.Person
		if c.Person != nil {
			kept := *c.Person
			kept.EmailMatch = &enrich.EmailMatch{Method: c.Method, Email: g.Address, Pattern: &c.Pattern}
			if c.Source != "" {
				kept.EmailMatch.Source = &c.Source
			}
			p = &kept
		}
		person, err := json.Marshal(p)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO email_candidates (address, ord, method, pattern, person, retrieved_at, subject_hash, answer_hash)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, g.Address, i, c.Method, c.Pattern, string(person), ms(c.RetrievedAt),
			address, answerColumn(address, resultHash(h, enrich.Result{Person: c.Person}))); err != nil {
			return err
		}
	}
	return nil
}

// forgetGathering deletes what was gathered for the address (its candidates with it).
func forgetGathering(ctx context.Context, tx Tx, address string) error {
	_, err := tx.Exec(ctx, `DELETE FROM email_gatherings WHERE address = ?`, address)
	return err
}
