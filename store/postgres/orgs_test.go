package postgres

import (
	"context"
	"sync"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/matryer/is"
)

func TestKeysAuthenticateAndRevokeAcrossReplicas(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := migratedDSN(t)
	c := &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	a, b := openTest(t, dsn, c), openTest(t, dsn, c)
	plain, key, err := facade(a).CreateKey(ctx, store.BySystem, "acme", "ci", true)
	is.NoErr(err)
	p, err := facade(b).Authenticate(ctx, plain)
	is.NoErr(err)
	is.Equal(p.KeyID, key.ID)
	b.touches.Wait()
	keys, err := facade(a).ListKeys(ctx, "acme")
	is.NoErr(err)
	is.Equal(*keys[0].LastUsedAt, c.Now()) // the first use is written

	// Within the minute no write; after it, one.
	c.Add(30 * time.Second)
	_, err = facade(b).Authenticate(ctx, plain)
	is.NoErr(err)
	c.Add(31 * time.Second)
	_, err = facade(b).Authenticate(ctx, plain)
	is.NoErr(err)
	b.touches.Wait()
	is.Equal(b.touches.Started(), int64(2))
	keys, err = facade(a).ListKeys(ctx, "acme")
	is.NoErr(err)
	is.Equal(*keys[0].LastUsedAt, c.Now())

	// Revoked through one replica, refused by the other once it hears the commit (see
	// TestRevokeThroughOneReplicaEmptiesTheOthersKeyCache).
	is.NoErr(facade(a).RevokeKey(ctx, store.BySystem, "acme", key.Prefix))
	refusedWithin(t, b, plain, 5*time.Second)
	is.Equal(enrich.KindOf(facade(a).RevokeKey(ctx, store.BySystem, "acme", "nope")), enrich.KindNotFound)
}

func TestConcurrentCreateKeyWithNewOrgMakesOneOrg(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := migratedDSN(t)
	c := &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	dbs := []*DB{openTest(t, dsn, c), openTest(t, dsn, c)}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			if _, _, err := facade(dbs[i%2]).CreateKey(ctx, store.BySystem, "acme", "k", true); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	orgs, err := facade(dbs[0]).ListOrgs(ctx)
	is.NoErr(err)
	is.Equal(len(orgs), 1)
	keys, err := facade(dbs[1]).ListKeys(ctx, "acme")
	is.NoErr(err)
	is.Equal(len(keys), 4)
	_, err = facade(dbs[0]).CreateOrg(ctx, "acme")
	is.Equal(errCode(err), "org_exists")
	got, err := facade(dbs[0]).GetOrg(ctx, orgs[0].ID)
	is.NoErr(err)
	is.Equal(got.Name, "acme")
}

func TestUsersLinksAndSessions(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	pg, c := newTestDB(t)
	db := facade(pg)
	_, err := db.CreateOrg(ctx, "acme")
	is.NoErr(err)
	u, link, err := db.CreateUser(ctx, store.BySystem, "acme", " Jane@Acme.com ", store.RoleAdmin)
	is.NoErr(err)
	is.Equal(u.Email, "jane@acme.com")
	_, _, err = db.CreateUser(ctx, store.BySystem, "acme", "JANE@acme.com", "")
	is.Equal(errCode(err), "user_exists")
	_, _, err = db.UserForLogin(ctx, "jane@acme.com")
	is.Equal(enrich.KindOf(err), enrich.KindUnauthorized) // no password yet

	got, err := db.LinkUser(ctx, link)
	is.NoErr(err)
	is.Equal(got.ID, u.ID)
	_, err = db.SetPassword(ctx, link, "$argon2id$x")
	is.NoErr(err)
	_, err = db.SetPassword(ctx, link, "$argon2id$y")
	is.Equal(errCode(err), "link_invalid") // used once
	lu, hash, err := db.UserForLogin(ctx, "JANE@acme.com")
	is.NoErr(err)
	is.Equal(hash, "$argon2id$x")
	is.True(lu.PasswordSet)

	token, err := db.CreateSession(ctx, store.BySystem, u.ID, 12*time.Hour)
	is.NoErr(err)
	su, err := db.SessionUser(ctx, token, time.Hour)
	is.NoErr(err)
	is.Equal(su.OrgName, "acme")
	is.True(su.LastLoginAt != nil)
	c.Add(2 * time.Hour) // idle past the hour
	_, err = db.SessionUser(ctx, token, time.Hour)
	is.Equal(enrich.KindOf(err), enrich.KindUnauthorized)
	n, err := db.PurgeSessions(ctx, time.Hour)
	is.NoErr(err)
	is.Equal(n, 1)

	token, err = db.CreateSession(ctx, store.BySystem, u.ID, 12*time.Hour)
	is.NoErr(err)
	users, err := db.ListUsers(ctx, "")
	is.NoErr(err)
	is.Equal(len(users), 1)
	_, err = db.DisableUser(ctx, "jane@acme.com")
	is.NoErr(err)
	_, err = db.SessionUser(ctx, token, time.Hour)
	is.Equal(enrich.KindOf(err), enrich.KindUnauthorized)
	_, err = db.NewSetupLink(ctx, "jane@acme.com")
	is.Equal(errCode(err), "user_disabled")
	is.NoErr(db.EndSession(ctx, token))
}

func TestHeartbeatCountsLiveReplicas(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, c := newTestDB(t)
	live, err := db.Heartbeat(ctx, "r1", 30*time.Second)
	is.NoErr(err)
	is.Equal(live, 1)
	live, err = db.Heartbeat(ctx, "r2", 30*time.Second)
	is.NoErr(err)
	is.Equal(live, 2)
	c.Add(20 * time.Second)
	live, err = db.Heartbeat(ctx, "r1", 30*time.Second)
	is.NoErr(err)
	is.Equal(live, 2)
	c.Add(15 * time.Second) // r2's row has run out
	live, err = db.Heartbeat(ctx, "r1", 30*time.Second)
	is.NoErr(err)
	is.Equal(live, 1)
}

func TestWakeupsSignalACommittedNotify(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := migratedDSN(t)
	c := &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	a, b := openTest(t, dsn, c), openTest(t, dsn, c)
	wake := b.Wakeups()
	// The listener may not be listening yet: notify until it hears one. A notify of a
	// rolled-back transaction is never delivered, which is what the enqueue relies on.
	// The listener connects within a second or two; past 30 seconds it never will.
	deadline := time.Now().Add(30 * time.Second)
	for {
		is.NoErr(a.inTx(ctx, func(tx *pipe) error { notifyTasks(tx, a.self); return nil }))
		select {
		case <-wake:
			return
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no wakeup in 30 s of committed notifies: the listener does not hear them")
		}
	}
}
