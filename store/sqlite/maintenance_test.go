package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"
	"enrichd/store/sqlite"
	"enrichd/store/storetest"

	"github.com/matryer/is"
)

// ledgerAddsUp is storetest.LedgerAddsUp on the database file at path (a backup).
func ledgerAddsUp(t *testing.T, path, orgID string) int64 {
	t.Helper()
	raw, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	return storetest.LedgerAddsUp(t, raw, orgID)
}

// TestBackupUnderWriteLoad copies the database while goroutines keep creating,
// settling and granting through the store: the copy passes integrity_check, its ledger
// adds up, and it holds at least what was written before the copy began.
func TestBackupUnderWriteLoad(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, path, _ := openDB(t)
	org := newOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 1_000_000, nil)
	is.NoErr(err)

	var written atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				switch i % 3 {
				case 0, 1:
					_, err = db.CreateTask(ctx, store.BySystem, newTask(org, fmt.Sprintf("w%d-%d.com", w, i)))
				case 2:
					var c *store.Claim
					if c, err = db.ClaimTask(ctx, time.Minute); c != nil && err == nil {
						_, err = db.Settle(ctx, c, store.Outcome{Err: &enrich.TaskError{Code: enrich.CodeNotFound, Message: "no"}})
					}
				}
				if err != nil {
					errs <- err
					return
				}
				written.Add(1)
			}
		}()
	}
	for written.Load() < 200 { // the copy starts with writes behind it and around it
		time.Sleep(time.Millisecond)
	}
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	is.NoErr(err)
	defer raw.Close()
	var before int64
	is.NoErr(raw.QueryRow(`SELECT count(*) FROM tasks`).Scan(&before))
	dir := t.TempDir()
	to := filepath.Join(dir, "copy.db")
	is.NoErr(db.Backup(ctx, to, false))
	again := filepath.Join(dir, "again.db")
	is.NoErr(db.Backup(ctx, again, false))
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a writer failed during the backup: %v", err)
	}

	for _, copyPath := range []string{to, again} {
		is.NoErr(sqlite.CheckIntegrity(ctx, copyPath))
		st, err := os.Stat(copyPath)
		is.NoErr(err)
		is.Equal(st.Mode().Perm(), os.FileMode(0o600)) // it holds the secrets too
		ledgerAddsUp(t, copyPath, org)
		copied := storetest.Open(t, copyPath, storetest.NewClock(time.Now()))
		_, total, err := copied.ListTasks(ctx, org, "", 0, 1)
		is.NoErr(err)
		is.True(total >= before) // everything committed before the copy is in it
	}
	leftovers, err := filepath.Glob(filepath.Join(dir, ".*"))
	is.NoErr(err)
	is.Equal(len(leftovers), 0) // no temporary file is left behind
}

func TestBackupRefusesToOverwrite(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, _, _ := openDB(t)
	newOrg(t, db, "acme")
	to := filepath.Join(t.TempDir(), "copy.db")
	is.NoErr(os.WriteFile(to, []byte("keep me"), 0o600))

	err := db.Backup(ctx, to, false)
	is.True(errors.Is(err, store.ErrBackupExists))
	kept, err := os.ReadFile(to)
	is.NoErr(err)
	is.Equal(string(kept), "keep me") // untouched

	is.NoErr(db.Backup(ctx, to, true)) // --force replaces it
	is.NoErr(sqlite.CheckIntegrity(ctx, to))
	copied := storetest.Open(t, to, storetest.NewClock(time.Now()))
	_, err = copied.FindOrg(ctx, "acme")
	is.NoErr(err)
}

func TestBackupRefusesTheDatabaseItself(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, path, _ := openDB(t)
	newOrg(t, db, "acme")
	for _, to := range []string{path, path + "-wal"} {
		err := db.Backup(ctx, to, true)
		is.True(err != nil && strings.Contains(err.Error(), "the database itself"))
	}
	_, err := db.FindOrg(ctx, "acme") // untouched
	is.NoErr(err)
}

