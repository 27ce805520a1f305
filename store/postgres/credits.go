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

// The credit steps below are the ones tasks, queue and batches still call here;
// package store has them written once (store/credits.go), with this lock order.
//
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

// LockTaskGrants locks the grants the task was charged from, in grantOrder.
func (e exec) LockTaskGrants(ctx context.Context, taskID string) error {
	_, err := e.Exec(ctx, `SELECT id FROM credit_grants
		WHERE id IN (SELECT grant_id FROM credit_ledger WHERE task_id = ?) `+grantOrder+` FOR UPDATE`, taskID)
	return err
}
