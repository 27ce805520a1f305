package pgcluster_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"enrichd/store/storetest/pgcluster"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
)

// withoutRun, set in a child run of this binary, runs its tests without Main, as a
// package whose TestMain forgot it would.
const withoutRun = "PGCLUSTER_TEST_WITHOUT_RUN"

func TestMain(m *testing.M) {
	if os.Getenv(withoutRun) == "1" {
		os.Exit(m.Run())
	}
	pgcluster.Main(m)
}

// A test binary whose TestMain does not go through Main or Run, which stop the cluster
// the tests start, is refused a cluster, PostgreSQL on the machine or not: it would
// outlive the binary.
func TestAClusterNeedsTheTestMainThatStopsIt(t *testing.T) {
	if os.Getenv(withoutRun) == "1" {
		pgcluster.URL(t)
		t.Fatal("URL gave a database to a binary that would not stop its cluster")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAClusterNeedsTheTestMainThatStopsIt$", "-test.count=1")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, pgcluster.EnvPostgres+"=") { // a server named by DSN is not this process's to stop
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, withoutRun+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "must run its tests through pgcluster.Main or pgcluster.Run") {
		t.Fatalf("the child run: %v\n%s", err, out)
	}
}

// Each test gets its own empty database, and it is gone once the test ends.
func TestURLGivesEachTestAFreshDatabase(t *testing.T) {
	pgcluster.ServerURL(t) // skips the whole test without PostgreSQL
	is := is.New(t)
	ctx := context.Background()
	var names []string
	for range 2 {
		t.Run("", func(t *testing.T) {
			is := is.New(t)
			conn, err := pgx.Connect(ctx, pgcluster.URL(t))
			is.NoErr(err)
			defer conn.Close(ctx)
			var name string
			var tables int
			is.NoErr(conn.QueryRow(ctx, `SELECT current_database(),
				(SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public')`).Scan(&name, &tables))
			is.Equal(tables, 0) // a fresh database
			_, err = conn.Exec(ctx, `CREATE TABLE t (id int)`)
			is.NoErr(err)
			names = append(names, name)
		})
	}
	is.Equal(len(names), 2)
	is.True(names[0] != names[1])

	conn, err := pgx.Connect(ctx, pgcluster.ServerURL(t))
	is.NoErr(err)
	defer conn.Close(ctx)
	var left int
	is.NoErr(conn.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname = ANY($1)`, names).Scan(&left))
	is.Equal(left, 0) // dropped at cleanup
}

// The cluster a test process starts lives in /dev/shm when that is a tmpfs with room:
// each test's database is hundreds of files created and deleted, which costs a disk's
// filesystem far more than memory.
func TestTheClusterIsInMemoryWhenThereIsRoom(t *testing.T) {
	if os.Getenv(pgcluster.EnvPostgres) != "" {
		t.Skip("a server named by " + pgcluster.EnvPostgres + " is where it is")
	}
	// Well above the 2 GiB the cluster's start asked for, so that other test processes'
	// use of it since then cannot have changed the answer.
	var st syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &st); err != nil || st.Type != 0x01021994 || st.Bavail*uint64(st.Bsize) < 4<<30 ||
		syscall.Access("/dev/shm", 2 /* W_OK */) != nil {
		t.Skip("/dev/shm is not a writable tmpfs with 4 GiB free here")
	}
	is := is.New(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgcluster.ServerURL(t))
	is.NoErr(err)
	defer conn.Close(ctx)
	var dir string
	is.NoErr(conn.QueryRow(ctx, `SHOW data_directory`).Scan(&dir))
	is.True(strings.HasPrefix(dir, "/dev/shm/enrichd-pg-")) // the data directory
}

// copyRun, set in a child run of this binary, makes a copy and prints its template's
// name, leaving the template to the end of the run.
const copyRun = "PGCLUSTER_TEST_COPY"

// copyRuns makes each run of the test (-count) ask for a template of its own.
var copyRuns atomic.Int32

// Copy builds its template once however many tests ask at once, each test gets a
// database of its own holding what the build made, and the template is dropped when
// the run ends, on a server the tests did not start too.
func TestCopyBuildsOnceAndEachTestGetsItsOwn(t *testing.T) {
	server := pgcluster.ServerURL(t) // skips the whole test without PostgreSQL
	ctx := context.Background()
	var builds atomic.Int32
	var template string
	build := func(ctx context.Context, dsn string) error {
		builds.Add(1)
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		if err := conn.QueryRow(ctx, `SELECT current_database()`).Scan(&template); err != nil {
			return err
		}
		_, err = conn.Exec(ctx, `CREATE TABLE built (n int); INSERT INTO built VALUES (1)`)
		return err
	}
	if os.Getenv(copyRun) == "1" {
		pgcluster.Copy(t, "child", build)
		fmt.Printf("template=%s\n", template)
		return
	}
	key := "test-" + strconv.Itoa(int(copyRuns.Add(1)))
	var names sync.Map
	t.Run("copies", func(t *testing.T) {
		for i := range 4 {
			t.Run(strconv.Itoa(i), func(t *testing.T) {
				t.Parallel()
				is := is.New(t)
				conn, err := pgx.Connect(ctx, pgcluster.Copy(t, key, build))
				is.NoErr(err)
				defer conn.Close(ctx)
				var name string
				var n int
				is.NoErr(conn.QueryRow(ctx, `SELECT current_database(), (SELECT sum(n) FROM built)`).Scan(&name, &n))
				is.Equal(n, 1) // what the build made, and nothing another copy wrote
				_, err = conn.Exec(ctx, `INSERT INTO built VALUES (1)`)
				is.NoErr(err)
				names.Store(name, true)
			})
		}
	})
	is := is.New(t)
	is.Equal(builds.Load(), int32(1))
	count := 0
	names.Range(func(any, any) bool { count++; return true })
	is.Equal(count, 4)

	cmd := exec.Command(os.Args[0], "-test.run=^TestCopyBuildsOnceAndEachTestGetsItsOwn$", "-test.count=1")
	cmd.Env = append(os.Environ(), copyRun+"=1", pgcluster.EnvPostgres+"="+server)
	out, err := cmd.CombinedOutput()
	is.NoErr(err)
	m := regexp.MustCompile(`(?m)^template=(enrichd_template_\w+)$`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("the child run named no template:\n%s", out)
	}
	admin, err := pgx.Connect(ctx, server)
	is.NoErr(err)
	defer admin.Close(ctx)
	var left int
	is.NoErr(admin.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname = $1`, string(m[1])).Scan(&left))
	is.Equal(left, 0) // the child's template is gone with its run
}
