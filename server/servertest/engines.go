package servertest

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"enrichd/store/storetest"
)

// The HTTP suite runs on both engines: on SQLite in this process, and on PostgreSQL in
// child runs of the test binary with ENRICHD_TEST_ENGINE=postgres, each test on a
// fresh database of one shared server, copied from a template that holds the schema.
// A package whose tests use NewEnv runs them on both with these two functions:
//
//	func TestMain(m *testing.M) { servertest.Main(m) }
//
//	// TestHTTPSuiteOnPostgres runs the tests this run selects again, on PostgreSQL.
//	func TestHTTPSuiteOnPostgres(t *testing.T) { servertest.RunOnPostgres(t) }
//
// in a file whose name sorts before the others' (all_engines_test.go), so that the
// children start before any test on SQLite.

const (
	envEngine = "ENRICHD_TEST_ENGINE"
	// envRacePostgres set to 1 runs the suite on PostgreSQL under -race as well.
	envRacePostgres = "ENRICHD_TEST_POSTGRES_RACE"
)

// OnPostgres reports whether this run puts the tests on PostgreSQL.
func OnPostgres() bool { return os.Getenv(envEngine) == "postgres" }

// SQLiteOnly skips a test that checks something only SQLite has (its file, its
// checkpoints, its memory) when the suite runs on PostgreSQL.
func SQLiteOnly(t testing.TB, why string) {
	t.Helper()
	if OnPostgres() {
		t.Skip("SQLite only: " + why)
	}
}

// postgresDatabase returns the DSN of a fresh database for this test on PostgreSQL,
// dropped when the test ends: a copy of one holding the store's schema, which the
// child run migrates once (storetest.PostgresMigratedURL).
func postgresDatabase(t testing.TB) string {
	t.Helper()
	return storetest.PostgresMigratedURL(t)
}

// RunOnPostgres is the body of a package's TestHTTPSuiteOnPostgres: it runs the tests
// this run selects again, on PostgreSQL, in child runs of the test binary.
func RunOnPostgres(t *testing.T) {
	if OnPostgres() {
		t.Skip("this is the run on PostgreSQL")
	}
	if testing.Short() {
		t.Skip("-short: the HTTP suite runs on SQLite only")
	}
	if raceDetector && os.Getenv(envRacePostgres) != "1" {
		// Twice the suite under the race detector passes go test's default 10-minute
		// timeout on a 2-core machine: .ci/run's race run sets this variable, with a
		// longer timeout.
		t.Skip("-race: the HTTP suite runs on SQLite only unless " + envRacePostgres + "=1")
	}
	server := storetest.PostgresServerURL(t)

	// Most of a test's time is spent waiting (on workers, sweeps, deadlines), not
	// computing: the children start now, in shards, and run while this process goes on
	// with the rest of the suite on SQLite; t.Parallel holds this test until that is done.
	// (Tests run in the order of their files' names: this file's name puts this test
	// first, so the children start before any test on SQLite.)
	began := time.Now()
	var children []*child
	for _, pattern := range childShards(t, childShardCount) {
		children = append(children, startChild(t, server, pattern))
	}
	t.Parallel()

	var out bytes.Buffer
	var err error
	for _, c := range children {
		if e := c.cmd.Wait(); e != nil && err == nil {
			err = e
		}
		out.Write(c.out.Bytes())
	}

	passed := regexp.MustCompile(`(?m)^--- PASS: `).FindAll(out.Bytes(), -1)
	skipped := childSkips(out.String())
	// Each test a child skipped is a skipped subtest of this one, with its reason, so
	// that -v and -json show it (and .ci/run counts it) as they show this run's own.
	for _, skip := range skipped {
		t.Run(skip.name, func(t *testing.T) { t.Skip(skip.reason) })
	}
	if err != nil {
		t.Log(out.String())
		t.Fatalf("the HTTP suite on PostgreSQL failed: %v", err)
	}
	if len(passed) == 0 { // a child that selected nothing, or skipped everything, proves nothing
		t.Log(out.String())
		t.Fatalf("the HTTP suite on PostgreSQL passed no test (%d skipped)", len(skipped))
	}
	t.Logf("on PostgreSQL: %d tests passed, %d skipped, in %v in %d runs", len(passed), len(skipped),
		time.Since(began).Round(time.Millisecond), len(children))
}

