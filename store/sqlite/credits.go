package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"enrichd/enrich"
)

// The credit steps below are the ones tasks, queue and batches still call here;
// package store has them written once (store/credits.go).

// balance derives the balance from the ledger's sums per day in credit_days.
func balance(ctx context.Context, tx *Tx, orgID string) (Balance, error) {
	var b Balance
	err := tx.QueryRowContext(ctx, `SELECT
		coalesce(sum(CASE kind WHEN 'grant' THEN amount END), 0),
		coalesce(sum(CASE kind WHEN 'charge' THEN amount END), 0),
		coalesce(sum(CASE kind WHEN 'refund' THEN amount END), 0),
		coalesce(sum(CASE kind WHEN 'expiry' THEN amount END), 0)
		FROM credit_days WHERE org_id = ?`, orgID).Scan(&b.Granted, &b.Charged, &b.Refund, &b.Expired)
	b.Balance = b.Granted - b.Charged + b.Refund - b.Expired
	return b, err
}

func appendLedger(ctx context.Context, tx *Tx, orgID, kind string, amount, grantID int64, taskID *string, now time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO credit_ledger (org_id, kind, amount, grant_id, task_id, created_at)
		VALUES (?, ?, ?, ?, ?, ?)`, orgID, kind, amount, grantID, taskID, ms(now))
	return err
}

// expireGrants writes off what is left of the organization's grants past their expiry.
func expireGrants(ctx context.Context, tx *Tx, orgID string, now time.Time) error {
	rows, err := tx.QueryContext(ctx, `SELECT id, remaining FROM credit_grants
		WHERE org_id = ? AND expired_at IS NULL AND expires_at <= ?`, orgID, ms(now))
	if err != nil {
		return err
	}
	type left struct{ grant, remaining int64 }
	var expiring []left
	for rows.Next() {
		var l left
		if err := rows.Scan(&l.grant, &l.remaining); err != nil {
			rows.Close()
			return err
		}
		expiring = append(expiring, l)
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return err
	}
	if err := rows.Close(); err != nil {
		return err
	}
	for _, l := range expiring {
		if _, err := tx.ExecContext(ctx, `UPDATE credit_grants SET expired_at = ?, remaining = 0 WHERE id = ?`, ms(now), l.grant); err != nil {
			return err
		}
		if l.remaining > 0 {
			if err := appendLedger(ctx, tx, orgID, LedgerExpiry, l.remaining, l.grant, nil, now); err != nil {
				return err
			}
		}
	}
	return nil
}

// charge takes cost credits for a task from the unexpired grants that expire first,
// or fails with 402.
func charge(ctx context.Context, tx *Tx, orgID, taskID string, cost int64, now time.Time) error {
	if err := expireGrants(ctx, tx, orgID, now); err != nil {
		return err
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, remaining FROM credit_grants
		WHERE org_id = ? AND expired_at IS NULL AND remaining > 0
		ORDER BY expires_at IS NULL, expires_at, id`, orgID)
	if err != nil {
		return err
	}
	type take struct{ grant, amount int64 }
	var takes []take
	var available int64
	for rows.Next() && available < cost {
		var id, remaining int64
		if err := rows.Scan(&id, &remaining); err != nil {
			rows.Close()
			return err
		}
		n := min(remaining, cost-available)
		takes = append(takes, take{id, n})
		available += n
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return err
	}
	if err := rows.Close(); err != nil {
		return err
	}
	if available < cost {
		return insufficientCredits(ctx, tx, orgID, cost, available)
	}
	for _, t := range takes {
		if _, err := tx.ExecContext(ctx, `UPDATE credit_grants SET remaining = remaining - ? WHERE id = ?`, t.amount, t.grant); err != nil {
			return err
		}
		if err := appendLedger(ctx, tx, orgID, LedgerCharge, t.amount, t.grant, &taskID, now); err != nil {
			return err
		}
	}
	return nil
}

// insufficientCredits builds the 402: credits_expired when the last thing that took
// credits away was an expiry, insufficient_credits otherwise. remaining is what the
// unexpired grants still hold, which is the balance.
func insufficientCredits(ctx context.Context, tx *Tx, orgID string, cost, remaining int64) error {
	var lastKind string
	err := tx.QueryRowContext(ctx, `SELECT kind FROM credit_ledger
		WHERE org_id = ? AND kind IN ('charge', 'expiry') AND amount > 0 ORDER BY id DESC LIMIT 1`, orgID).Scan(&lastKind)
	if err != nil && err != sql.ErrNoRows {
		return err
	}
	e := &enrich.Error{Kind: enrich.KindPaymentRequired, CreditsRemaining: &remaining}
	if lastKind == LedgerExpiry {
		e.Code = "credits_expired"
		e.Message = fmt.Sprintf("your credits have expired: this request costs %d and %d remain; ask for a new grant", cost, remaining)
	} else {
		e.Code = "insufficient_credits"
		e.Message = fmt.Sprintf("not enough credits: this request costs %d and %d remain; ask for a new grant", cost, remaining)
	}
	return e
}

// refund gives back what a task was charged and not yet refunded, to the grants it was
// taken from. Credits returned to a grant that has expired in the meantime expire at
// once, so the balance never counts them.
func refund(ctx context.Context, tx *Tx, taskID string, now time.Time) error {
	rows, err := tx.QueryContext(ctx, `SELECT l.org_id, l.grant_id, g.expired_at IS NOT NULL,
			sum(CASE l.kind WHEN 'charge' THEN l.amount ELSE 0 END) - sum(CASE l.kind WHEN 'refund' THEN l.amount ELSE 0 END)
		FROM credit_ledger l JOIN credit_grants g ON g.id = l.grant_id
		WHERE l.task_id = ? GROUP BY l.org_id, l.grant_id`, taskID)
	if err != nil {
		return err
	}
	type back struct {
		org     string
		grant   int64
		expired bool
		amount  int64
	}
	var backs []back
	for rows.Next() {
		var b back
		if err := rows.Scan(&b.org, &b.grant, &b.expired, &b.amount); err != nil {
			rows.Close()
			return err
		}
		if b.amount > 0 {
			backs = append(backs, b)
		}
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return err
	}
	if err := rows.Close(); err != nil {
		return err
	}
	for _, b := range backs {
		if err := appendLedger(ctx, tx, b.org, LedgerRefund, b.amount, b.grant, &taskID, now); err != nil {
			return err
		}
		if b.expired {
			if err := appendLedger(ctx, tx, b.org, LedgerExpiry, b.amount, b.grant, &taskID, now); err != nil {
				return err
			}
			continue
		}
		if _, err := tx.ExecContext(ctx, `UPDATE credit_grants SET remaining = remaining + ? WHERE id = ?`, b.amount, b.grant); err != nil {
			return err
		}
	}
	return nil
}

// LockTaskGrants locks nothing: the single writer keeps a refund alone.
func (txExec) LockTaskGrants(context.Context, string) error { return nil }
