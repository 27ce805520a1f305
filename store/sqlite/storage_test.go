package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"
	"enrichd/store/storetest"

	"github.com/matryer/is"
)

// A full disk: a write fails as storage_unavailable (a 503, not an internal error),
// undoes all of itself, marks the database as failing, and the probe write that
// readiness and waiting workers make fails too; once space is back the probe commits
// and ends the failure.
func TestStorageFullDiskIsUnavailable(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dir := storetest.MountTmpfs(t, "8m")
	clk := storetest.NewClock(time.Now().UTC())
	db := storetest.Open(t, filepath.Join(dir, "enrichd.db"), clk)
	org := newOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 10, nil)
	is.NoErr(err)
	is.NoErr(db.CheckWritable(ctx))
	is.True(!db.StorageFailing())

	filler := storetest.FillDisk(t, dir)
	_, err = db.CreateTask(ctx, store.BySystem, newTask(org, "full.example"))
	is.True(err != nil)
	is.True(store.IsStorageFault(err))
	is.Equal(enrich.KindOf(err), enrich.KindUnavailable)
	var e *enrich.Error
	is.True(errors.As(err, &e))
	is.Equal(e.Code, store.CodeStorageUnavailable)
	is.Equal(e.RetryAfter, store.StorageRetryAfter)
	is.True(db.StorageFailing())
	is.True(db.StorageFailures() >= 1)

	// Nothing of the task was kept: no charge, no task, no idempotency key.
	b, err := db.CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(b.Balance, int64(10))
	is.Equal(b.Charged, int64(0))
	queued, running, err := db.QueueDepth(ctx)
	is.NoErr(err)
	is.Equal(queued+running, int64(0))

	// Taking the write lock alone would succeed; the probe commits a write, and fails.
	err = db.CheckWritable(ctx)
	is.True(err != nil)
	is.True(!db.Writable(ctx))

	is.NoErr(os.Remove(filler))
	deadline := time.Now().Add(10 * time.Second)
	for !db.Writable(ctx) { // a failed probe is reused for a second
		if time.Now().After(deadline) {
			t.Fatal("the database did not take writes again once space was freed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	is.True(!db.StorageFailing())
	res, err := db.CreateTask(ctx, store.BySystem, newTask(org, "full.example"))
	is.NoErr(err)
	is.Equal(res.Task.CreditsCharged, int64(1))
}

// Errors that are not the file's fault stay what they were.
func TestStorageFaultsAreOnlyStorage(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, _, _ := openDB(t)
	_, err := db.CreateOrg(ctx, "acme")
	is.NoErr(err)
	_, err = db.CreateOrg(ctx, "acme") // a conflict, not a storage fault
	is.True(err != nil)
	is.True(!store.IsStorageFault(err))
	is.True(!db.StorageFailing())
	is.Equal(db.StorageFailures(), uint64(0))
}

// Any write that commits a change ends a failure, not only a probe: once space is
// back, the first write that goes through clears StorageFailing and logs one line
// saying so.
func TestStorageWriteEndsFailure(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dir := storetest.MountTmpfs(t, "8m")
	clk := storetest.NewClock(time.Now().UTC())
	db := storetest.Open(t, filepath.Join(dir, "enrichd.db"), clk)
	var logs strings.Builder
	var mu sync.Mutex
	db.SetLogger(slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil)))
	org := newOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 10, nil)
	is.NoErr(err)

	filler := storetest.FillDisk(t, dir)
	_, err = db.CreateTask(ctx, store.BySystem, newTask(org, "full.example"))
	is.True(store.IsStorageFault(err))
	is.True(db.StorageFailing())

	is.NoErr(os.Remove(filler))
	_, err = db.CreateTask(ctx, store.BySystem, newTask(org, "back.example")) // no probe in between
	is.NoErr(err)
	is.True(!db.StorageFailing())
	_, err = db.CreateTask(ctx, store.BySystem, newTask(org, "again.example"))
	is.NoErr(err)
	mu.Lock()
	defer mu.Unlock()
	is.Equal(strings.Count(logs.String(), "the database takes writes again"), 1)
}

// A probe that committed is reused for a second, as a failed one is: a flood of
// readiness checks costs at most one write a second.
func TestStorageProbeIsShared(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, path, _ := openDB(t)
	// Count the probes' commits from outside: a trigger on the probe's row.
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	is.NoErr(err)
	defer raw.Close()
	_, err = raw.ExecContext(ctx, `CREATE TABLE probes (n INTEGER NOT NULL);
		INSERT INTO probes VALUES (0);
		CREATE TRIGGER count_probes AFTER INSERT ON schema_migrations WHEN new.version = 0
		BEGIN UPDATE probes SET n = n + 1; END;`)
	is.NoErr(err)

	start := time.Now()
	for range 200 {
		is.NoErr(db.CheckWritable(ctx))
	}
	elapsed := time.Since(start)
	var n int
	is.NoErr(raw.QueryRowContext(ctx, `SELECT n FROM probes`).Scan(&n))
	is.True(n >= 1)
	if limit := 1 + int(elapsed/time.Second) + 1; n > limit {
		t.Fatalf("%d probe writes for 200 checks in %s: at most %d expected", n, elapsed, limit)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
