// Package pgcluster gives tests a PostgreSQL database of their own: a throwaway
// cluster each test process starts once (initdb and pg_ctl, as the postgres user when
// run as root; in /dev/shm when that is a tmpfs with room), or a server named by
// ENRICHD_TEST_POSTGRES, with a fresh database per test, empty or copied from a
// template made once a process. It depends on no part of enrichd, so the PostgreSQL
// driver's own tests use it as well as the suites that go through the store.
package pgcluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Environment variables the PostgreSQL tests read.
const (
	// EnvPostgres names a server (a DSN) where the tests may CREATE DATABASE. When unset,
	// the tests start a throwaway cluster of their own.
	EnvPostgres = "ENRICHD_TEST_POSTGRES"
	// EnvRequirePostgres set to 1 turns "no PostgreSQL on this machine" from a skip into a
	// failure: CI sets it so that the PostgreSQL suites cannot silently stop running.
	EnvRequirePostgres = "ENRICHD_REQUIRE_POSTGRES"
)

// Main is TestMain for a package whose tests call URL: it runs the tests,
// then stops the cluster this process started, if any, so no server outlives the test
// binary.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main for a TestMain that has more to clean up once the tests have run: it
// returns their exit code instead of exiting.
func Run(m *testing.M) int {
	clusterMu.Lock()
	underRun = true
	clusterMu.Unlock()
	code := m.Run()
	dropTemplates()
	stopCluster()
	return code
}

// URL returns the DSN of a fresh, empty database for this test, dropped when the
// test ends. The server is ENRICHD_TEST_POSTGRES when set, else a cluster this process
// starts once. With no PostgreSQL on the machine the test skips, or fails when
// ENRICHD_REQUIRE_POSTGRES=1. Without ENRICHD_TEST_POSTGRES, the package's TestMain must
// run the tests through Main or Run, which stop that cluster: otherwise the test fails,
// PostgreSQL or not, so that a package is never written to leave a server behind.
func URL(t testing.TB) string {
	t.Helper()
	dsn, _ := Database(t, "")
	return dsn
}

