package postgres

import (
	"context"
)

// lockWatchRound is held, on a connection of its own, for a whole scheduling round
// (HoldWatchScheduler): the round reads each organization's spend once and makes its
// tasks after DueWatches commits, so two replicas' rounds at once could each spend an
// organization's monthly cap.
const lockWatchRound = lockBase | 0x21

// HoldWatchScheduler makes this replica the one scheduling watches until release is
// called, or reports false when another replica is: its session's advisory lock is
// released with release, or with the connection should the process die.
func (db *DB) HoldWatchScheduler(ctx context.Context) (release func(), ok bool, err error) {
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return nil, false, db.readChecked(err)
	}
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, lockWatchRound).Scan(&ok); err != nil || !ok {
		conn.Release()
		return nil, false, db.readChecked(err)
	}
	return func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, lockWatchRound); err != nil {
			conn.Conn().Close(context.WithoutCancel(ctx)) // closing the session releases its locks
		}
		conn.Release()
	}, true, nil
}
