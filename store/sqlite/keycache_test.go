package sqlite_test

import (
	"context"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"
	"enrichd/store/storetest"

	"github.com/matryer/is"
)

// TestAuthenticateReadsAKeyOnce: a key is read from the database once, then answered
// from memory, and a revoke in this process takes effect on the next request.
func TestAuthenticateReadsAKeyOnce(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, _, _ := openDB(t)
	plain, key, err := db.CreateKey(ctx, store.BySystem, "acme", "ci", true)
	is.NoErr(err)
	for range 5 {
		p, err := db.Authenticate(ctx, plain)
		is.NoErr(err)
		is.Equal(p.KeyID, key.ID)
	}
	is.Equal(engine(db).KeyReads(), int64(1))

	_, err = db.Authenticate(ctx, "enr_nosuchkey")
	is.Equal(enrich.KindOf(err), enrich.KindUnauthorized)
	_, err = db.Authenticate(ctx, "enr_nosuchkey")
	is.Equal(enrich.KindOf(err), enrich.KindUnauthorized)
	is.Equal(engine(db).KeyReads(), int64(3)) // an unknown key is not kept

	is.NoErr(db.RevokeKey(ctx, store.BySystem, "acme", key.ID))
	_, err = db.Authenticate(ctx, plain)
	is.Equal(enrich.KindOf(err), enrich.KindUnauthorized)
	_, err = db.Authenticate(ctx, plain)
	is.Equal(enrich.KindOf(err), enrich.KindUnauthorized) // a revoked key is not kept either
}

// TestARevokeFromAnotherProcessTakesEffect: `enrichd keys revoke` runs in a process of
// its own, on the same file; the serving process, which holds the key in memory, must
// refuse it within about a second. data_version counts per connection, so that holds
// too when the revoke lands just after the writer's connection was opened anew (as a
// write refused as read-only makes it).
func TestARevokeFromAnotherProcessTakesEffect(t *testing.T) {
	for _, c := range []struct {
		name   string
		before func(t *testing.T, serving *store.DB)
	}{
		{"steady", func(*testing.T, *store.DB) {}},
		{"after the writer reopens", func(t *testing.T, serving *store.DB) {
			engine(serving).ReopenWriter()
			// The writer closes its connection after this batch.
			if _, err := serving.CreateOrg(context.Background(), "other"); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			serving, path, clk := openDB(t)
			plain, key, err := serving.CreateKey(ctx, store.BySystem, "acme", "ci", true)
			is.NoErr(err)
			_, err = serving.Authenticate(ctx, plain)
			is.NoErr(err)

			cli := storetest.Open(t, path, clk) // the CLI process, on the file already
			c.before(t, serving)
			is.NoErr(cli.RevokeKey(ctx, store.BySystem, "acme", key.ID))
			is.NoErr(cli.Close())

			// The poll runs every half second; a loaded machine gets a generous margin.
			deadline := time.Now().Add(10 * time.Second)
			for {
				_, err := serving.Authenticate(ctx, plain)
				if enrich.KindOf(err) == enrich.KindUnauthorized {
					break
				}
				is.NoErr(err)
				if time.Now().After(deadline) {
					t.Fatal("the serving process still accepts a key another process revoked")
				}
				time.Sleep(20 * time.Millisecond)
			}
			is.True(engine(serving).KeyReads() >= 2) // the key was read again, not answered from memory
		})
	}
}

// TestASuppressionCheckReadsTheListOnce: an organization's suppressions are read once,
// then checked in memory, and a change in this process is seen by the next check.
func TestASuppressionCheckReadsTheListOnce(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, _, _ := openDB(t)
	org, err := db.CreateOrg(ctx, "acme")
	is.NoErr(err)
	jane := enrich.Subject{Kind: enrich.SubjectEmail, Value: "jane@acme.com"}
	for range 100 {
		_, suppressed, err := db.Suppressed(ctx, org.ID, jane)
		is.NoErr(err)
		is.True(!suppressed)
	}
	cache := db.SuppressionCache()
	is.Equal(cache.Loads(), int64(1))
	s, err := db.AddSuppression(ctx, store.BySystem, store.NewSuppression{OrgID: org.ID, Subject: jane, AddedBy: store.AddedBy{Kind: store.AddedByCLI}})
	is.NoErr(err)
	_, suppressed, err := db.Suppressed(ctx, org.ID, jane)
	is.NoErr(err)
	is.True(suppressed)
	is.Equal(cache.Loads(), int64(2))
	_, err = db.DeleteSuppression(ctx, store.BySystem, org.ID, s.ID)
	is.NoErr(err)
	_, suppressed, err = db.Suppressed(ctx, org.ID, jane)
	is.NoErr(err)
	is.True(!suppressed)
}