// Database is URL's, and its name, made a copy of template (a database of the same
// server with no session open) unless that is "": copying a migrated database is much
// faster than migrating a new one for every test.
func Database(t testing.TB, template string) (dsn, name string) {
	t.Helper()
	admin, err := postgresServer(t)
	if errors.Is(err, errNoPostgres) {
		if os.Getenv(EnvRequirePostgres) == "1" {
			t.Fatalf("%v (and %s=1 requires it)", err, EnvRequirePostgres)
		}
		t.Skipf("%v; install it (apt-get install -y postgresql) or set %s to a server's DSN", err, EnvPostgres)
	}
	if err != nil {
		t.Fatal(err)
	}

	name = "enrichd_test_" + randomHex(8)
	create := "CREATE DATABASE " + name
	if template != "" {
		create += " TEMPLATE " + template
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := adminExec(ctx, admin, create); err != nil {
		t.Fatalf("%s: %v", create, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// FORCE: a test that failed half-way may leave pools open; they must not keep
		// the database (and its disk) alive for the rest of the run.
		if err := adminExec(ctx, admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})
	return withDatabase(admin, name), name
}

// Copy is URL's for a copy of a template this process makes once for key: an empty
// database that build fills (build must close every session it opens on it). The
// template is dropped once the tests have run. A test that needs a migrated database
// gets one this way in a fraction of the time migrating an empty one takes.
func Copy(t testing.TB, key string, build func(ctx context.Context, dsn string) error) string {
	t.Helper()
	admin := ServerURL(t)
	clusterMu.Lock()
	dropped := underRun
	clusterMu.Unlock()
	if !dropped { // on a server named by ENRICHD_TEST_POSTGRES, Run alone drops the template
		t.Fatal(errNoCleanup)
	}
	templatesMu.Lock()
	tpl := templates[key]
	if tpl == nil {
		tpl = &template{}
		templates[key] = tpl
	}
	templatesMu.Unlock()
	tpl.once.Do(func() {
		name := "enrichd_template_" + randomHex(8)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if tpl.err = adminExec(ctx, admin, "CREATE DATABASE "+name); tpl.err != nil {
			return
		}
		tpl.admin, tpl.name = admin, name
		if err := build(ctx, withDatabase(admin, name)); err != nil {
			tpl.err = fmt.Errorf("build the template %q: %w", key, err)
			return
		}
		// No session may be open on a template while it is copied: none can be opened
		// from now on, so a stray one fails where it connects, not every copy after it.
		if err := adminExec(ctx, admin, "ALTER DATABASE "+name+" ALLOW_CONNECTIONS false"); err != nil {
			tpl.err = fmt.Errorf("close the template %q to sessions: %w", key, err)
		}
	})
	if tpl.err != nil {
		t.Fatal(tpl.err)
	}
	dsn, _ := Database(t, tpl.name)
	return dsn
}

type template struct {
	once        sync.Once
	admin, name string // the server and the database, once created
	err         error
}

var (
	templatesMu sync.Mutex
	templates   = map[string]*template{}
)

// dropTemplates drops the templates Copy made: on a server named by
// ENRICHD_TEST_POSTGRES nothing else would.
func dropTemplates() {
	templatesMu.Lock()
	defer templatesMu.Unlock()
	for key, tpl := range templates {
		if tpl.name == "" {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := adminExec(ctx, tpl.admin, "DROP DATABASE IF EXISTS "+tpl.name+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(os.Stderr, "pgcluster: drop the template %q: %v\n", key, err)
		}
		cancel()
		delete(templates, key)
	}
}

// ServerURL returns the DSN of the server URL creates its databases on,
// starting the cluster if it is not running yet. A test that re-runs its binary as a child
// hands this to the child in ENRICHD_TEST_POSTGRES so that both share one server. It skips
// or fails like URL when there is no PostgreSQL.
func ServerURL(t testing.TB) string {
	t.Helper()
	admin, err := postgresServer(t)
	if errors.Is(err, errNoPostgres) {
		if os.Getenv(EnvRequirePostgres) == "1" {
			t.Fatalf("%v (and %s=1 requires it)", err, EnvRequirePostgres)
		}
		t.Skipf("%v; install it (apt-get install -y postgresql) or set %s to a server's DSN", err, EnvPostgres)
	}
	if err != nil {
		t.Fatal(err)
	}
	return admin
}

var errNoPostgres = errors.New("no PostgreSQL found (initdb and pg_ctl neither on PATH nor in /usr/lib/postgresql/*/bin)")

var (
	serverOnce sync.Once
	serverDSN  string
	serverErr  error

	clusterMu sync.Mutex
	cluster   *localCluster // the cluster this process started, nil if none
	underRun  bool          // Run called m.Run, so it stops that cluster afterwards
)

// errNoCleanup refuses a cluster to a test binary whose TestMain would not stop it:
// the cluster would outlive the binary until the next test process reaped it.
var errNoCleanup = errors.New("this package's TestMain must run its tests through pgcluster.Main or pgcluster.Run (storetest.PostgresRun), which stop the cluster the tests start")

func postgresServer(t testing.TB) (string, error) {
	serverOnce.Do(func() {
		if dsn := os.Getenv(EnvPostgres); dsn != "" {
			serverDSN = dsn
			return
		}
		clusterMu.Lock()
		stopped := underRun
		clusterMu.Unlock()
		if !stopped {
			serverErr = errNoCleanup
			return
		}
		c, err := startCluster()
		if err != nil {
			serverErr = err
			return
		}
		clusterMu.Lock()
		cluster = c
		clusterMu.Unlock()
		serverDSN = c.dsn
		t.Logf("started a throwaway PostgreSQL in %v (%s)", c.took.Round(time.Millisecond), c.dir)
	})
	return serverDSN, serverErr
}

// localCluster is a PostgreSQL cluster in a temp directory, owned by this process.
type localCluster struct {
	bin    string // directory holding initdb, pg_ctl
	dir    string // temp directory: data/, the socket, the log
	asUser string // OS user to run the server as ("" = this user)
	dsn    string
	took   time.Duration
}

func (c *localCluster) data() string { return filepath.Join(c.dir, "data") }
func (c *localCluster) log() string  { return filepath.Join(c.dir, "server.log") }

func (c *localCluster) command(ctx context.Context, tool string, args ...string) *exec.Cmd {
	path := filepath.Join(c.bin, tool)
	if c.asUser != "" {
		return exec.CommandContext(ctx, "runuser", append([]string{"-u", c.asUser, "--", path}, args...)...)
	}
	return exec.CommandContext(ctx, path, args...)
}

func startCluster() (*localCluster, error) {
	began := time.Now()
	bin, err := findPostgresBin()
	if err != nil {
		return nil, err
	}
	reapOrphans(bin)
	// A fresh directory per process: a cluster left behind by a killed run keeps its own
	// directory and port and cannot get in this one's way.
	dir, err := os.MkdirTemp(clusterBase(), clusterPrefix)
	if err != nil {
		return nil, err
	}
	c := &localCluster{bin: bin, dir: dir}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, err
	}
	fail := func(step string, err error, out []byte) (*localCluster, error) {
		msg := fmt.Sprintf("start test PostgreSQL: %s: %v", step, err)
		if len(bytes.TrimSpace(out)) > 0 {
			msg += "\n" + string(out)
		}
		if log, _ := os.ReadFile(c.log()); len(log) > 0 {
			msg += "\nserver log:\n" + string(log)
		}
		c.stop()
		return nil, errors.New(msg)
	}

	// initdb refuses to run as root: hand the directory to the postgres user and run the
	// tools as that user.
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return fail("running as root and there is no postgres user to run the server as", err, nil)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return fail("chown temp dir", err, nil)
		}
		c.asUser = "postgres"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	out, err := c.command(ctx, "initdb", "-D", c.data(), "-A", "trust", "-U", "postgres",
		"-E", "UTF8", "--locale=C", "--no-sync").CombinedOutput()
	if err != nil {
		return fail("initdb", err, out)
	}

	// Durability is worth nothing to a database dropped at the end of the test; the
	// replica tests open many connections at once.
	options := func(port int) string {
		return strings.Join([]string{
			"-c listen_addresses=127.0.0.1",
			"-c port=" + strconv.Itoa(port),
			"-c unix_socket_directories=" + dir,
			"-c fsync=off",
			"-c synchronous_commit=off",
			"-c full_page_writes=off",
			"-c max_connections=300",
		}, " ")
	}
	// The port was free a moment ago; another process may take it meanwhile, so a failed
	// start is retried once on a new port.
	var port int
	for attempt := 0; ; attempt++ {
		if port, err = freePort(); err != nil {
			return fail("find a free port", err, nil)
		}
		out, err = c.command(ctx, "pg_ctl", "start", "-w", "-t", "60", "-D", c.data(), "-l", c.log(), "-o", options(port)).CombinedOutput()
		if err == nil {
			break
		}
		if attempt == 1 {
			return fail("pg_ctl start", err, out)
		}
		c.command(ctx, "pg_ctl", "stop", "-D", c.data(), "-m", "immediate").Run()
	}
	c.dsn = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	if err := adminExec(ctx, c.dsn, "SELECT 1"); err != nil {
		return fail("connect", err, nil)
	}
	c.took = time.Since(began)
	return c, nil
}

// stop shuts the server down fast (nothing in it is worth a clean checkpoint) and removes
// its directory.
func (c *localCluster) stop() {
	if _, err := os.Stat(filepath.Join(c.data(), "postmaster.pid")); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := c.command(ctx, "pg_ctl", "stop", "-w", "-D", c.data(), "-m", "immediate").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "storetest: stop PostgreSQL: %v\n%s", err, out)
		}
	}
	os.RemoveAll(c.dir)
}

