package sqlite

import "context"

// The steps of other domains that package store borrows (store.Borrowed).

func (e txExec) BorrowedKeepResult(ctx context.Context, data []byte) (int64, error) {
	return keepResult(ctx, e.tx, data)
}

func (e txExec) BorrowedLockOrg(ctx context.Context, orgID string) error { return nil }

func (e txExec) BorrowedJoinQueue(ctx context.Context, orgID string) error {
	return joinQueue(ctx, e.tx, orgID)
}

func (e txExec) BorrowedNotifyTasks(ctx context.Context) error { return nil }
