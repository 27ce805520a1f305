package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
)

// listeningWithin waits until db's key cache is in use: its LISTEN connection made.
func listeningWithin(t *testing.T, db *DB, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); db.KeyCache() == nil; {
		if time.Now().After(end) {
			t.Fatalf("no key cache after %v", d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// refusedWithin authenticates plain on db until it is refused, and returns how long
// that took; it fails t after d.
func refusedWithin(t *testing.T, db *DB, plain string, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		_, err := facade(db).Authenticate(context.Background(), plain)
		if enrich.KindOf(err) == enrich.KindUnauthorized {
			return time.Since(start)
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Since(start) > d {
			t.Fatalf("the key still works after %v", d)
		}
		time.Sleep(time.Millisecond)
	}
}

// cachedOn authenticates plain on db twice and checks that the second was answered
// from the cache, reading nothing.
func cachedOn(t *testing.T, db *DB, plain string) {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	_, err := facade(db).Authenticate(ctx, plain)
	is.NoErr(err)
	reads := db.keys.Reads()
	_, err = facade(db).Authenticate(ctx, plain)
	is.NoErr(err)
	is.Equal(db.keys.Reads(), reads) // answered from the cache
}

func TestRevokeThroughOneReplicaEmptiesTheOthersKeyCache(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := migratedDSN(t)
	c := &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	a, b := openTest(t, dsn, c), openTest(t, dsn, c)
	plain, key, err := facade(a).CreateKey(ctx, store.BySystem, "acme", "ci", true)
	is.NoErr(err)
	other, _, err := facade(a).CreateKey(ctx, store.BySystem, "acme", "other", false)
	is.NoErr(err)
	listeningWithin(t, a, 10*time.Second)
	listeningWithin(t, b, 10*time.Second)
	cachedOn(t, a, plain)
	cachedOn(t, b, plain)
	cachedOn(t, b, other)

	is.NoErr(facade(a).RevokeKey(ctx, store.BySystem, "acme", key.Prefix))
	// Through a, refused at once; on b, once b hears the commit's NOTIFY.
	_, err = facade(a).Authenticate(ctx, plain)
	is.Equal(enrich.KindOf(err), enrich.KindUnauthorized)
	took := refusedWithin(t, b, plain, 5*time.Second)
	t.Logf("refused on the other replica after %v", took)
	// The other key still works, read again once.
	reads := b.keys.Reads()
	_, err = facade(b).Authenticate(ctx, other)
	is.NoErr(err)
	is.Equal(b.keys.Reads(), reads+1)
}

func TestRevokeByHandInPsqlEmptiesEveryKeyCache(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := migratedDSN(t)
	c := &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	a := openTest(t, dsn, c)
	plain, key, err := facade(a).CreateKey(ctx, store.BySystem, "acme", "ci", true)
	is.NoErr(err)
	deleted, _, err := facade(a).CreateKey(ctx, store.BySystem, "acme", "deleted", false)
	is.NoErr(err)
	listeningWithin(t, a, 10*time.Second)
	cachedOn(t, a, plain)
	cachedOn(t, a, deleted)

	conn, err := pgx.Connect(ctx, dsn)
	is.NoErr(err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `UPDATE api_keys SET revoked_at = 1 WHERE id = $1`, key.ID)
	is.NoErr(err)
	refusedWithin(t, a, plain, 5*time.Second)
	_, err = conn.Exec(ctx, `DELETE FROM api_keys WHERE name = 'deleted'`)
	is.NoErr(err)
	refusedWithin(t, a, deleted, 5*time.Second)
}

func TestKeyUseWritesDoNotEmptyTheKeyCache(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := migratedDSN(t)
	c := &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	a := openTest(t, dsn, c)
	plain, _, err := facade(a).CreateKey(ctx, store.BySystem, "acme", "ci", true)
	is.NoErr(err)
	listeningWithin(t, a, 10*time.Second)
	cachedOn(t, a, plain)
	a.touches.Wait()
	reads := a.keys.Reads()
	for range 3 {
		c.Add(time.Minute) // each use a minute on writes last_used_at
		_, err = facade(a).Authenticate(ctx, plain)
		is.NoErr(err)
		a.touches.Wait()
	}
	is.Equal(a.touches.Started(), int64(4))
	time.Sleep(100 * time.Millisecond) // a NOTIFY, had there been one, is heard by now
	_, err = facade(a).Authenticate(ctx, plain)
	is.NoErr(err)
	is.Equal(a.keys.Reads(), reads) // no write of a last use emptied it
}

// A replica whose LISTEN connection is lost keeps no cache: while it is being made
// again every request reads its key, so a revoke it could not hear still takes effect
// at once, and the cache starts empty once it is back.
func TestLostListenConnectionTurnsTheKeyCacheOff(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := migratedDSN(t)
	c := &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	a := openTest(t, dsn, c)
	plain, key, err := facade(a).CreateKey(ctx, store.BySystem, "acme", "ci", true)
	is.NoErr(err)
	listeningWithin(t, a, 10*time.Second)
	cachedOn(t, a, plain)

	conn, err := pgx.Connect(ctx, dsn)
	is.NoErr(err)
	defer conn.Close(ctx)
	// Stop a's LISTEN connection from being made again, then cut it.
	adminCfg, err := pgx.ParseConfig(dsn)
	is.NoErr(err)
	adminCfg.Database = "postgres"
	admin, err := pgx.ConnectConfig(ctx, adminCfg)
	is.NoErr(err)
	defer admin.Close(ctx)
	allow := func(yes bool) error {
		_, err := admin.Exec(context.Background(), fmt.Sprintf(`ALTER DATABASE %s ALLOW_CONNECTIONS %t`,
			pgx.Identifier{conn.Config().Database}.Sanitize(), yes))
		return err
	}
	is.NoErr(allow(false))
	t.Cleanup(func() { allow(true) })
	_, err = conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()`, listenApplication)
	is.NoErr(err)
	for end := time.Now().Add(5 * time.Second); a.KeyCache() != nil; {
		if time.Now().After(end) {
			t.Fatal("the key cache is still in use without its LISTEN connection")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Revoked unheard: refused at once all the same, the key read from the database.
	_, err = conn.Exec(ctx, `UPDATE api_keys SET revoked_at = 1 WHERE id = $1`, key.ID)
	is.NoErr(err)
	_, err = facade(a).Authenticate(ctx, plain)
	is.Equal(enrich.KindOf(err), enrich.KindUnauthorized)

	is.NoErr(allow(true))
	listeningWithin(t, a, 10*time.Second)
	_, err = facade(a).Authenticate(ctx, plain)
	is.Equal(enrich.KindOf(err), enrich.KindUnauthorized)
}

// A quiet LISTEN connection is pinged, which keeps the cache in use past
// keyCacheTrust without a notification.
func TestQuietListenConnectionKeepsTheKeyCacheByItsPings(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	a, _ := newTestDB(t)
	plain, _, err := facade(a).CreateKey(ctx, store.BySystem, "acme", "ci", true)
	is.NoErr(err)
	listeningWithin(t, a, 10*time.Second)
	cachedOn(t, a, plain)
	time.Sleep(keyCacheTrust + listenPing)
	is.True(a.KeyCache() != nil)
	reads := a.keys.Reads()
	_, err = facade(a).Authenticate(ctx, plain)
	is.NoErr(err)
	is.Equal(a.keys.Reads(), reads) // still answered from the cache
}
