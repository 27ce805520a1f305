package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// The steps of other domains that package store borrows (store.Borrowed), on the
// write transaction (exec.q is a pgx.Tx inside Write).

func (e exec) BorrowedKeepResult(ctx context.Context, data []byte) (int64, error) {
	return keepResult(ctx, e.q.(pgx.Tx), data)
}

func (e exec) BorrowedLockOrg(ctx context.Context, orgID string) error {
	return lockOrg(ctx, e.q.(pgx.Tx), orgID)
}

func (e exec) BorrowedJoinQueue(ctx context.Context, orgID string) error {
	return joinQueue(ctx, e.q.(pgx.Tx), orgID)
}

func (e exec) BorrowedNotifyTasks(ctx context.Context) error { return notifyTasks(ctx, e.q.(pgx.Tx)) }
