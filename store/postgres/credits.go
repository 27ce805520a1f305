package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/jackc/pgx/v5"
)

// With many writers, a charge that read the grants and then updated them could spend
// the same credit twice. Every transaction that changes a grant's remaining credits
// (charge, refund, expiry) first locks the grant rows it reads, FOR UPDATE, in one
// order for all of them (grantOrder): two charges of one organization then run one
// after the other, the second reading what the first left, and never deadlock on each
// other. The ledger stays append-only and the source of truth; credit_days, kept by a
// trigger, is its sums.

// grantOrder is the order grants are charged in, the ones that expire first first,
// and the order every transaction locks them in.
const grantOrder = `ORDER BY expires_at IS NULL, expires_at, id`

// lockedGrant is an unexpired grant read under its row lock.
type lockedGrant struct {
	id        int64
	remaining int64
	expiresAt *int64
}

// lockGrants locks the organization's unexpired grants and returns them in grantOrder.
func lockGrants(ctx context.Context, tx pgx.Tx, orgID string) ([]lockedGrant, error) {
	rows, err := tx.Query(ctx, `SELECT id, remaining, expires_at FROM credit_grants
		WHERE org_id = $1 AND expired_at IS NULL `+grantOrder+` FOR UPDATE`, orgID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (lockedGrant, error) {
		var g lockedGrant
		err := r.Scan(&g.id, &g.remaining, &g.expiresAt)
		return g, err
	})
}

// GrantCredits adds a grant of amount credits to the organization, expiring at
// expiresAt when it is not nil.
func (db *DB) GrantCredits(ctx context.Context, orgName string, amount int64, expiresAt *time.Time) (int64, error) {
	if amount <= 0 {
		return 0, enrich.Errorf(enrich.KindInvalid, "amount must be a positive number of credits")
	}
	var grantID int64
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		org, err := findOrg(ctx, tx, orgName)
		if err != nil {
			return err
		}
		now := db.now()
		if err := tx.QueryRow(ctx, `INSERT INTO credit_grants (org_id, amount, remaining, expires_at, created_at)
			VALUES ($1, $2, $3, $4, $5) RETURNING id`, org.ID, amount, amount, nullMS(expiresAt), ms(now)).Scan(&grantID); err != nil {
			return err
		}
		if err := appendLedger(ctx, tx, org.ID, store.LedgerGrant, amount, grantID, nil, now); err != nil {
			return err
		}
		_, err = expireGrants(ctx, tx, org.ID, now)
		return err
	})
	return grantID, err
}

// CreditBalance returns the organization's balance after writing off expired grants.
func (db *DB) CreditBalance(ctx context.Context, orgName string) (store.Balance, error) {
	var b store.Balance
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		org, err := findOrg(ctx, tx, orgName)
		if err != nil {
			return err
		}
		if _, err := expireGrants(ctx, tx, org.ID, db.now()); err != nil {
			return err
		}
		b, err = balance(ctx, tx, org.ID)
		return err
	})
	return b, err
}

// CreditLedger lists the organization's ledger, oldest first.
func (db *DB) CreditLedger(ctx context.Context, orgName string) ([]store.LedgerEntry, error) {
	org, err := db.FindOrg(ctx, orgName)
	if err != nil {
		return nil, err
	}
	rows, err := db.pool.Query(ctx, `SELECT id, kind, amount, grant_id, task_id, created_at
		FROM credit_ledger WHERE org_id = $1 ORDER BY id`, org.ID)
	if err != nil {
		return nil, db.readChecked(err)
	}
	out, err := scanLedger(rows)
	return out, db.readChecked(err)
}

// balance derives the balance from the ledger's sums per day in credit_days.
func balance(ctx context.Context, q querier, orgID string) (store.Balance, error) {
	var b store.Balance
	err := q.QueryRow(ctx, `SELECT
		coalesce(sum(CASE kind WHEN 'grant' THEN amount END), 0)::bigint,
		coalesce(sum(CASE kind WHEN 'charge' THEN amount END), 0)::bigint,
		coalesce(sum(CASE kind WHEN 'refund' THEN amount END), 0)::bigint,
		coalesce(sum(CASE kind WHEN 'expiry' THEN amount END), 0)::bigint
		FROM credit_days WHERE org_id = $1`, orgID).Scan(&b.Granted, &b.Charged, &b.Refund, &b.Expired)
	b.Balance = b.Granted - b.Charged + b.Refund - b.Expired
	return b, err
}