// parallelOnPostgres is how many tests the run on PostgreSQL runs at once, beside the
// SQLite suite's: three keep the cluster's connections and the cores busy without
// starving the tests' timings.
const parallelOnPostgres = 3

// childShardCount is how many runs on PostgreSQL share the suite. Each runs its tests
// in parallel as this run does (Main), so one beside the SQLite suite is enough to keep
// a 2-core machine's cores busy while most tests wait.
const childShardCount = 1

// child is a run of this test binary on PostgreSQL.
type child struct {
	cmd *exec.Cmd
	out bytes.Buffer
}

// startChild starts this test binary on PostgreSQL, on the tests pattern selects.
func startChild(t *testing.T, server, pattern string) *child {
	t.Helper()
	// Fewer at a time than on SQLite: each test's database has connections of its own on
	// the one PostgreSQL server, and a loaded machine's commits there outlast their
	// deadlines when more run at once.
	args := []string{"-test.count=1", "-test.v", "-test.run=" + pattern, "-test.parallel=" + strconv.Itoa(parallelOnPostgres)}
	// A child would only skip this test: leave it out, so that its skips are the
	// suite's own.
	skipPattern := "^" + t.Name() + "$"
	if parent := flagValue("test.skip"); parent != "" {
		skipPattern += "|" + parent
	}
	args = append(args, "-test.skip="+skipPattern)
	if deadline, ok := t.Deadline(); ok {
		// The child must end, and report, before this run's own timeout kills both.
		args = append(args, "-test.timeout="+(time.Until(deadline)*9/10).Round(time.Second).String())
	}
	c := &child{cmd: exec.CommandContext(t.Context(), os.Args[0], args...)}
	c.cmd.Env = append(os.Environ(), envEngine+"=postgres", storetest.EnvPostgres+"="+server)
	c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.out
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return c
}

// childShards splits the tests this run selects, less this one, into at most n
// -test.run patterns of about as many tests each. A pattern that names subtests is run
// whole, in one child.
func childShards(t *testing.T, n int) []string {
	t.Helper()
	pattern := childPattern(flagValue("test.run"), t.Name())
	if strings.Contains(pattern, "/") {
		return []string{pattern}
	}
	listed := pattern
	if listed == "" {
		listed = "." // an empty -test.list lists nothing and runs every test instead
	}
	list, err := exec.CommandContext(t.Context(), os.Args[0], "-test.list="+listed).Output()
	if err != nil {
		t.Fatalf("listing the tests: %v", err)
	}
	shards := make([][]string, n)
	i := 0
	for _, name := range strings.Fields(string(list)) {
		if name == t.Name() || strings.HasPrefix(name, "Benchmark") {
			continue
		}
		shards[i%n] = append(shards[i%n], regexp.QuoteMeta(name))
		i++
	}
	var patterns []string
	for _, names := range shards {
		if len(names) > 0 {
			patterns = append(patterns, "^("+strings.Join(names, "|")+")$")
		}
	}
	if len(patterns) == 0 {
		return []string{pattern} // selects nothing: the check below says so
	}
	return patterns
}

func flagValue(name string) string {
	if f := flag.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

type skip struct{ name, reason string }

// childSkips finds the tests a child run with -test.v skipped, each with the lines it
// logged last (t.Skip's reason among them).
func childSkips(out string) []skip {
	var skips []skip
	lines := strings.Split(out, "\n")
	for i, line := range lines {
		name, ok := strings.CutPrefix(strings.TrimLeft(line, " "), "--- SKIP: ")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, " ")
		var reason []string
		for j := i - 1; j >= 0 && strings.HasPrefix(lines[j], "    ") && !strings.HasPrefix(strings.TrimLeft(lines[j], " "), "--- "); j-- {
			reason = append([]string{strings.TrimSpace(lines[j])}, reason...)
		}
		skips = append(skips, skip{name: strings.ReplaceAll(name, "/", "_"), reason: strings.Join(reason, "; ")})
	}
	return skips
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
