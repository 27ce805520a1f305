package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"enrichd/store"

	"github.com/matryer/is"
)

func TestVersion(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	out := mustCLI(t, "version")
	fields := strings.Fields(out)
	is.Equal(len(fields), 4)
	is.Equal(fields[0], "enrichd")
	is.Equal(fields[1], "dev") // what a build without the Makefile's stamp says
	is.Equal(fields[2], runtime.Version())
	is.Equal(fields[3], runtime.GOOS+"/"+runtime.GOARCH)
}

func TestRetainFlagRefused(t *testing.T) {
	t.Parallel()
	contains(t, runServeExpectError(t, "serve", "--db", newDBPath(t), "--addr", "127.0.0.1:0", "--retain", "forever"), "--retain")
	contains(t, runServeExpectError(t, "serve", "--db", newDBPath(t), "--addr", "127.0.0.1:0", "--retain-records", "-1d"), "--retain-records")
	contains(t, runServeExpectError(t, "serve", "--db", newDBPath(t), "--addr", "127.0.0.1:0", "--retain-candidates", "a week"), "--retain-candidates")
	contains(t, runServeExpectError(t, "serve", "--db", newDBPath(t), "--addr", "127.0.0.1:0", "--shutdown-grace", "-1s"), "--shutdown-grace")
}

// startServe runs serve with args until the test ends and returns the log and the
// channel run's result arrives on, once it listens.
func startServe(t *testing.T, ctx context.Context, args ...string) (*syncBuffer, <-chan error) {
	t.Helper()
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0", "--log-format", "json"}, args...), &stdout, &stderr)
	}()
	waitListening(t, &stderr, done)
	return &stderr, done
}

// logField returns field of the first log line whose msg is msg.
func logField(t *testing.T, logs *syncBuffer, msg, field string) string {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var entry map[string]any
		if json.Unmarshal(sc.Bytes(), &entry) == nil && entry["msg"] == msg {
			s, _ := entry[field].(string)
			return s
		}
	}
	t.Fatalf("no %q log line; log:\n%s", msg, logs.String())
	return ""
}

// waitRunning polls the task until a worker has claimed it.
func waitRunning(t *testing.T, client *http.Client, base, key, id string) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		_, resp, raw := call(t, client, http.MethodGet, base+"/v1/tasks/"+id, key, "")
		if resp.Task.Status == "running" {
			return
		}
		if resp.Task.Status != "queued" || time.Now().After(deadline) {
			t.Fatalf("task is not running: %s", raw)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestServeShutdownLetsClaimedTasksFinish stops serve, as SIGTERM does, while a task
// is in a worker's hands: within the grace period it settles; when the grace runs out
// first it goes back to the queue, charged once and not refunded, for the next start.
// Meanwhile health and metrics are served on the admin address alone, and a backup is
// taken from the running service.
func TestServeShutdownLetsClaimedTasksFinish(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	db := newDB(t)
	key := strings.TrimSpace(mustCLI(t, "keys", "create", "--org", "acme", "--db", db))
	mustCLI(t, "credits", "grant", "--org", "acme", "--amount", "10", "--db", db)
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()

	// The sim source answers after a second: long enough to be caught running.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs, done := startServe(t, ctx, "--db", db, "--sources", "sim", "--sim-latency", "1s", "--shutdown-grace", "1m",
		"--admin-addr", "127.0.0.1:0", "--workers", "1")
	base := "http://" + strings.TrimPrefix(logField(t, logs, "enrichd listening", "addr"), "http://")
	admin := logField(t, logs, "enrichd listening", "admin_addr")
	is.True(strings.HasPrefix(admin, "http://127.0.0.1:"))

	res, err := client.Get(admin + "/readyz")
	is.NoErr(err)
	res.Body.Close()
	is.Equal(res.StatusCode, http.StatusOK)
	status, _, _ := call(t, client, http.MethodGet, base+"/metrics", key, "")
	is.Equal(status, http.StatusNotFound) // not on the API's address

	status, first, raw := call(t, client, http.MethodPost, base+"/v1/companies/enrich", key, `{"domain":"acme.com"}`)
	if status != http.StatusAccepted {
		t.Fatalf("enrich: %d %s", status, raw)
	}
	waitRunning(t, client, base, key, first.Task.ID)

	backup := filepath.Join(t.TempDir(), "backup.db")
	contains(t, mustCLI(t, "backup", "--db", db, "--to", backup), "integrity check ok")
	contains(t, failCLI(t, "backup", "--db", db, "--to", backup), "--force")
	mustCLI(t, "backup", "--db", db, "--to", backup, "--force")
	info, err := os.Stat(backup)
	is.NoErr(err)
	is.Equal(info.Mode().Perm(), os.FileMode(0o600))
	is.Equal(tableRows(t, mustCLI(t, "orgs", "list", "--db", backup))[0][:5], "acme\t") // a database of its own

	client.CloseIdleConnections()
	cancel()
	is.NoErr(<-done)
	contains(t, logs.String(), `"msg":"shutting down"`)
	st := openStore(t, db)
	org, err := st.FindOrg(context.Background(), "acme")
	is.NoErr(err)
	task, err := st.GetTask(context.Background(), org.ID, first.Task.ID)
	is.NoErr(err)
	is.Equal(task.Status, store.StatusSucceeded) // it finished within the grace period
	st.Close()

	// Now a source slower than the grace period.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	logs, done = startServe(t, ctx, "--db", db, "--sources", "sim", "--sim-latency", "1h", "--shutdown-grace", "50ms", "--workers", "1")
	base = logField(t, logs, "enrichd listening", "addr")
	status, second, raw := call(t, client, http.MethodPost, base+"/v1/companies/enrich", key, `{"domain":"globex.com"}`)
	if status != http.StatusAccepted {
		t.Fatalf("enrich: %d %s", status, raw)
	}
	waitRunning(t, client, base, key, second.Task.ID)
	client.CloseIdleConnections()
	cancel()
	is.NoErr(<-done)
	contains(t, logs.String(), "shutdown grace ran out")
	st = openStore(t, db)
	task, err = st.GetTask(context.Background(), org.ID, second.Task.ID)
	is.NoErr(err)
	is.Equal(task.Status, store.StatusQueued) // back in the queue, for the next start
	is.Equal(balance(t, db, "acme"), "8")     // two tasks charged, neither refunded
}

func TestBackupNeedsAnExistingDatabase(t *testing.T) {
	t.Parallel()
	db := newDBPath(t)
	contains(t, failCLI(t, "backup", "--db", db, "--to", filepath.Join(t.TempDir(), "b.db")), "--db")
	if _, err := os.Stat(db); err == nil {
		t.Fatal("backup created the database it was to copy")
	}
	failCLI(t, "backup", "--db", db) // --to is required
}
