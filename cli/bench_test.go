package cli_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

	"enrichd/cli"
	"enrichd/store/storetest"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
)

// serveChildEnv, set, makes this test binary the enrichd program: the memory scenario
// starts the program's own binary as `serve`, and in a test that binary is this one.
const serveChildEnv = "ENRICHD_CLI_TEST_RUN_COMMAND"

func TestMain(m *testing.M) {
	if os.Getenv(serveChildEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		cmd := cli.NewRootCommand(cli.Program{Schema: schema, Version: "test"}, os.Stdout, os.Stderr)
		cmd.SetArgs(os.Args[1:])
		err := cmd.ExecuteContext(ctx)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "enrichd:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// The cluster the PostgreSQL tests start, if any, stops with the binary.
	storetest.PostgresMain(m)
}

var schema = func() string {
	raw, err := os.ReadFile("../schema.sql")
	if err != nil {
		panic(err)
	}
	return string(raw)
}()

// TestBenchMemory runs the memory scenario through the real command, briefly: it
// starts this binary as serve (see TestMain) with the flags passed through
// --serve-arg, fills the row from the child's /proc, and leaves no child behind.
func TestBenchMemory(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the memory scenario reads /proc")
	}
	if testing.Short() {
		t.Skip("starts a serve process and loads it for seconds")
	}
	is := is.New(t)
	t.Setenv(serveChildEnv, "1") // for the child; this process has passed TestMain
	rep := benchReport(t, "--scenario", "memory", "--memory-load", "2s", "--memory-idle", "1s",
		"--concurrency", "4", "--workers", "2", "--serve-arg=--lease=45s", "--serve-arg", "--task-ttl=20m")
	is.Equal(len(rep.Results), 1)
	r := rep.Results[0]
	is.Equal(r.Scenario, "memory")
	is.Equal(r.Unit, "MB")
	is.True(r.Memory != nil)
	m := r.Memory
	is.True(r.Count > 0)         // the load was answered
	is.Equal(r.Errors, int64(0)) // as expected
	is.True(m.LoadRate > 0)
	is.True(m.Samples >= 2) // a second's ticks, and the end of the load
	is.Equal(r.Rate, m.PeakMB)
	is.True(m.PeakMB > 1 && m.IdleMB > 1)
	// The kernel keeps a process's RSS in per-CPU counters, and what /proc shows of
	// them is approximate: a sample may read a little above what the high-water mark
	// recorded (seen once, in a full run of the tests on a loaded machine).
	is.True(m.HWMMB >= m.PeakMB*0.98)
	is.True(m.PeakAnonMB > 0 && m.PeakFileMB > 0 && m.IdleAnonMB > 0)
	is.True(slices.Contains(m.Args, "--lease=45s") && slices.Contains(m.Args, "--task-ttl=20m")) // passed through
	is.True(slices.Contains(m.Args, "--allow-private-webhooks"))
	is.True(strings.Contains(r.Note, "--lease=45s"))
	_, err := os.Stat(fmt.Sprintf("/proc/%d", m.PID))
	is.True(errors.Is(err, fs.ErrNotExist)) // the child is gone

	contains(t, failRun(t, "bench", "--scenario", "memory", "--memory-load", "0s"), "--memory-load")
}

// TestBenchReplicas runs the replicas scenario through the real command, briefly, on a
// throwaway PostgreSQL: a row per replica count, every call answered as expected, and
// the schema it worked in dropped afterwards. --db is refused beside another scenario,
// and the scenario without --db.
func TestBenchReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts serve processes and loads them")
	}
	is := is.New(t)
	dsn := storetest.PostgresURL(t)
	openPostgresStore(t, dsn)    // skips until the driver is in the build
	t.Setenv(serveChildEnv, "1") // for the children; this process has passed TestMain
	rep := benchReport(t, "--db", dsn, "--replicas", "1,2", "--duration", "500ms", "--concurrency", "4", "--workers", "2")
	is.Equal(len(rep.Results), 2)
	for i, r := range rep.Results {
		is.Equal(r.Scenario, fmt.Sprintf("replicas-%d", i+1))
		is.Equal(r.Unit, "req/s")
		is.True(r.Count > 0 && r.Rate > 0)
		is.Equal(r.Errors, int64(0)) // every call answered as expected, whichever process took it
		is.True(r.P99ms >= r.P50ms)
	}

	conn, err := pgx.Connect(t.Context(), dsn)
	is.NoErr(err)
	defer conn.Close(context.Background())
	var left int
	is.NoErr(conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'enrichd_bench_%'`).Scan(&left))
	is.Equal(left, 0) // the schemas were dropped

	contains(t, failRun(t, "bench", "--db", dsn, "--scenario", "mixed"), "--db is the PostgreSQL database of the replicas scenario alone")
	contains(t, failRun(t, "bench", "--scenario", "replicas"), "needs --db postgres://")
}
