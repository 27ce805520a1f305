package postgres

import (
	"context"
)

// lockOrg locks the organization's row against the other enqueues of its tasks and
// against a claimer dropping its turn. FOR NO KEY UPDATE, not FOR UPDATE: rows that
// refer to the organization (a task, a ledger row) take FOR KEY SHARE on it, which
// FOR UPDATE would make wait. The lock is sent with the transaction's next statement:
// every caller's next statements write or read what the lock guards, and a row that
// refers to an organization that is not there fails on its foreign key.
func lockOrg(tx *pipe, orgID string) {
	tx.later(`SELECT 1 FROM orgs WHERE id = $1 FOR NO KEY UPDATE`, orgID)
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
	tx := e.q.(*pipe)
	if len(orgIDs) == 1 {
		lockOrg(tx, orgIDs[0])
	} else {
		lockOrgs(tx, orgIDs)
	}
	return nil
}

// NotifyQueued sends the NOTIFY of an enqueued task, delivered at commit.
func (e exec) NotifyQueued(ctx context.Context) error { notifyTasks(e.q.(*pipe), e.from); return nil }
