package postgres

import "context"

// lockInstall makes the first start's transactions one at a time across replicas, so
// that "no user yet" still holds when a link is made or used.
const lockInstall = lockBase | 0x03

// LockInstall is store.Tx's: it waits for the first start's advisory lock, held until
// the transaction ends.
func (e exec) LockInstall(ctx context.Context) error {
	_, err := e.Exec(ctx, `SELECT pg_advisory_xact_lock(?)`, lockInstall)
	return err
}

// TryLockSessionPurge is store.Tx's: the purge's advisory lock if no other replica
// holds it, without waiting.
func (e exec) TryLockSessionPurge(ctx context.Context) (bool, error) {
	var ok bool
	err := e.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(?)`, lockPurgeSessions).Scan(&ok)
	return ok, err
}
