package server_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"enrichd/server/servertest"
	"enrichd/store/storetest"
)

// A database on a 2 MiB volume with nothing else on it, written to while a long read
// holds the write-ahead log until writes are refused for space, twice: once the requests stop, the space the write-ahead log
// held comes back and /readyz answers 200 by itself within a minute, without anyone
// touching the disk, after a restart too; new requests are served, and every task
// accepted settles once. The tasks whose results could not be stored (the disk
// filled while their sources were called) keep them and settle once the disk takes
// writes, without being run again; those a restart left running are requeued once
// their lease has run out.
func TestStorageSmallDiskRecoversByItself(t *testing.T) {
	t.Parallel()
	servertest.SQLiteOnly(t, "storage faults are made on the database file")
	dir := storetest.MountTmpfs(t, "2m")
	e := servertest.NewEnv(t, servertest.DBAt(filepath.Join(dir, "enrichd.db")), twoWorkers)
	e.Key, _ = e.NewOrg("small", 1_000_000)
	var accepted []string
	enrichNew := func() *servertest.Response {
		n := len(accepted)
		domain := fmt.Sprintf("small%d.example", n)
		e.Net.AddCompany(servertest.Company(fmt.Sprintf("Small %d", n), domain))
		r := e.Do("POST", "/v1/companies/enrich", map[string]any{"domain": domain})
		if r.Status == 202 {
			accepted = append(accepted, r.Str("task.id"))
		}
		return r
	}

	for round := 1; round <= 2; round++ {
		// The workers' source calls wait until the disk is full: their results are
		// settled on a disk that refuses them.
		release := e.Net.Hold()
		e.StartWorkers()
		// A long read (a backup, a report) holds the log meanwhile: it cannot be
		// emptied, and grows with the writes until the disk is full.
		endRead := holdRead(t, e.Path)
		var last503 time.Time
		for i, refused := 0, 0; refused < 20; i++ {
			if i == 2000 {
				t.Fatalf("round %d: %d requests accepted and the disk did not fill", round, len(accepted))
			}
			switch r := enrichNew(); r.Status {
			case 202:
			case 503:
				checkStorageUnavailable(t, r)
				refused++
				last503 = time.Now()
			default:
				t.Fatalf("round %d: %d %s", round, r.Status, r.Raw)
			}
		}
		endRead()
		release()
		if round == 2 {
			// A restart on the full disk: the tasks in hand cannot be put back in the queue,
			// and are left running; their lease runs out, and they are requeued.
			e.Restart()
			e.Clock.Add(e.Cfg.Lease + time.Second)
			e.StartWorkers()
		}

		// Silence: nothing but /readyz, as a load balancer asks it.
		for {
			r := e.Do("GET", "/readyz", nil)
			if r.Status == 200 {
				break
			}
			if time.Since(last503) > time.Minute {
				t.Fatalf("round %d: /readyz still %d a minute after the last 503: %s", round, r.Status, r.Raw)
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("round %d: %d tasks accepted so far; /readyz 200 %s after the last 503", round, len(accepted),
			time.Since(last503).Round(10*time.Millisecond))

		for i := range 3 {
			if r := enrichNew(); r.Status != 202 {
				t.Fatalf("round %d: request %d after recovery: %d %s", round, i, r.Status, r.Raw)
			}
		}
		for _, id := range accepted {
			if r := e.WaitSettled(id); r.Str("task.status") != "succeeded" {
				t.Fatalf("round %d: %s", round, r.Raw)
			}
		}
		if calls := e.Net.Calls.Load(); round == 1 && calls != int64(len(accepted)) {
			t.Errorf("%d source calls for %d tasks: a task whose result was refused ran again", calls, len(accepted))
		}
		e.StopWorkers()
	}
	// Each task was charged once, and none refunded.
	b := e.Balance("small")
	if b.Charged != int64(len(accepted)) || b.Refund != 0 {
		t.Errorf("%d tasks succeeded; the ledger says %+v", len(accepted), b)
	}
}

// holdRead opens the database file as another process would, and holds a read
// transaction on it until end is called.
func holdRead(t *testing.T, path string) (end func()) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	end = sync.OnceFunc(func() {
		conn.ExecContext(ctx, `ROLLBACK`)
		conn.Close()
		db.Close()
	})
	t.Cleanup(end)
	var n int
	if _, err := conn.ExecContext(ctx, `BEGIN`); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM tasks`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return end
}
