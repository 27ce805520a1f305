package server_test

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"enrichd/store/storetest"
)

// The HTTP suite runs on both engines: on SQLite in this process, and on PostgreSQL in
// a child run of this test binary with ENRICHD_TEST_ENGINE=postgres, each test on a
// fresh database of one shared server.

const envEngine = "ENRICHD_TEST_ENGINE"

func TestMain(m *testing.M) { storetest.PostgresMain(m) }

// onPostgres reports whether this run puts the tests on PostgreSQL.
func onPostgres() bool { return os.Getenv(envEngine) == "postgres" }

// sqliteOnly skips a test that checks something only SQLite has (its file, its
// checkpoints, its memory) when the suite runs on PostgreSQL.
func sqliteOnly(t testing.TB, why string) {
	t.Helper()
	if onPostgres() {
		t.Skip("SQLite only: " + why)
	}
}

// TestHTTPSuiteOnPostgres runs the tests this run selects again, on PostgreSQL.
func TestHTTPSuiteOnPostgres(t *testing.T) {
	if onPostgres() {
		t.Skip("this is the run on PostgreSQL")
	}
	if testing.Short() {
		t.Skip("-short: the HTTP suite runs on SQLite only")
	}
	if raceDetector {
		// Twice the suite under the race detector passes the 10-minute test timeout on a
		// 2-core machine. The plain run covers the suite on PostgreSQL; under -race the
		// store's conformance suite and the driver's own tests still run on it.
		t.Skip("-race: the HTTP suite runs on SQLite only (the run without -race covers PostgreSQL)")
	}
	server := storetest.PostgresServerURL(t)

	args := []string{"-test.count=1", "-test.v", "-test.run=" + childPattern(flagValue("test.run"), t.Name())}
	if skip := flagValue("test.skip"); skip != "" {
		args = append(args, "-test.skip="+skip)
	}
	if deadline, ok := t.Deadline(); ok {
		// The child must end, and report, before this run's own timeout kills both.
		args = append(args, "-test.timeout="+(time.Until(deadline)*9/10).Round(time.Second).String())
	}
	began := time.Now()
	cmd := exec.CommandContext(t.Context(), os.Args[0], args...)
	cmd.Env = append(os.Environ(), envEngine+"=postgres", storetest.EnvPostgres+"="+server)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()

	passed := regexp.MustCompile(`(?m)^--- PASS: `).FindAll(out.Bytes(), -1)
	skipped := regexp.MustCompile(`(?m)^--- SKIP: `).FindAll(out.Bytes(), -1)
	if err != nil {
		t.Log(out.String())
		t.Fatalf("the HTTP suite on PostgreSQL failed: %v", err)
	}
	if len(passed) == 0 { // a child that selected nothing, or skipped everything, proves nothing
		t.Log(out.String())
		t.Fatalf("the HTTP suite on PostgreSQL passed no test (%d skipped)", len(skipped))
	}
	t.Logf("on PostgreSQL: %d tests passed, %d skipped, in %v", len(passed), len(skipped), time.Since(began).Round(time.Millisecond))
}

func flagValue(name string) string {
	if f := flag.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

// childPattern is the -test.run pattern of the child run: the parent's, less an
// alternative naming this test (the child skips it anyway); nothing left selects all.
func childPattern(pattern, self string) string {
	var keep []string
	for _, alt := range strings.Split(pattern, "|") {
		if strings.Trim(alt, "^$") != self {
			keep = append(keep, alt)
		}
	}
	return strings.Join(keep, "|")
}