func appendLedger(ctx context.Context, tx pgx.Tx, orgID, kind string, amount, grantID int64, taskID *string, now time.Time) error {
	_, err := tx.Exec(ctx, `INSERT INTO credit_ledger (org_id, kind, amount, grant_id, task_id, created_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, orgID, kind, amount, grantID, taskID, ms(now))
	return err
}

// expireGrants locks the organization's unexpired grants, writes off what is left of
// those past their expiry, and returns the others, still locked, in grantOrder.
func expireGrants(ctx context.Context, tx pgx.Tx, orgID string, now time.Time) ([]lockedGrant, error) {
	grants, err := lockGrants(ctx, tx, orgID)
	if err != nil {
		return nil, err
	}
	live := grants[:0]
	for _, g := range grants {
		if g.expiresAt == nil || *g.expiresAt > ms(now) {
			live = append(live, g)
			continue
		}
		if _, err := tx.Exec(ctx, `UPDATE credit_grants SET expired_at = $1, remaining = 0 WHERE id = $2`, ms(now), g.id); err != nil {
			return nil, err
		}
		if g.remaining > 0 {
			if err := appendLedger(ctx, tx, orgID, store.LedgerExpiry, g.remaining, g.id, nil, now); err != nil {
				return nil, err
			}
		}
	}
	return live, nil
}

// chargeCredits takes cost credits for the task taskID from the organization's
// unexpired grants, the ones that expire first first, or fails with the 402 the SQLite
// store gives (insufficient_credits, or credits_expired when an expiry was the last
// thing to take credits away), having changed nothing but the write-off of expired
// grants. The grants stay locked until tx ends, so a concurrent charge of the same
// organization waits and then sees what this one left: the last credit is spent once.
func chargeCredits(ctx context.Context, tx pgx.Tx, orgID, taskID string, cost int64, now time.Time) error {
	grants, err := expireGrants(ctx, tx, orgID, now)
	if err != nil {
		return err
	}
	type take struct{ grant, amount int64 }
	var takes []take
	var available int64
	for _, g := range grants {
		if available >= cost {
			break
		}
		if g.remaining <= 0 {
			continue
		}
		n := min(g.remaining, cost-available)
		takes = append(takes, take{g.id, n})
		available += n
	}
	if available < cost {
		return insufficientCredits(ctx, tx, orgID, cost, available)
	}
	for _, t := range takes {
		if _, err := tx.Exec(ctx, `UPDATE credit_grants SET remaining = remaining - $1 WHERE id = $2`, t.amount, t.grant); err != nil {
			return err
		}
		if err := appendLedger(ctx, tx, orgID, store.LedgerCharge, t.amount, t.grant, &taskID, now); err != nil {
			return err
		}
	}
	return nil
}

// insufficientCredits builds the 402: credits_expired when the last thing that took
// credits away was an expiry, insufficient_credits otherwise. remaining is what the
// unexpired grants still hold, which is the balance.
func insufficientCredits(ctx context.Context, tx pgx.Tx, orgID string, cost, remaining int64) error {
	var lastKind string
	err := tx.QueryRow(ctx, `SELECT kind FROM credit_ledger
		WHERE org_id = $1 AND kind IN ('charge', 'expiry') AND amount > 0 ORDER BY id DESC LIMIT 1`, orgID).Scan(&lastKind)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	e := &enrich.Error{Kind: enrich.KindPaymentRequired, CreditsRemaining: &remaining}
	if lastKind == store.LedgerExpiry {
		e.Code = "credits_expired"
		e.Message = fmt.Sprintf("your credits have expired: this request costs %d and %d remain; ask for a new grant", cost, remaining)
	} else {
		e.Code = "insufficient_credits"
		e.Message = fmt.Sprintf("not enough credits: this request costs %d and %d remain; ask for a new grant", cost, remaining)
	}
	return e
}

// refundCredits gives back what the task taskID was charged and not yet refunded, to
// the grants it was taken from. Credits returned to a grant that has expired in the
// meantime expire at once, so the balance never counts them. The grants are locked
// (in grantOrder, as a charge locks them) before their expiry is looked at, so an
// expiry running at the same time cannot write off a grant and then see credits come
// back to it. The caller holds the task's row, which keeps a second refund of the same
// task waiting until this one is committed and then finding nothing left to give back.
func refundCredits(ctx context.Context, tx pgx.Tx, taskID string, now time.Time) error {
	rows, err := tx.Query(ctx, `SELECT l.org_id, l.grant_id,
			sum(CASE l.kind WHEN 'charge' THEN l.amount ELSE 0 END) - sum(CASE l.kind WHEN 'refund' THEN l.amount ELSE 0 END)
		FROM credit_ledger l WHERE l.task_id = $1 GROUP BY l.org_id, l.grant_id ORDER BY l.grant_id`, taskID)
	if err != nil {
		return err
	}
	type back struct {
		org    string
		grant  int64
		amount int64
	}
	owed, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (back, error) {
		var b back
		err := r.Scan(&b.org, &b.grant, &b.amount)
		return b, err
	})
	if err != nil {
		return err
	}
	byGrant := map[int64]back{}
	var ids []int64
	for _, b := range owed {
		if b.amount > 0 {
			byGrant[b.grant] = b
			ids = append(ids, b.grant)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err = tx.Query(ctx, `SELECT id, expired_at IS NOT NULL FROM credit_grants WHERE id = ANY($1) `+grantOrder+` FOR UPDATE`, ids)
	if err != nil {
		return err
	}
	type state struct {
		grant   int64
		expired bool
	}
	states, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (state, error) {
		var s state
		err := r.Scan(&s.grant, &s.expired)
		return s, err
	})
	if err != nil {
		return err
	}
	expired := map[int64]bool{}
	for _, s := range states {
		expired[s.grant] = s.expired
	}
	// The ledger rows in grant id order, as the SQLite store appends them.
	for _, id := range ids {
		b := byGrant[id]
		if err := appendLedger(ctx, tx, b.org, store.LedgerRefund, b.amount, b.grant, &taskID, now); err != nil {
			return err
		}
		if expired[id] {
			if err := appendLedger(ctx, tx, b.org, store.LedgerExpiry, b.amount, b.grant, &taskID, now); err != nil {
				return err
			}
			continue
		}
		if _, err := tx.Exec(ctx, `UPDATE credit_grants SET remaining = remaining + $1 WHERE id = $2`, b.amount, b.grant); err != nil {
			return err
		}
	}
	return nil
}

// ListGrants returns the organization's grants, newest first. Grants past their expiry
// are written off by the next charge or balance, not here: a read changes nothing.
func (db *DB) ListGrants(ctx context.Context, orgID string) ([]store.Grant, error) {
	rows, err := db.pool.Query(ctx, `SELECT id, amount, remaining, expires_at, expired_at, created_at
		FROM credit_grants WHERE org_id = $1 ORDER BY id DESC`, orgID)
	if err != nil {
		return nil, db.readChecked(err)
	}
	grants, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Grant, error) {
		var g store.Grant
		var expires, expired *int64
		var created int64
		err := r.Scan(&g.ID, &g.Amount, &g.Remaining, &expires, &expired, &created)
		g.ExpiresAt, g.ExpiredAt, g.CreatedAt = fromNullMS(expires), fromNullMS(expired), fromMS(created)
		return g, err
	})
	if grants == nil && err == nil {
		grants = []store.Grant{}
	}
	return grants, db.readChecked(err)
}

// LedgerPage returns up to limit rows of the organization's ledger, newest first, from
// the row before beforeID (0: from the newest). limit 0 means store.DefaultLedgerPage;
// more than store.MaxLedgerPage means the most.
func (db *DB) LedgerPage(ctx context.Context, orgID string, beforeID int64, limit int) ([]store.LedgerEntry, error) {
	beforeID, limit, err := store.LedgerPageBounds(beforeID, limit)
	if err != nil {
		return nil, err
	}
	rows, err := db.pool.Query(ctx, `SELECT id, kind, amount, grant_id, task_id, created_at
		FROM credit_ledger WHERE org_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3`, orgID, beforeID, limit)
	if err != nil {
		return nil, db.readChecked(err)
	}
	out, err := scanLedger(rows)
	return out, db.readChecked(err)
}

// scanLedger reads ledger rows selected as id, kind, amount, grant_id, task_id,
// created_at, and closes them.
func scanLedger(rows pgx.Rows) ([]store.LedgerEntry, error) {
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.LedgerEntry, error) {
		var e store.LedgerEntry
		var created int64
		err := r.Scan(&e.ID, &e.Kind, &e.Amount, &e.GrantID, &e.TaskID, &created)
		e.CreatedAt = fromMS(created)
		return e, err
	})
	if out == nil && err == nil {
		out = []store.LedgerEntry{}
	}
	return out, err
}

// DailyCredits returns one entry per UTC day for the days days ending with now's,
// oldest first, days without movement included as zeros, from credit_days.
func (db *DB) DailyCredits(ctx context.Context, orgID string, days int, now time.Time) ([]store.CreditDay, error) {
	out, first, last, err := store.CreditDays(days, now)
	if err != nil {
		return nil, err
	}
	rows, err := db.pool.Query(ctx, `SELECT day, kind, amount FROM credit_days
		WHERE org_id = $1 AND day >= $2 AND day <= $3 ORDER BY day`, orgID, first, last)
	if err != nil {
		return nil, db.readChecked(err)
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
	return out, db.readChecked(rows.Err())
}
