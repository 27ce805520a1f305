package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// lockOrg locks the organization's row against the other enqueues of its tasks and
// against a claimer dropping its turn. FOR NO KEY UPDATE, not FOR UPDATE: rows that
// refer to the organization (a task, a ledger row) take FOR KEY SHARE on it, which
// FOR UPDATE would make wait.
func lockOrg(ctx context.Context, tx pgx.Tx, orgID string) error {
	var id string
	err := tx.QueryRow(ctx, `SELECT id FROM orgs WHERE id = $1 FOR NO KEY UPDATE`, orgID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("organization %s: not found", orgID)
	}
	return err
}

// SingleWriter is false: transactions run side by side, and a read ahead of one would
// be a round trip more.
func (db *DB) SingleWriter() bool { return false }

// IndexedBy is the table alone: PostgreSQL takes no index hints. Each filter of
// FindTasks leads with the equalities of the index made for it, which the planner
// then walks backwards; TestFindTasksPagesAndEachFilterWalksAnIndex checks that it does.
func (db *DB) IndexedBy(table, index string) string { return table }

// LockOrgs locks the organizations' rows in one order (see lockOrg).
func (e exec) LockOrgs(ctx context.Context, orgIDs ...string) error {
	if len(orgIDs) == 1 {
		return lockOrg(ctx, e.q.(pgx.Tx), orgIDs[0])
	}
	return lockOrgs(ctx, e.q.(pgx.Tx), orgIDs)
}

// NotifyQueued sends the NOTIFY of an enqueued task, delivered at commit.
func (e exec) NotifyQueued(ctx context.Context) error { return notifyTasks(ctx, e.q.(pgx.Tx)) }