const (
	clusterPrefix = "enrichd-pg-"
	ownerFile     = "owner.pid"
)

// memoryDir is where a cluster goes when the machine has room there: every test creates
// and drops a database of a few hundred files, and on ext4 creating a file among many
// just deleted scans the inode table (recently_deleted): a quarter of the PostgreSQL
// HTTP suite's CPU on a disk, by perf. Nothing of the cluster is worth keeping anyway.
const memoryDir = "/dev/shm"

// memoryRoom is the free space memoryDir must have to hold a cluster: the largest test
// database is tens of megabytes, and several test processes run a cluster each.
const memoryRoom = 2 << 30

const tmpfsMagic = 0x01021994 // TMPFS_MAGIC in linux/magic.h

// clusterBase is the directory a new cluster's directory goes in: memoryDir when it is a
// tmpfs with memoryRoom free, else the temp directory.
func clusterBase() string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(memoryDir, &st); err == nil && st.Type == tmpfsMagic &&
		st.Bavail*uint64(st.Bsize) >= memoryRoom && syscall.Access(memoryDir, 2 /* W_OK */) == nil {
		return memoryDir
	}
	return os.TempDir()
}

// reapOrphans stops the clusters of test processes that died without stopping theirs
// (SIGKILL, a -timeout panic): left alone, each would hold its memory and disk until the
// machine restarts. A cluster whose owner still runs is never touched.
func reapOrphans(bin string) {
	var dirs []string
	bases := []string{memoryDir}
	if os.TempDir() != memoryDir {
		bases = append(bases, os.TempDir())
	}
	for _, base := range bases {
		found, _ := filepath.Glob(filepath.Join(base, clusterPrefix+"*"))
		dirs = append(dirs, found...)
	}
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // not ours, or its owner is still setting it up
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || processAlive(pid) {
			continue
		}
		c := &localCluster{bin: bin, dir: dir}
		if fi, err := os.Stat(dir); err == nil {
			if owner := fileOwner(fi); owner != "" && owner != currentUser() {
				c.asUser = owner
			}
		}
		c.stop()
	}
}

