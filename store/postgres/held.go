package postgres

import (
	"context"
	"encoding/json"
	"time"

	"enrichd/enrich"

	"github.com/jackc/pgx/v5"
)

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
