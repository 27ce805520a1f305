package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"enrichd/server"
	"enrichd/server/servertest"
	"enrichd/store"
	"enrichd/store/storetest"

	"github.com/matryer/is"
)

// twoWorkers keeps the workers that can each fail a write, when the disk fills
// under them, to two.
func twoWorkers(c *server.Config) { c.Workers = 2 }

var storageLogLine = regexp.MustCompile(`"msg":"the database cannot take writes[^"]*".*?"failures":(\d+)`)

// storageLogCounts returns the failure counts of the store's storage log lines.
func storageLogCounts(logs string) []int {
	var counts []int
	for _, m := range storageLogLine.FindAllStringSubmatch(logs, -1) {
		n, _ := strconv.Atoi(m[1])
		counts = append(counts, n)
	}
	return counts
}

// waitReady polls /readyz, as a load balancer would, until it answers want.
func waitReady(t *testing.T, e *servertest.Env, want int) *servertest.Response {
	t.Helper()
	deadline := time.Now().Add(servertest.SettleWithin)
	for {
		r := e.Do("GET", "/readyz", nil)
		if r.Status == want {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz answers %d, not %d: %s", r.Status, want, r.Raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkStorageUnavailable checks a write refused for storage: 503, the code, a
// Retry-After, and no requestId (it is not an internal error).
func checkStorageUnavailable(t *testing.T, r *servertest.Response) {
	t.Helper()
	is := is.NewRelaxed(t)
	is.Equal(r.Status, 503)                             // a write the disk cannot take
	is.Equal(r.Str("code"), "storage_unavailable")      // the stable code
	is.Equal(r.Header.Get("Retry-After"), "5")          // when to retry
	is.True(strings.Contains(r.Str("error"), "retry"))  // a sentence saying what to do
	is.True(!r.Has("requestId"))                        // not a 500
	is.True(!strings.Contains(string(r.Raw), "SQLITE")) // no internals
}

// A full disk: writes answer 503 storage_unavailable and charge nothing, /readyz says
// not ready, the failures are logged once with a count and counted in /metrics, and
// once space is freed /readyz is ready again by itself and writes succeed.
func TestStorageFullDisk(t *testing.T) {
	t.Parallel()
	servertest.SQLiteOnly(t, "storage faults are made on the database file")
	is := is.New(t)
	dir := storetest.MountTmpfs(t, "8m")
	e := servertest.NewEnv(t, servertest.DBAt(filepath.Join(dir, "enrichd.db")), twoWorkers)
	e.Net.AddCompany(servertest.Company("Before", "before.example"))
	e.Net.AddCompany(servertest.Company("After", "after.example"))
	e.StartWorkers()

	r := e.Do("POST", "/v1/companies/enrich", map[string]any{"domain": "before.example"})
	is.Equal(r.Status, 202) // the disk has room: queued
	is.Equal(e.WaitSettled(r.Str("task.id")).Str("task.status"), "succeeded")
	waitReady(t, e, 200)
	before := e.Balance("acme")
	is.Equal(before.Balance, int64(99))
	tasks := e.Do("GET", "/v1/tasks", nil)
	is.Equal(tasks.Status, 200)

	// A grant that lapses as it is made, not written off before the disk is full.
	now := e.Clock.Now()
	_, err := e.DB.GrantCredits(context.Background(), "acme", 5, &now)
	is.NoErr(err)
	filler := storetest.FillDisk(t, dir)
	const attempts = 20
	for i := range attempts {
		r := e.Do("POST", "/v1/companies/enrich", map[string]any{"domain": fmt.Sprintf("full%d.example", i)})
		checkStorageUnavailable(t, r)
	}
	r = e.Do("POST", "/v1/people/enrich", map[string]any{"email": "ada.lovelace@full.example"}, "Idempotency-Key", "full-1")
	checkStorageUnavailable(t, r)

	// Nothing was charged, no task was created. The balance is read all the same, the
	// lapsed grant counted as expired though the disk takes no write-off.
	want := before
	want.Granted, want.Expired = before.Granted+5, before.Expired+5
	is.Equal(e.Balance("acme"), want)
	after := e.Do("GET", "/v1/tasks", nil)
	is.Equal(after.Get("total"), tasks.Get("total"))

	ready := waitReady(t, e, 503)
	is.Equal(ready.Str("status"), "not_ready")
	is.True(strings.Contains(ready.Str("reason"), "the database does not take writes"))
	is.True(strings.Contains(ready.Str("database"), "full"))

	is.True(servertest.Scrape(t, e.HTTP.URL)["enrichd_storage_write_failures_total"] >= attempts+1)
	is.Equal(servertest.Scrape(t, e.HTTP.URL)["enrichd_storage_failing"], 1.0)
	is.True(servertest.Scrape(t, e.HTTP.URL)[`enrichd_http_requests_total{route="enrich_company",status="503"}`] >= attempts)

	// One log line for the whole run so far, no ERROR line per request.
	logs := e.Logs.String()
	is.Equal(storageLogCounts(logs), []int{1})
	is.Equal(strings.Count(logs, `"level":"ERROR"`), 1) // only that line

	// A minute later, the failure that goes on is logged again, with the count since.
	e.Clock.Add(store.StorageLogInterval + time.Second)
	checkStorageUnavailable(t, e.Do("POST", "/v1/companies/enrich", map[string]any{"domain": "later.example"}))
	counts := storageLogCounts(e.Logs.String())
	is.Equal(len(counts), 2)
	is.True(counts[1] >= attempts+1) // the requests since the first line, and the probes

	// Space comes back: ready again without any request, and writes go through.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitReady(t, e, 200)
	is.Equal(servertest.Scrape(t, e.HTTP.URL)["enrichd_storage_failing"], 0.0)
	r = e.Do("POST", "/v1/companies/enrich", map[string]any{"domain": "after.example"})
	is.Equal(r.Status, 202)
	is.Equal(e.WaitSettled(r.Str("task.id")).Str("task.status"), "succeeded") // the workers went back to work
	is.Equal(e.Balance("acme").Balance, before.Balance-1)
	is.True(strings.Contains(e.Logs.String(), "the database takes writes again"))

	// The Idempotency-Key of the refused request was not kept either: it makes a task now.
	r = e.Do("POST", "/v1/people/enrich", map[string]any{"email": "ada.lovelace@full.example"}, "Idempotency-Key", "full-1")
	is.True(r.Status == 200 || r.Status == 202)
	is.Equal(r.Header.Get("Idempotent-Replayed"), "")
	is.True(r.Str("task.id") != "")
}

// The database file made read-only under the running service (immutable, which even
// root cannot write): writes answer 503 and charge nothing, /readyz says not ready,
// and once the file is writable again both recover by themselves.
func TestStorageReadOnlyFile(t *testing.T) {
	t.Parallel()
	servertest.SQLiteOnly(t, "storage faults are made on the database file")
	is := is.New(t)
	e := servertest.NewEnv(t, twoWorkers)
	e.Net.AddCompany(servertest.Company("After", "after.example"))
	waitReady(t, e, 200)
	before := e.Balance("acme")
	// A grant that lapses as it is made: reading the balance writes it off, which a
	// read-only file refuses.
	now := e.Clock.Now()
	_, err := e.DB.GrantCredits(context.Background(), "acme", 5, &now)
	is.NoErr(err)
	files := []string{e.Path, e.Path + "-wal"} // not -shm: it is mapped in memory
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			t.Fatal(err)
		}
	}
	storetest.Chattr(t, "+i", files...)
	if f, err := os.OpenFile(e.Path+"-wal", os.O_WRONLY, 0); err == nil {
		f.Close()
		t.Fatal("the write-ahead log can still be opened for writing")
	}

	for i := range 5 {
		r := e.Do("POST", "/v1/companies/enrich", map[string]any{"domain": fmt.Sprintf("ro%d.example", i)})
		checkStorageUnavailable(t, r)
	}
	// The balance is read all the same, the lapsed grant counted as expired.
	want := before
	want.Granted, want.Expired = before.Granted+5, before.Expired+5
	is.Equal(e.Balance("acme"), want)
	ready := waitReady(t, e, 503)
	is.True(strings.Contains(ready.Str("reason"), "the database does not take writes"))
	is.Equal(storageLogCounts(e.Logs.String()), []int{1})

	storetest.Chattr(t, "-i", files...)
	waitReady(t, e, 200)
	e.StartWorkers()
	r := e.Do("POST", "/v1/companies/enrich", map[string]any{"domain": "after.example"})
	is.Equal(r.Status, 202)
	is.Equal(e.WaitSettled(r.Str("task.id")).Str("task.status"), "succeeded")
	is.Equal(e.Balance("acme").Balance, before.Balance-1)
}

// Workers and the webhook sender do not claim while the disk is full: a queued task
// stays queued and charged once, a due delivery waits, nothing is logged per attempt,
// and both go out once space is back.
func TestStorageWorkersAndSenderWait(t *testing.T) {
	t.Parallel()
	servertest.SQLiteOnly(t, "storage faults are made on the database file")
	is := is.New(t)
	dir := storetest.MountTmpfs(t, "8m")
	// Polling every 10 ms, workers that kept claiming through the fault would fail
	// many times the writes the check below allows.
	pollOften := func(c *server.Config) { c.PollInterval = 10 * time.Millisecond }
	e := servertest.NewEnv(t, servertest.DBAt(filepath.Join(dir, "enrichd.db")), twoWorkers, servertest.AllowPrivateWebhooks, pollOften)
	e.Net.AddCompany(servertest.Company("Queued", "queued.example"))
	r := e.Do("POST", "/v1/companies/enrich", map[string]any{"domain": "queued.example"})
	is.Equal(r.Status, 202)
	id := r.Str("task.id")
	rcv := servertest.NewReceiver(t)
	loopID, _ := e.CreateLoop("CRM", rcv.Srv.URL, "company")
	is.Equal(e.Do("POST", "/v1/loops/"+loopID+"/test", nil).Status, 202)
	filler := storetest.FillDisk(t, dir)

	// Without a request to fail, the first failures are the workers' own: the claims
	// and sweeps under way, then a probe write at most once a second while they wait.
	// Workers that kept claiming would fail a write every poll (10 ms here).
	start := time.Now()
	e.StartWorkers()
	time.Sleep(1500 * time.Millisecond)
	failures, elapsed := e.DB.StorageFailures(), time.Since(start)
	is.True(failures >= 1)
	if limit := 8 + uint64(elapsed/time.Second); failures > limit {
		t.Fatalf("%d writes failed in %s with the disk full: the workers do not wait (at most %d expected)", failures, elapsed, limit)
	}
	is.Equal(strings.Count(e.Logs.String(), `"level":"ERROR"`), 1) // the store's one line
	is.Equal(e.Do("GET", "/v1/tasks/"+id, nil).Str("task.status"), "queued")
	is.Equal(e.Net.Calls.Load(), int64(0)) // no source asked for work that could not be kept
	// The balance is read once the disk has room again (reading it writes off expired
	// grants first, which a full disk refuses): the one charge is the request's.
	is.Equal(rcv.Count(), 0)

	is.NoErr(os.Remove(filler))
	is.Equal(e.WaitSettled(id).Str("task.status"), "succeeded")
	is.Equal(e.Balance("acme").Charged, int64(1))
	is.Equal(rcv.Wait(t, 1)[0].Header.Get("X-Service-Event"), "test")
}

// readOnly makes the file at path read-only to this process: its mode for a user
// other than root, and the immutable flag for root, whom file modes do not stop. It
// skips the test where neither takes.
func readOnly(t *testing.T, path string) (undo func()) {
	t.Helper()
	if err := os.Chmod(path, 0o444); err != nil {
		t.Fatal(err)
	}
	immutable := os.Geteuid() == 0
	if immutable {
		storetest.Chattr(t, "+i", path)
	}
	if f, err := os.OpenFile(path, os.O_RDWR, 0); err == nil {
		f.Close()
		t.Skipf("%s stays writable to this process after chmod 0444 and chattr +i", path)
	}
	return func() {
		if immutable {
			storetest.Chattr(t, "-i", path)
		}
		if err := os.Chmod(path, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// The service started on a database file it cannot write (an operator's chmod, a
// volume mounted read-only): it serves reads, answers writes 503 and charges nothing,
// says not ready, and once the file is writable again recovers without a restart.
func TestStorageReadOnlyFileAtStart(t *testing.T) {
	t.Parallel()
	servertest.SQLiteOnly(t, "storage faults are made on the database file")
	is := is.New(t)
	e := servertest.NewEnv(t, twoWorkers)
	e.Net.AddCompany(servertest.Company("After", "after.example"))
	before := e.Balance("acme")
	e.Close() // a clean close leaves the file alone, without its -wal and -shm
	undo := readOnly(t, e.Path)
	e.Open()

	checkStorageUnavailable(t, e.Do("POST", "/v1/companies/enrich", map[string]any{"domain": "ro.example"}))
	is.Equal(e.Do("GET", "/v1/tasks", nil).Status, 200) // reads are served
	ready := waitReady(t, e, 503)
	is.True(strings.Contains(ready.Str("database"), "readonly"))
	is.Equal(e.Balance("acme"), before)

	// Under steady write traffic the writer's connection is never idle, and is still
	// opened anew once the file is writable.
	stop := make(chan struct{})
	var traffic sync.WaitGroup
	for range 16 {
		traffic.Add(1)
		go func() {
			defer traffic.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				e.DB.CreateOrg(context.Background(), "traffic") // refused, then a conflict: a write either way
			}
		}()
	}
	stopTraffic := sync.OnceFunc(func() { close(stop); traffic.Wait() })
	t.Cleanup(stopTraffic) // before the database closes, should the test fail
	undo()
	waitReady(t, e, 200)
	stopTraffic()
	e.StartWorkers()
	r := e.Do("POST", "/v1/companies/enrich", map[string]any{"domain": "after.example"})
	is.Equal(r.Status, 202)
	is.Equal(e.WaitSettled(r.Str("task.id")).Str("task.status"), "succeeded")
	is.Equal(e.Balance("acme").Balance, before.Balance-1)
}

// waitFailures waits until the store has counted at least n writes refused for
// storage.
func waitFailures(t *testing.T, e *servertest.Env, n uint64) {
	t.Helper()
	deadline := time.Now().Add(servertest.SettleWithin)
	for e.DB.StorageFailures() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d storage failures, not %d", e.DB.StorageFailures(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Maintenance on a full disk neither retries every round nor logs its own failures:
// retention that cannot delete, and the checkpoint, leave the log to the store's one
// line, and rounds are skipped while the database does not take writes.
func TestStorageMaintenanceStaysQuiet(t *testing.T) {
	t.Parallel()
	servertest.SQLiteOnly(t, "storage faults are made on the database file")
	is := is.New(t)
	dir := storetest.MountTmpfs(t, "8m")
	e := servertest.NewEnv(t, servertest.DBAt(filepath.Join(dir, "enrichd.db")), twoWorkers, func(c *server.Config) {
		c.MaintenanceInterval = 10 * time.Millisecond
		c.Retain = 24 * time.Hour
	})
	e.Net.AddCompany(servertest.Company("Old", "old.example"))
	e.StartWorkers()
	r := e.Do("POST", "/v1/companies/enrich", map[string]any{"domain": "old.example"})
	is.Equal(r.Status, 202)
	is.Equal(e.WaitSettled(r.Str("task.id")).Str("task.status"), "succeeded")

	// Two checkpoints after the task settled: the log is empty, and the next write needs
	// room the disk will not have.
	const checkpoints = `enrichd_wal_checkpoints_total{complete="true"}`
	c0 := servertest.Scrape(t, e.HTTP.URL)[checkpoints]
	deadline := time.Now().Add(servertest.SettleWithin)
	for servertest.Scrape(t, e.HTTP.URL)[checkpoints] < c0+2 {
		if time.Now().After(deadline) {
			t.Fatal("the WAL was not checkpointed in a quiet moment")
		}
		time.Sleep(10 * time.Millisecond)
	}
	storetest.FillDisk(t, dir)
	e.Clock.Add(48 * time.Hour) // the task is past retention: deleting it is a write

	// The deletion fails; then, for a while, rounds are skipped (a probe a second).
	waitFailures(t, e, 1)
	time.Sleep(1500 * time.Millisecond)
	logs := e.Logs.String()
	is.Equal(storageLogCounts(logs), []int{1})
	is.Equal(strings.Count(logs, `"level":"ERROR"`), 1) // only the store's line
	is.True(!strings.Contains(logs, "retention"))
	is.True(!strings.Contains(logs, "checkpointing"))
}

// A task whose result cannot be stored (the disk filled while it ran) is not logged
// by the worker: the store's line says it once.
func TestStorageSettleFailureIsLoggedOnce(t *testing.T) {
	t.Parallel()
	servertest.SQLiteOnly(t, "storage faults are made on the database file")
	is := is.New(t)
	dir := storetest.MountTmpfs(t, "8m")
	e := servertest.NewEnv(t, servertest.DBAt(filepath.Join(dir, "enrichd.db")), twoWorkers, func(c *server.Config) { c.Lease = time.Hour })
	e.Net.AddCompany(servertest.Company("Slow", "slow.example"))
	release := e.Net.Hold()
	defer release()
	e.StartWorkers()
	r := e.Do("POST", "/v1/companies/enrich", map[string]any{"domain": "slow.example"})
	is.Equal(r.Status, 202)
	deadline := time.Now().Add(servertest.SettleWithin)
	for e.Net.Calls.Load() == 0 { // the task is claimed, its source call held
		if time.Now().After(deadline) {
			t.Fatal("the task was not claimed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	storetest.FillDisk(t, dir)
	release()

	// Settling fails, then the workers wait (a probe a second).
	waitFailures(t, e, 1)
	time.Sleep(1500 * time.Millisecond)
	logs := e.Logs.String()
	is.Equal(storageLogCounts(logs), []int{1})
	is.Equal(strings.Count(logs, `"level":"ERROR"`), 1) // only the store's line
	is.True(!strings.Contains(logs, "settling a task"))
}

// A full disk and batches: an upload is 503 storage_unavailable with nothing made or
// charged; the rows of a batch made before wait, pending and uncharged, instead of
// failing, and get their tasks once space is freed.
func TestStorageFullDiskBatches(t *testing.T) {
	t.Parallel()
	servertest.SQLiteOnly(t, "storage faults are made on the database file")
	is := is.New(t)
	dir := storetest.MountTmpfs(t, "8m")
	e := servertest.NewEnv(t, servertest.DBAt(filepath.Join(dir, "enrichd.db")), twoWorkers)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	e.Net.AddCompany(servertest.Company("Globex", "globex.com"))

	r := e.UploadCSV("domain\nacme.com\nglobex.com\n", "")
	is.Equal(r.Status, 202)
	id := r.Str("data.id")

	filler := storetest.FillDisk(t, dir)
	checkStorageUnavailable(t, e.UploadCSV("domain\nacme.com\n", "", "Idempotency-Key", "full-batch"))
	e.StartWorkers()
	waitFailures(t, e, 2) // the feeder tried, and was refused
	b := e.Do("GET", "/v1/batches/"+id, nil)
	is.Equal(b.Status, 200)
	is.Equal(servertest.Count(b, "pending"), 2)
	is.Equal(servertest.Count(b, "failed"), 0)
	is.Equal(e.Balance("acme").Balance, int64(100))
	is.Equal(e.Do("GET", "/v1/batches", nil).Get("total"), float64(1))

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	done := e.WaitBatchDone(id)
	is.Equal(servertest.Count(done, "succeeded"), 2)
	is.Equal(e.Balance("acme").Balance, int64(98))
	// The refused upload's key was not kept: it makes its batch now.
	is.Equal(e.UploadCSV("domain\nacme.com\n", "", "Idempotency-Key", "full-batch").Status, 202)
}

// A batch's results download whose storage fails after the first page was sent (on
// either engine): the
// connection is dropped, so the client sees a broken download (not a 200 that looks
// complete), and the failure is logged once with the requestId.
func TestStorageFailureCutsBatchResultsVisibly(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	key, _ := e.NewOrg("bulk", 1000)
	// 501 rows of 10 kB: the first page (500 rows, 5 MB) is far more than the
	// connection's buffers (the client's kept small), so the handler is still writing
	// it when the storage fails.
	var file strings.Builder
	file.WriteString("domain,note\n")
	note := strings.Repeat("n", 10_000)
	for i := range 501 {
		fmt.Fprintf(&file, "d%d.example,%s\n", i, note)
	}
	up := e.UploadCSV(file.String(), "", "Authorization", "Bearer "+key)
	is.Equal(up.Status, 202)

	req, _ := http.NewRequest("GET", e.HTTP.URL+"/v1/batches/"+up.Str("data.id")+"/results", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := smallBufferClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	is.Equal(res.StatusCode, 200)
	first := make([]byte, 1024)
	if _, err := io.ReadFull(res.Body, first); err != nil {
		t.Fatal(err)
	}
	is.True(strings.HasPrefix(string(first), "domain,note,"))

	// The database goes away under the server: the next page's read fails.
	e.DB.Close()
	defer func() { e.DB = nil }()
	rest, err := io.ReadAll(res.Body)
	is.True(errors.Is(err, io.ErrUnexpectedEOF))              // the client sees the download broken
	is.True(!strings.Contains(string(rest), "d500.example,")) // the last row is not there
	logs := e.Logs.String()
	is.Equal(strings.Count(logs, `"msg":"batch results cut short"`), 1)
	is.True(strings.Contains(logs, `"requestId":"`+res.Header.Get("X-Request-Id")+`"`))
}

// smallBufferClient is an HTTP client whose connections take little before the reader
// reads: its receive buffer is fixed at 16 kB instead of growing to megabytes.
func smallBufferClient() *http.Client {
	dialer := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		c.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 16<<10) })
		return err
	}}
	return &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
}

// TestMetricsCountCheckpoints reads SQLite's checkpoints of the write-ahead log from
// /metrics once there were writes to copy: the figures a latency spike is laid beside.
func TestMetricsCountCheckpoints(t *testing.T) {
	t.Parallel()
	servertest.SQLiteOnly(t, "checkpoints are SQLite's")
	e := servertest.NewEnv(t)
	is.New(t).Equal(e.Do("POST", "/v1/companies/enrich", map[string]any{"domain": "acme.com"}).Status, 202)
	deadline := time.Now().Add(servertest.SettleWithin)
	for {
		m := servertest.Scrape(t, e.HTTP.URL)
		if m["enrichd_wal_checkpoints_run_total"] >= 1 && m["enrichd_wal_checkpoint_seconds_total"] > 0 {
			_, ok := m["enrichd_wal_writer_checkpoint_seconds_total"]
			is.New(t).True(ok)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint counted within 10 s of a write: %v checkpoints, %v s", m["enrichd_wal_checkpoints_run_total"], m["enrichd_wal_checkpoint_seconds_total"])
		}
		time.Sleep(50 * time.Millisecond)
	}
}
