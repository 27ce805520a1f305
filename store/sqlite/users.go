package sqlite

import "context"

// The users' and the first start's primitives: SQLite's single writer already makes
// these transactions one at a time, so neither needs a lock.

// LockInstall is store.Tx's: the writer is the lock.
func (e txExec) LockInstall(ctx context.Context) error { return nil }

// TryLockSessionPurge is store.Tx's: one process owns the file, so its purge is the
// only one.
func (e txExec) TryLockSessionPurge(ctx context.Context) (bool, error) { return true, nil }
