package sqlite

import (
	"context"
	"encoding/json"
	"time"

	"enrichd/enrich"
)

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
