package postgres

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// testServerEnv names the DSN of a PostgreSQL server where the tests may create
// databases. Without it the tests of this package skip.
const testServerEnv = "ENRICHD_TEST_POSTGRES"

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

// freshDSN creates an empty database for t on the test server, dropped when t ends,
// and returns its DSN; it skips t without a server.
func freshDSN(t testing.TB) string {
	t.Helper()
	server := os.Getenv(testServerEnv)
	if server == "" {
		t.Skipf("no PostgreSQL server: set %s to the DSN of one where databases may be created", testServerEnv)
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatalf("%s: %v", testServerEnv, err)
	}
	name := "enrichd_test_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close(ctx)
		t.Fatalf("creating a test database: %v", err)
	}
	t.Cleanup(func() {
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("dropping the test database %s: %v", name, err)
		}
	})
	cfg, err := pgx.ParseConfig(server)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("postgres://%s:%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Password, cfg.Host, cfg.Port, name)
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
	return openTest(t, freshDSN(t), c), c
}
