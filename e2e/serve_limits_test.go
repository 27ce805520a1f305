package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
)

// TestServeDropsStalledConnections runs serve with a short --read-timeout from the
// environment and holds a stalled body on the API and stalled headers on the admin
// listener: both are dropped, and nothing is charged.
func TestServeDropsStalledConnections(t *testing.T) {
	is := is.New(t)
	db := newDB(t)
	key := strings.TrimSpace(mustCLI(t, "keys", "create", "--org", "acme", "--db", db))
	mustCLI(t, "credits", "grant", "--org", "acme", "--amount", "10", "--db", db)
	t.Setenv("ENRICHD_READ_TIMEOUT", "300ms") // the environment sets it as the flag would

	ctx, cancel := context.WithCancel(context.Background())
	logs, done := startServe(t, ctx, "--db", db, "--read-header-timeout", "300ms", "--write-timeout", "5s", "--admin-addr", "127.0.0.1:0")
	defer func() { cancel(); <-done }()
	api := strings.TrimPrefix(logField(t, logs, "enrichd listening", "addr"), "http://")
	admin := strings.TrimPrefix(logField(t, logs, "enrichd listening", "admin_addr"), "http://")

	stalled := map[string]string{
		api: fmt.Sprintf("POST /v1/companies/enrich HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"domain\":", key),
		admin: "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow",
	}
	for addr, partial := range stalled {
		c, err := net.Dial("tcp", addr)
		is.NoErr(err)
		defer c.Close()
		io.WriteString(c, partial)
		// Far above the 300ms under test, yet below the defaults (10s for headers,
		// 30s for a whole request), so a timeout left at its default is caught. (Serve
		// would refuse a default --read-timeout anyway: it must stay under --write-timeout.)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, err := io.ReadAll(c)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("%s: the stalled connection is still open; read %q", addr, got)
		}
	}
	is.Equal(balance(t, db, "acme"), "10") // nothing charged
}

func TestServeRefusesUnboundedConnections(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--read-timeout", "0s"}, "--read-timeout"},
		{[]string{"--idle-timeout", "0s"}, "--idle-timeout"},
		{[]string{"--write-timeout", "0s"}, "--write-timeout"},
		{[]string{"--read-header-timeout", "0s"}, "--read-header-timeout"},
		{[]string{"--read-timeout", "90s"}, "--write-timeout (1m0s) must be longer than --read-timeout (1m30s)"},
		{[]string{"--max-conns", "0"}, "--max-conns"},
		{[]string{"--max-conns-per-addr", "0"}, "--max-conns-per-addr must be at least 1"},
		{[]string{"--max-header-bytes", "100"}, "--max-header-bytes must be at least 4096"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			msg := runServeExpectError(t, append([]string{"serve", "--db", newDBPath(t), "--addr", "127.0.0.1:0"}, tt.args...)...)
			contains(t, msg, tt.want)
		})
	}
}

// TestServeHelpShowsTheDefaults checks that serve's flags show server.DefaultConfig's
// values, where the defaults are set.
func TestServeHelpShowsTheDefaults(t *testing.T) {
	t.Parallel()
	help := mustCLI(t, "serve", "--help")
	for _, want := range []string{
		`--addr string`, `(default "127.0.0.1:8080")`,
		`--rate-ip string`, `(default "100/200")`,
		`--read-header-timeout duration`, `(default 10s)`,
		`--read-timeout duration`, `(default 30s)`,
		`--write-timeout duration`, `(default 1m0s)`,
		`--idle-timeout duration`, `(default 1m0s)`,
		`--max-header-bytes int`, `(default 32768)`,
		`--max-conns int`, `(default 1024)`,
		`--max-conns-per-addr int`, `(default 64)`,
		`--shutdown-grace duration`, `(default 30s)`,
	} {
		contains(t, help, want)
	}
}

// TestServeCapsConnectionsPerAddress runs serve with --max-conns-per-addr 2: a third
// connection from one address is closed at once and counted on the admin listener's
// /metrics, and the log says so; another address is still served.
func TestServeCapsConnectionsPerAddress(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	logs, done := startServe(t, ctx, "--db", newDB(t), "--max-conns-per-addr", "2", "--admin-addr", "127.0.0.1:0")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close() // first, or the shutdown waits for the stalled ones
		}
		cancel()
		<-done
	}()
	api := strings.TrimPrefix(logField(t, logs, "enrichd listening", "addr"), "http://")
	admin := logField(t, logs, "enrichd listening", "admin_addr")

	from := func(ip string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		c, err := d.Dial("tcp", api)
		is.NoErr(err)
		conns = append(conns, c)
		return c
	}
	for range 2 {
		io.WriteString(from("127.0.0.1"), "GET /healthz HTTP/1.1\r\n") // stalled in its headers
	}
	third := from("127.0.0.1")
	third.SetReadDeadline(time.Now().Add(3 * time.Second))
	n, err := third.Read(make([]byte, 1))
	is.Equal(n, 0)
	is.True(err != nil && !errors.Is(err, os.ErrDeadlineExceeded)) // closed, not left waiting

	other := from("127.0.0.2")
	io.WriteString(other, "GET /v1/tasks HTTP/1.1\r\nHost: x\r\n\r\n")
	other.SetReadDeadline(time.Now().Add(5 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(other), nil)
	is.NoErr(err)
	is.Equal(res.StatusCode, http.StatusUnauthorized) // served: it reached the API

	metrics, err := http.Get(admin + "/metrics")
	is.NoErr(err)
	defer metrics.Body.Close()
	body, _ := io.ReadAll(metrics.Body)
	contains(t, string(body), `enrichd_http_connections_refused_total{reason="per_address"} 1`)
	contains(t, logs.String(), `"msg":"connections refused: a client address already holds as many as --max-conns-per-addr allows","addr":"127.0.0.1","limit":2`)
}
