package postgres

import (
	"context"
	"slices"
)

// SingleWriter is false: transactions run side by side, and a read ahead of one would
// be a round trip more.
func (db *DB) SingleWriter() bool { return false }

// IndexedBy is the table alone: PostgreSQL takes no index hints. Each filter of
// FindTasks leads with the equalities of the index made for it, which the planner
// then walks backwards; TestFindTasksPagesAndEachFilterWalksAnIndex checks that it does.
func (db *DB) IndexedBy(table, index string) string { return table }

// LockOrgs locks the organizations' rows, in one order, against the other enqueues of
// their tasks and against a claimer dropping their turns. FOR NO KEY UPDATE, not FOR
// UPDATE: rows that refer to an organization (a task, a ledger row) take FOR KEY SHARE
// on it, which FOR UPDATE would make wait. The lock is sent with the transaction's
// next statement (pipe.later): every caller's next statements write or read what it
// guards, and a row that refers to an organization that is not there fails on its
// foreign key.
func (e exec) LockOrgs(ctx context.Context, orgIDs ...string) error {
	if len(orgIDs) == 1 {
		return e.ExecLater(ctx, `SELECT 1 FROM orgs WHERE id = ? FOR NO KEY UPDATE`, orgIDs[0])
	}
	orgs := slices.Sorted(slices.Values(orgIDs))
	return e.ExecLater(ctx, `SELECT 1 FROM orgs WHERE id = ANY(?) ORDER BY id FOR NO KEY UPDATE`, orgs)
}

// NotifyQueued sends the NOTIFY of an enqueued task, delivered at commit.
func (e exec) NotifyQueued(ctx context.Context) error { notifyTasks(e.q.(*pipe), e.from); return nil }
