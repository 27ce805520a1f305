package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"
	"enrichd/store/storetest"

	"github.com/matryer/is"
)

func lastUsed(t *testing.T, db *store.DB, org, keyID string) *time.Time {
	t.Helper()
	engine(db).WaitKeyTouches()
	keys, err := db.ListKeys(context.Background(), org)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.ID == keyID {
			return k.LastUsedAt
		}
	}
	t.Fatalf("no key %s", keyID)
	return nil
}

// TestKeyLastUseIsWrittenOnceAMinute authenticates over and over while the clock
// moves: the key's last use is written when it is a minute old, and not otherwise.
func TestKeyLastUseIsWrittenOnceAMinute(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, _, clk := openDB(t)
	plain, key, err := db.CreateKey(ctx, store.BySystem, "acme", "ci", true)
	is.NoErr(err)
	_, other, err := db.CreateKey(ctx, store.BySystem, "acme", "unused", false)
	is.NoErr(err)
	is.Equal(lastUsed(t, db, "acme", key.ID), nil) // never used

	t0 := clk.Now()
	auth := func(times int) {
		t.Helper()
		for range times {
			p, err := db.Authenticate(ctx, plain)
			is.NoErr(err)
			is.Equal(p.KeyID, key.ID)
		}
		engine(db).WaitKeyTouches()
	}
	auth(5)
	is.Equal(*lastUsed(t, db, "acme", key.ID), t0)
	is.Equal(engine(db).KeyTouchesStarted(), int64(1)) // five requests, one write

	clk.Add(59 * time.Second)
	auth(5)
	is.Equal(*lastUsed(t, db, "acme", key.ID), t0) // fresh: not written again
	is.Equal(engine(db).KeyTouchesStarted(), int64(1))

	clk.Add(time.Second)
	auth(5)
	is.Equal(*lastUsed(t, db, "acme", key.ID), t0.Add(time.Minute))
	is.Equal(engine(db).KeyTouchesStarted(), int64(2))

	clk.Add(10 * time.Minute)
	auth(1)
	is.Equal(*lastUsed(t, db, "acme", key.ID), t0.Add(11*time.Minute))
	is.Equal(lastUsed(t, db, "acme", other.ID), nil) // only the key used

	// A revoked key is refused and its use not recorded.
	is.NoErr(db.RevokeKey(ctx, store.BySystem, "acme", key.ID))
	clk.Add(time.Hour)
	_, err = db.Authenticate(ctx, plain)
	is.Equal(enrich.KindOf(err), enrich.KindUnauthorized)
	is.Equal(*lastUsed(t, db, "acme", key.ID), t0.Add(11*time.Minute))
}

// TestKeyLastUseManyAtOnce authenticates with one key from many goroutines at the
// minute's turn: every request passes and the key's last use is the new minute.
func TestKeyLastUseManyAtOnce(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, _, clk := openDB(t)
	plain, key, err := db.CreateKey(ctx, store.BySystem, "acme", "", true)
	is.NoErr(err)
	errs := make(chan error, 64)
	for range cap(errs) {
		go func() {
			_, err := db.Authenticate(ctx, plain)
			errs <- err
		}()
	}
	for range cap(errs) {
		is.NoErr(<-errs)
	}
	is.Equal(*lastUsed(t, db, "acme", key.ID), clk.Now())
	is.True(engine(db).KeyTouchesStarted() < int64(cap(errs))) // requests under way share a write
}

// TestKeyLastUseFailureDoesNotFailAuthentication makes the write of the last use fail:
// requests are still authenticated, and a later one writes it once the write works.
func TestKeyLastUseFailureDoesNotFailAuthentication(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, path, clk := openDB(t)
	plain, key, err := db.CreateKey(ctx, store.BySystem, "acme", "", true)
	is.NoErr(err)
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	is.NoErr(err)
	defer raw.Close()
	_, err = raw.Exec(`CREATE TRIGGER refuse_last_use BEFORE UPDATE OF last_used_at ON api_keys BEGIN SELECT RAISE(ABORT, 'refused'); END`)
	is.NoErr(err)

	for range 3 {
		p, err := db.Authenticate(ctx, plain)
		is.NoErr(err)
		is.Equal(p.KeyID, key.ID)
		engine(db).WaitKeyTouches()
	}
	is.Equal(lastUsed(t, db, "acme", key.ID), nil)
	is.Equal(engine(db).KeyTouchesStarted(), int64(3)) // still stale: each request tried again

	_, err = raw.Exec(`DROP TRIGGER refuse_last_use`)
	is.NoErr(err)
	clk.Add(time.Second)
	_, err = db.Authenticate(ctx, plain)
	is.NoErr(err)
	is.Equal(*lastUsed(t, db, "acme", key.ID), clk.Now())
}

// TestCreditDaysBackfillAndTrigger opens a database made before migration 7 holding a
// ledger over several days: the migration adds up what is there, and the trigger
// then keeps the sums with every row appended.
func TestCreditDaysBackfillAndTrigger(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	schema := storetest.Schema(t)
	before, _, ok := strings.Cut(schema, "\n-- migration 7:")
	is.True(ok)
	path := filepath.Join(t.TempDir(), "enrichd.db")
	clk := storetest.NewClock(time.Date(2026, 11, 1, 22, 0, 0, 0, time.UTC))

	old, err := store.Open(ctx, path, before)
	is.NoErr(err)
	old.Now = clk.Now
	// The old file gets its ledger without tasks: the code writes tasks as the newest
	// schema has them.
	clk.Add(4 * time.Hour) // two in the morning: the last 4 hours cross midnight
	for _, name := range []string{"acme", "other"} {
		org, err := old.CreateOrg(ctx, name)
		is.NoErr(err)
		grant, err := old.GrantCredits(ctx, name, 50, nil)
		is.NoErr(err)
		is.NoErr(old.SeedLedger(ctx, org.ID, grant, 20, 4*time.Hour)) // charges, and a refund each day
	}
	is.NoErr(old.Close())

	workload := func(db *store.DB) {
		t.Helper()
		for _, name := range []string{"acme", "other"} {
			org, err := db.FindOrg(ctx, name)
			if enrich.KindOf(err) == enrich.KindNotFound {
				org, err = db.CreateOrg(ctx, name)
			}
			is.NoErr(err)
			exp := clk.Now().Add(3 * time.Hour)
			_, err = db.GrantCredits(ctx, name, 5, &exp)
			is.NoErr(err)
			for i := range 4 {
				e, err := db.CreateTask(ctx, store.BySystem, newTask(org.ID, name+clk.Now().Format("150405")+string(rune('a'+i))+".com"))
				is.NoErr(err)
				if i%2 == 0 {
					_, err = db.CancelTask(ctx, org.ID, e.Task.ID)
					is.NoErr(err)
				}
				clk.Add(50 * time.Minute) // across midnight
			}
		}
	}
	db := storetest.Open(t, path, clk)
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	is.NoErr(err)
	defer raw.Close()
	fromLedger, kept := storetest.CreditSums(t, raw)
	is.True(len(fromLedger) >= 7) // two organizations, three kinds, across midnight
	is.Equal(kept, fromLedger)

	workload(db)
	clk.Add(24 * time.Hour)
	_, err = db.CreditBalance(ctx, "acme") // expiry rows
	is.NoErr(err)
	fromLedger, kept = storetest.CreditSums(t, raw)
	is.Equal(kept, fromLedger)
	is.True(strings.Contains(strings.Join(keys(kept), " "), "/expiry/"))
}

func keys(m map[string]int64) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
