// Package storetest gives tests a real enrichd database: a file in the test's temp
// directory with the schema applied, on a clock the test moves.
package storetest

import (
	"context"
	_ "enrichd/store/postgres" // the engine several replicas share
	_ "enrichd/store/sqlite"   // the default engine
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"enrichd/store"
)

// Schema returns the text of the repository's schema.sql.
func Schema(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "schema.sql"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// SubjectKey is the subject key tests open their databases with (store.WithSubjectKey):
// the same for every handle, as one key file is for every replica.
var SubjectKey = []byte("enrichd tests' subject key, 32 b")

// Open opens the database file at path on clock, and closes it when the test ends.
func Open(t testing.TB, path string, clock *Clock) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), path, Schema(t), store.WithSubjectKey(SubjectKey))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.Now = clock.Now
	return db
}

// Clock is a clock that moves only when told to.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock standing at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Add moves the clock forward by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
