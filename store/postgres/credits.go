package postgres

import (
	"context"
)

// The credit steps are package store's (store/credits.go); their lock order is this.
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

// LockTaskGrants locks the grants the task was charged from, in grantOrder.
func (e exec) LockTaskGrants(ctx context.Context, taskID string) error {
	_, err := e.Exec(ctx, `SELECT id FROM credit_grants
		WHERE id IN (SELECT grant_id FROM credit_ledger WHERE task_id = ?) `+grantOrder+` FOR UPDATE`, taskID)
	return err
}
