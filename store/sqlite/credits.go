package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"enrichd/enrich"
	"enrichd/store"
)

// GrantCredits adds a grant of amount credits to the organization, expiring at
// expiresAt when it is not nil.
func (db *DB) GrantCredits(ctx context.Context, orgName string, amount int64, expiresAt *time.Time) (int64, error) {
	if amount <= 0 {
		return 0, enrich.Errorf(enrich.KindInvalid, "amount must be a positive number of credits")
	}
	var grantID int64
	err := db.inTx(ctx, func(tx *Tx) error {
		org, err := findOrg(ctx, tx, orgName)
		if err != nil {
			return err
		}
		now := db.now()
		var exp any
		if expiresAt != nil {
			exp = ms(*expiresAt)
		}
		if err := tx.QueryRowContext(ctx, `INSERT INTO credit_grants (org_id, amount, remaining, expires_at, created_at)
			VALUES (?, ?, ?, ?, ?) RETURNING id`, org.ID, amount, amount, exp, ms(now)).Scan(&grantID); err != nil {
			return err
		}
		if err := appendLedger(ctx, tx, org.ID, LedgerGrant, amount, grantID, nil, now); err != nil {
			return err
		}
		return expireGrants(ctx, tx, org.ID, now)
	})
	return grantID, err
}

// CreditBalance returns the organization's balance after writing off expired grants.
func (db *DB) CreditBalance(ctx context.Context, orgName string) (Balance, error) {
	var b Balance
	err := db.inTx(ctx, func(tx *Tx) error {
		org, err := findOrg(ctx, tx, orgName)
		if err != nil {
			return err
		}
		if err := expireGrants(ctx, tx, org.ID, db.now()); err != nil {
			return err
		}
		b, err = balance(ctx, tx, org.ID)
		return err
	})
	return b, err
}

// CreditLedger lists the organization's ledger, oldest first.
func (db *DB) CreditLedger(ctx context.Context, orgName string) ([]LedgerEntry, error) {
	org, err := db.FindOrg(ctx, orgName)
	if err != nil {
		return nil, err
	}
	rows, err := db.read.QueryContext(ctx, `SELECT id, kind, amount, grant_id, task_id, created_at
		FROM credit_ledger WHERE org_id = ? ORDER BY id`, org.ID)
	if err != nil {
		return nil, err
	}
	return scanLedger(rows)
}

// balance derives the balance from the ledger alone, through its sums per day in
// credit_days: the trigger that keeps them adds every ledger row as it is appended, so
// they add up to the same, and reading a row per day and kind costs the same for an
// organization with millions of charges as for one with ten, where summing the ledger
// itself read every row (60 ms on the overview at 100,000 charges).
func balance(ctx context.Context, tx *Tx, orgID string) (Balance, error) {
	var b Balance
	err := tx.QueryRowContext(ctx, balanceQuery, orgID).Scan(&b.Granted, &b.Charged, &b.Refund, &b.Expired)
	b.Balance = b.Granted - b.Charged + b.Refund - b.Expired
	return b, err
}

const balanceQuery = `SELECT
		coalesce(sum(CASE kind WHEN 'grant' THEN amount END), 0),
		coalesce(sum(CASE kind WHEN 'charge' THEN amount END), 0),
		coalesce(sum(CASE kind WHEN 'refund' THEN amount END), 0),
		coalesce(sum(CASE kind WHEN 'expiry' THEN amount END), 0)
		FROM credit_days WHERE org_id = ?`

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

const listGrantsQuery = `SELECT id, amount, remaining, expires_at, expired_at, created_at
	FROM credit_grants WHERE org_id = ? ORDER BY id DESC`

// ListGrants returns the organization's grants, newest first. Grants past their expiry
// are written off by the next charge or balance, not here: a read changes nothing.
func (db *DB) ListGrants(ctx context.Context, orgID string) ([]Grant, error) {
	rows, err := db.read.QueryContext(ctx, listGrantsQuery, orgID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	grants := []Grant{}
	for rows.Next() {
		var g Grant
		var expires, expired sql.NullInt64
		var created int64
		if err := rows.Scan(&g.ID, &g.Amount, &g.Remaining, &expires, &expired, &created); err != nil {
			return nil, err
		}
		g.ExpiresAt, g.ExpiredAt, g.CreatedAt = fromNullMS(expires), fromNullMS(expired), fromMS(created)
		grants = append(grants, g)
	}
	return grants, rows.Err()
}

const ledgerPageQuery = `SELECT id, kind, amount, grant_id, task_id, created_at
	FROM credit_ledger WHERE org_id = ? AND id < ? ORDER BY id DESC LIMIT ?`

// LedgerPage returns up to limit rows of the organization's ledger, newest first, from
// the row before beforeID (0: from the newest). The next page starts before the last
// row's ID. limit 0 means DefaultLedgerPage; more than MaxLedgerPage means the most.
func (db *DB) LedgerPage(ctx context.Context, orgID string, beforeID int64, limit int) ([]LedgerEntry, error) {
	beforeID, limit, err := store.LedgerPageBounds(beforeID, limit)
	if err != nil {
		return nil, err
	}
	rows, err := db.read.QueryContext(ctx, ledgerPageQuery, orgID, beforeID, limit)
	if err != nil {
		return nil, err
	}
	return scanLedger(rows)
}

// scanLedger reads ledger rows selected as id, kind, amount, grant_id, task_id,
// created_at, and closes them.
func scanLedger(rows *sql.Rows) ([]LedgerEntry, error) {
	defer rows.Close()
	out := []LedgerEntry{}
	for rows.Next() {
		var e LedgerEntry
		var created int64
		if err := rows.Scan(&e.ID, &e.Kind, &e.Amount, &e.GrantID, &e.TaskID, &created); err != nil {
			return nil, err
		}
		e.CreatedAt = fromMS(created)
		out = append(out, e)
	}
	return out, rows.Err()
}

const dailyCreditsQuery = `SELECT day, kind, amount FROM credit_days WHERE org_id = ? AND day >= ? AND day <= ? ORDER BY day`

// DailyCredits returns one entry per UTC day for the days days ending with now's,
// oldest first, days without movement included as zeros. It reads credit_days, which
// a trigger keeps beside the ledger: a handful of rows a day, however busy the day was.
func (db *DB) DailyCredits(ctx context.Context, orgID string, days int, now time.Time) ([]CreditDay, error) {
	out, first, last, err := store.CreditDays(days, now)
	if err != nil {
		return nil, err
	}
	rows, err := db.read.QueryContext(ctx, dailyCreditsQuery, orgID, first, last)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var day, amount int64
		var kind string
		if err := rows.Scan(&day, &kind, &amount); err != nil {
			return nil, err
		}
		out[day-first].Add(kind, amount)
	}
	return out, rows.Err()
}