func TestReadinessChecks(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, path, _ := openDB(t)
	is.NoErr(db.CheckWritable(ctx))
	applied, known, err := db.Migrations(ctx)
	is.NoErr(err)
	is.True(known >= 5)
	is.Equal(applied, known)

	// A write lock held by another connection makes the probe fail once its context
	// ends, instead of waiting out the busy timeout.
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	is.NoErr(err)
	defer raw.Close()
	conn, err := raw.Conn(ctx)
	is.NoErr(err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, `BEGIN IMMEDIATE`)
	is.NoErr(err)
	time.Sleep(1100 * time.Millisecond) // the probe that committed is shared for a second
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	is.True(db.CheckWritable(short) != nil)
	_, err = conn.ExecContext(ctx, `ROLLBACK`)
	is.NoErr(err)
	is.NoErr(db.CheckWritable(ctx))

	// A file migrated further by a newer binary is not this binary's schema.
	_, err = raw.Exec(`INSERT INTO schema_migrations (version, title, applied_at) VALUES (?, 'from the future', 0)`, known+1)
	is.NoErr(err)
	applied, known2, err := db.Migrations(ctx)
	is.NoErr(err)
	is.Equal(known2, known)
	is.Equal(applied, known+1)
}

// TestQueueDepthReadsTheCounts checks that the depth /metrics shows comes from the
// per-organization counts, a table of a few rows, and agrees with the tasks.
func TestQueueDepthReadsTheCounts(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, path, _ := openDB(t)
	for _, name := range []string{"acme", "globex"} {
		org := newOrg(t, db, name)
		_, err := db.GrantCredits(ctx, name, 10, nil)
		is.NoErr(err)
		for _, d := range []string{"a.com", "b.com", "c.com"} {
			_, err := db.CreateTask(ctx, store.BySystem, newTask(org, d))
			is.NoErr(err)
		}
	}
	c, err := db.ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	queued, running, err := db.QueueDepth(ctx)
	is.NoErr(err)
	is.Equal(queued, int64(5))
	is.Equal(running, int64(1))
	_, err = db.Settle(ctx, c, store.Outcome{Err: &enrich.TaskError{Code: enrich.CodeNotFound, Message: "no"}})
	is.NoErr(err)
	queued, running, err = db.QueueDepth(ctx)
	is.NoErr(err)
	is.Equal([]int64{queued, running}, []int64{5, 0})

	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	is.NoErr(err)
	defer raw.Close()
	var id, parent, notused int
	var plan string
	is.NoErr(raw.QueryRow(`EXPLAIN QUERY PLAN SELECT coalesce(sum(CASE status WHEN 'queued' THEN n END), 0),
		coalesce(sum(CASE status WHEN 'running' THEN n END), 0) FROM task_counts`).Scan(&id, &parent, &notused, &plan))
	is.Equal(plan, "SCAN task_counts") // the counts, never the tasks
}

// TestRetentionQueryPlans: the purges of stored records and of what email lookups
// gathered find the oldest through an index that holds what they may delete, and
// delete each row's keys, positions and candidates through their own indexes: none
// reads a whole table or sorts.
func TestRetentionQueryPlans(t *testing.T) {
	_, path, _ := openDB(t)
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	wants := map[string][]string{
		"PurgeRecords":       {"SEARCH records USING COVERING INDEX records_store_enriched (last_enriched_at<?)"},
		"PurgeRecordKeys":    {"SEARCH record_keys USING INDEX record_keys_record (record_id=?)"},
		"PurgePositions":     {"SEARCH positions USING PRIMARY KEY (record_id=?)"},
		"PurgeRecordRows":    {"SEARCH records USING INTEGER PRIMARY KEY (rowid=?)"},
		"PurgeGatherings":    {"SEARCH email_gatherings USING COVERING INDEX email_gatherings_gathered (gathered_at<?)"},
		"PurgeCandidates":    {"SEARCH email_candidates USING PRIMARY KEY (address=?)"},
		"PurgeGatheringRows": {"SEARCH email_gatherings USING PRIMARY KEY (address=?)"},
	}
	for name, q := range store.RetentionQueries() {
		if plan := explain(t, raw, sqlite.Unlocked(q.Query), q.Args...); !slices.Equal(plan, wants[name]) {
			t.Errorf("%s: plan %q, want %q", name, plan, wants[name])
		}
	}
}
