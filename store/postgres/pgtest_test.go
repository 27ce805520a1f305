package postgres

import (
	"context"
	"sync"
	"testing"
	"time"

	"enrichd/store/storetest/pgcluster"
)

// testClock is a clock tests move by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestMain(m *testing.M) { pgcluster.Main(m) }

// freshDSN is an empty database for t, dropped when t ends (see pgcluster.URL).
func freshDSN(t testing.TB) string {
	t.Helper()
	return pgcluster.URL(t)
}

// migratedDSN is a database for t as Open leaves an empty one, dropped when t ends: a
// copy of one this process migrates once, which takes a fraction of a migration's time.
func migratedDSN(t testing.TB) string {
	t.Helper()
	return pgcluster.Copy(t, "postgres driver", func(ctx context.Context, dsn string) error {
		db, err := Open(ctx, dsn, nil)
		if err != nil {
			return err
		}
		return db.Close()
	})
}

// openTest opens a DB on dsn with clock c, closed when t ends.
func openTest(t testing.TB, dsn string, c *testClock) *DB {
	t.Helper()
	db, err := Open(context.Background(), dsn, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// newTestDB is a DB on a fresh database, its clock at a fixed time.
func newTestDB(t testing.TB) (*DB, *testClock) {
	t.Helper()
	c := &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	return openTest(t, migratedDSN(t), c), c
}
