package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Heartbeat records that the replica replicaID is alive for ttl from now, forgets the
// replicas whose last heartbeat has run out, and returns how many are alive, this one
// included. A replica calls it every ttl/3 or so; the server divides each API key's
// rate limit by the count, so that N replicas behind a load balancer admit together
// about what one would. A replica that dies keeps its share until its row expires:
// for up to ttl the others admit a little less than the limit, never more.
func (db *DB) Heartbeat(ctx context.Context, replicaID string, ttl time.Duration) (live int, err error) {
	if replicaID == "" || ttl <= 0 {
		return 0, fmt.Errorf("a heartbeat needs a replica id and a positive ttl")
	}
	err = db.inTx(ctx, func(tx *pipe) error {
		now := ms(db.now())
		if _, err := tx.Exec(ctx, `INSERT INTO replicas (id, expires_at) VALUES ($1, $2)
			ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at`, replicaID, now+ttl.Milliseconds()); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM replicas WHERE expires_at <= $1`, now); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT count(*) FROM replicas WHERE expires_at > $1`, now).Scan(&live)
	})
	return live, err
}

// LiveReplicas returns the replicas whose last heartbeat has not run out: those that
// are alive, as far as the database can tell. An ask on the books of any other is one
// whose process is gone (store.DB.SettleDeadSourceAsks).
func (db *DB) LiveReplicas(ctx context.Context) ([]string, error) {
	rows, err := db.pool.Query(ctx, liveReplicasQuery, ms(db.now()))
	if err != nil {
		return nil, db.readChecked(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return ids, db.readChecked(err)
}

const liveReplicasQuery = `SELECT id FROM replicas WHERE expires_at > $1`
