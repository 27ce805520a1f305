package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"enrichd/enrich"
	"enrichd/store"
)

// Held returns what email lookups read of the records held: the people addresses are
// on record for, stored companies, people by current employer, and what ambiguous
// lookups gathered.
func (db *DB) Held() enrich.Held { return held{db} }

type held struct{ db *DB }

func (h held) PersonByEmail(ctx context.Context, address string) (*enrich.HeldPerson, error) {
	for _, origin := range []string{store.OriginStore, store.OriginDataset} {
		rec, err := findRecord(ctx, h.db.read, origin, store.RecordKey(enrich.LookupEmail, address))
		if err != nil {
			return nil, err
		}
		if rec == nil || rec.objectType != enrich.ObjectPerson {
			continue
		}
		var p enrich.Person
		if err := json.Unmarshal(rec.data, &p); err != nil {
			return nil, err
		}
		return &enrich.HeldPerson{Person: &p, LastEnriched: rec.lastEnriched}, nil
	}
	return nil, nil
}

func (h held) CompanyByDomain(ctx context.Context, domain string) (*enrich.HeldCompany, error) {
	rec, err := findRecord(ctx, h.db.read, store.OriginStore, store.RecordKey(enrich.LookupDomain, domain))
	if err != nil || rec == nil || rec.objectType != enrich.ObjectCompany {
		return nil, err
	}
	var c enrich.Company
	if err := json.Unmarshal(rec.data, &c); err != nil {
		return nil, err
	}
	return &enrich.HeldCompany{Company: &c, LastEnriched: rec.lastEnriched}, nil
}

func (h held) CurrentStaff(ctx context.Context, e enrich.Employer, limit int) ([]enrich.HeldPerson, error) {
	return currentStaff(ctx, h.db.read, store.OriginStore, e, limit)
}

type rowsQuerier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// staffQueries find people by a current position's company page, domain or name;
// each is served by one index of positions (see TestListQueriesUseIndexes).
var staffQueries = []string{
	`SELECT r.id, r.data, r.last_enriched_at FROM positions p JOIN records r ON r.id = p.record_id
		WHERE p.company_network_url = ? AND p.is_current = 1 AND r.origin = ? LIMIT ?`,
	`SELECT r.id, r.data, r.last_enriched_at FROM positions p JOIN records r ON r.id = p.record_id
		WHERE p.company_domain = ? AND p.is_current = 1 AND r.origin = ? LIMIT ?`,
	`SELECT r.id, r.data, r.last_enriched_at FROM positions p JOIN records r ON r.id = p.record_id
		WHERE p.company_name = ? COLLATE NOCASE AND p.is_current = 1 AND r.origin = ? LIMIT ?`,
}

// currentStaff lists the people of origin with a current position that may be at the
// employer: by its page, any of its domains, or its name. It is a shortlist, at most
// limit people: Employer.Employs decides.
func currentStaff(ctx context.Context, q rowsQuerier, origin string, e enrich.Employer, limit int) ([]enrich.HeldPerson, error) {
	type lookup struct {
		query int
		value string
	}
	var lookups []lookup
	if e.NetworkURL != "" {
		lookups = append(lookups, lookup{0, e.NetworkURL})
	}
	for _, d := range e.Domains {
		lookups = append(lookups, lookup{1, d})
	}
	if e.Name != "" {
		lookups = append(lookups, lookup{2, e.Name})
	}
	seen := map[int64]bool{}
	var out []enrich.HeldPerson
	for _, l := range lookups {
		if len(out) >= limit {
			break
		}
		rows, err := q.QueryContext(ctx, staffQueries[l.query], l.value, origin, limit)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var id, last int64
			var data []byte
			if err := rows.Scan(&id, &data, &last); err != nil {
				rows.Close()
				return nil, err
			}
			if seen[id] || len(out) >= limit {
				continue
			}
			seen[id] = true
			var p enrich.Person
			if err := json.Unmarshal(data, &p); err != nil {
				rows.Close()
				return nil, fmt.Errorf("record %d: %w", id, err)
			}
			out = append(out, enrich.HeldPerson{Person: &p, LastEnriched: fromMS(last)})
		}
		if err := rows.Err(); err != nil {
			rows.Close()
			return nil, err
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (h held) Gathering(ctx context.Context, address string, since time.Time) (*enrich.Gathering, error) {
	var g enrich.Gathering
	err := h.db.inReadTx(ctx, func(tx *Tx) error {
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

// SearchStaff lists the imported people with a current position at the company whose
// names may be among q.Names.
func (s datasetSource) SearchStaff(ctx context.Context, q enrich.StaffQuery) ([]enrich.StaffMember, error) {
	if q.Company == nil {
		return nil, fmt.Errorf("dataset: staff search without a company: %w", enrich.ErrNotFound)
	}
	domain := ""
	if q.Company.Domain != nil {
		domain = *q.Company.Domain
	}
	e := enrich.EmployerOf(q.Company, domain)
	staff, err := currentStaff(ctx, s.db.read, store.OriginDataset, e, datasetStaffScan)
	if err != nil {
		return nil, fmt.Errorf("dataset: %v: %w", err, enrich.ErrUnavailable)
	}
	var out []enrich.StaffMember
	for _, h := range staff {
		p := h.Person
		if p.NetworkURL == nil || e.CurrentPosition(p) == nil {
			continue
		}
		n := enrich.NameOf(p)
		if !q.Matches(n.First, n.Last) {
			continue
		}
		m := enrich.StaffMember{NetworkURL: *p.NetworkURL}
		if p.FullName != nil {
			m.FullName = *p.FullName
		}
		out = append(out, m)
		if q.Limit > 0 && len(out) >= q.Limit {
			break
		}
	}
	return out, nil
}

// datasetStaffScan bounds how many imported people of one company a staff search reads.
const datasetStaffScan = 5000