func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	// A killed process nobody has reaped yet still answers signal 0.
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) == 0 || fields[0] != "Z"
}

func fileOwner(fi os.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	u, err := user.LookupId(strconv.Itoa(int(st.Uid)))
	if err != nil {
		return ""
	}
	return u.Username
}

func currentUser() string {
	u, err := user.Current()
	if err != nil {
		return ""
	}
	return u.Username
}

func stopCluster() {
	clusterMu.Lock()
	defer clusterMu.Unlock()
	if cluster != nil {
		cluster.stop()
		cluster = nil
	}
}

// findPostgresBin finds the directory holding initdb and pg_ctl: PATH first, then the
// newest /usr/lib/postgresql/N/bin (Debian keeps the server tools off PATH).
func findPostgresBin() (string, error) {
	if initdb, err := exec.LookPath("initdb"); err == nil {
		if _, err := exec.LookPath("pg_ctl"); err == nil {
			// Debian's /usr/local/bin or /usr/bin may hold symlinks: the directory the
			// server binary lives in is the one that also has postgres itself.
			if real, err := filepath.EvalSymlinks(initdb); err == nil {
				initdb = real
			}
			return filepath.Dir(initdb), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if isExecutable(filepath.Join(d, "initdb")) && isExecutable(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	return "", errNoPostgres
}

func version(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// adminExec runs one statement on its own connection: CREATE/DROP DATABASE cannot run
// inside a transaction, and a connection per call keeps nothing open between tests.
func adminExec(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// withDatabase returns dsn pointing at database name instead.
func withDatabase(dsn, name string) string {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		// A keyword/value DSN ("host=... dbname=..."): a later dbname wins.
		return dsn + " dbname=" + name
	}
	u.Path = "/" + name
	q := u.Query()
	if q.Get("sslmode") == "" {
		q.Set("sslmode", "disable")
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
