package postgres

import (
	"context"
	"testing"
	"time"

	"enrichd/store"

	"github.com/matryer/is"
)

// TestOneReplicaPurgesSessionsAtATime: while another replica's purge holds its lock,
// PurgeSessions deletes nothing and returns 0; once it is done, the purge runs.
func TestOneReplicaPurgesSessionsAtATime(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	pg, c := newTestDB(t)
	db := facade(pg)
	_, err := db.CreateOrg(ctx, "acme")
	is.NoErr(err)
	u, _, err := db.CreateUser(ctx, store.BySystem, "acme", "jane@acme.com", "")
	is.NoErr(err)
	_, err = db.CreateSession(ctx, store.BySystem, u.ID, time.Hour)
	is.NoErr(err)
	c.Add(2 * store.SetupLinkTTL)

	other, err := pg.pool.Begin(ctx)
	is.NoErr(err)
	defer other.Rollback(ctx) // a failure below must not leave the pool waiting on it
	ok, err := exec{q: other}.Hold(ctx, store.LockSessionPurge, false)
	is.NoErr(err)
	is.True(ok)
	n, err := db.PurgeSessions(ctx, time.Hour)
	is.NoErr(err)
	is.Equal(n, 0) // the other replica is at it
	is.NoErr(other.Rollback(ctx))

	n, err = db.PurgeSessions(ctx, time.Hour)
	is.NoErr(err)
	is.Equal(n, 2) // the ended session and the expired set-password link
}
