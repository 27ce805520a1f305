package server_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"enrichd/server"
	"enrichd/server/servertest"

	"github.com/matryer/is"
)

// serveLimited serves e's handler the way serve does, through the limits' listener and
// http.Server, and returns the address.
func serveLimited(t *testing.T, e *servertest.Env, limits server.HTTPLimits) string {
	t.Helper()
	ln, err := e.Srv.Listen("127.0.0.1:0", limits)
	if err != nil {
		t.Fatal(err)
	}
	hs := ln.HTTPServer(e.Srv, nil)
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedWithin reads c until the server closes it, and fails if that takes longer
// than limit, which the tests set far above the timeout under test.
func closedWithin(t *testing.T, c net.Conn, limit time.Duration) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(limit))
	got, err := io.ReadAll(c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection is still open after %v; read %q", limit, got)
	}
	return got
}

func TestAStalledBodyIsDropped(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	readTimeout := 300 * time.Millisecond
	addr := serveLimited(t, e, server.HTTPLimits{ReadHeaderTimeout: readTimeout, ReadTimeout: readTimeout, WriteTimeout: 5 * time.Second, IdleTimeout: time.Minute})

	// The server's deadline runs from when it starts reading the connection, which can
	// be before dial returns: the clock starts before dialing.
	start := time.Now()
	c := dial(t, addr)
	fmt.Fprintf(c, "POST /v1/companies/enrich HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"domain\":", e.Key)
	got := closedWithin(t, c, 20*time.Second)
	is.True(time.Since(start) >= readTimeout) // held no shorter than the timeout
	// The handler saw the body stop and said so before the connection was closed.
	res, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(got))), nil)
	is.NoErr(err)
	is.Equal(res.StatusCode, http.StatusBadRequest)
	body, _ := io.ReadAll(res.Body)
	is.True(strings.Contains(string(body), "did not arrive within the server's read timeout"))

	// Stalled headers are dropped too, without an answer.
	c2 := dial(t, addr)
	fmt.Fprintf(c2, "POST /v1/companies/enrich HTTP/1.1\r\nHost: x\r\nAuthoriz")
	closedWithin(t, c2, 20*time.Second)

	e.NothingCharged()
}

func TestOpenConnectionsAreCapped(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	addr := serveLimited(t, e, server.HTTPLimits{MaxConns: 2, ReadHeaderTimeout: time.Minute, IdleTimeout: time.Minute})

	// Two connections in the middle of their request headers: neither is idle.
	held := []net.Conn{dial(t, addr), dial(t, addr)}
	for _, c := range held {
		io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n")
	}

	// A third is not served while they are open...
	third := dial(t, addr)
	io.WriteString(third, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	third.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	_, err := third.Read(make([]byte, 1))
	is.True(errors.Is(err, os.ErrDeadlineExceeded)) // no answer past the cap

	// ...and is as soon as one closes.
	held[0].Close()
	third.SetReadDeadline(time.Now().Add(20 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(third), nil)
	is.NoErr(err)
	is.Equal(res.StatusCode, http.StatusOK)
}

// get sends GET /healthz on c and reads the answer, as a keep-alive client does.
func get(t *testing.T, c net.Conn, r *bufio.Reader) error {
	t.Helper()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return err
	}
	res, err := http.ReadResponse(r, nil)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	io.Copy(io.Discard, res.Body)
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", res.StatusCode)
	}
	return nil
}

// A full listener closes the keep-alive connection idle the longest, so that a new
// client is served rather than an idle one kept.
func TestIdleConnectionsMakeRoomForNewOnes(t *testing.T) {
	// Not in parallel: what it checks is bounded in time, which other tests running
	// at once would stretch.
	is := is.New(t)
	e := servertest.NewEnv(t)
	addr := serveLimited(t, e, server.HTTPLimits{MaxConns: 2, IdleTimeout: time.Minute})

	older, newer := dial(t, addr), dial(t, addr)
	olderR, newerR := bufio.NewReader(older), bufio.NewReader(newer)
	is.NoErr(get(t, older, olderR))
	time.Sleep(20 * time.Millisecond)
	is.NoErr(get(t, newer, newerR))
	time.Sleep(20 * time.Millisecond) // both idle now, older the longer

	third := dial(t, addr)
	start := time.Now()
	is.NoErr(get(t, third, bufio.NewReader(third)))
	is.True(time.Since(start) < 5*time.Second) // served without waiting for the idle timeout

	// The older idle connection was closed; the newer one still serves.
	older.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := olderR.ReadByte()
	is.True(err != nil && !errors.Is(err, os.ErrDeadlineExceeded)) // closed, not just quiet
	is.NoErr(get(t, newer, newerR))
	e.WaitMetric("enrichd_http_idle_connections_closed_total", 1)
}

// dialFrom connects to addr from the loopback address local (127.0.0.0/8 is all
// loopback on Linux), so that one test can be several clients.
func dialFrom(t *testing.T, local, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedAtOnce says whether the server closed c without an answer within a short
// time, far less than any of its timeouts.
func closedAtOnce(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, err := c.Read(make([]byte, 1))
	return n == 0 && err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}

func TestConnectionsPerAddressAreCapped(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	addr := serveLimited(t, e, server.HTTPLimits{MaxConns: 100, MaxConnsPerAddr: 3, ReadHeaderTimeout: time.Minute, IdleTimeout: time.Minute})

	// 127.0.0.1 holds its three, stalled in their headers.
	for range 3 {
		io.WriteString(dialFrom(t, "127.0.0.1", addr), "GET /healthz HTTP/1.1\r\n")
	}
	// A fourth from it is closed at once, without an answer...
	fourth := dialFrom(t, "127.0.0.1", addr)
	is.True(closedAtOnce(fourth))
	e.WaitMetric(`enrichd_http_connections_refused_total{reason="per_address"}`, 1)
	// ...while another address is served.
	other := dialFrom(t, "127.0.0.2", addr)
	is.NoErr(get(t, other, bufio.NewReader(other)))

	// An address at its cap with keep-alive connections idle: its new connection is
	// served, and its own idle one closed, rather than refused.
	// The server marks a connection idle just after it writes the answer the client
	// reads: a pause between them keeps their order plain on a loaded machine (under
	// -race, next to other test processes, the marks were seen out of order).
	var idle []net.Conn
	for range 3 {
		c := dialFrom(t, "127.0.0.3", addr)
		is.NoErr(get(t, c, bufio.NewReader(c)))
		idle = append(idle, c)
		time.Sleep(200 * time.Millisecond)
	}
	next := dialFrom(t, "127.0.0.3", addr)
	is.NoErr(get(t, next, bufio.NewReader(next)))
	is.True(closedAtOnce(idle[0])) // the one idle the longest
	m := e.WaitMetric("enrichd_http_idle_connections_closed_total", 1)
	is.Equal(m[`enrichd_http_connections_refused_total{reason="per_address"}`], 1.0)
	// Open now: 3 stalled, the other address's (until it goes), 2 idle and next.
	is.True(m["enrichd_http_connections_open"] >= 6)
}

func TestDefaultLimitsBoundAConnection(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	l := server.DefaultConfig().HTTP
	for _, d := range []time.Duration{l.ReadHeaderTimeout, l.ReadTimeout, l.WriteTimeout, l.IdleTimeout} {
		is.True(d > 0)
	}
	is.True(l.ReadTimeout <= time.Minute)
	is.True(l.WriteTimeout > l.ReadTimeout+15*time.Second) // the body, then the slowest handler
	is.True(l.MaxHeaderBytes > 0 && l.MaxHeaderBytes < 1<<20)
	is.True(l.MaxConns > 0)
	is.True(l.MaxConnsPerAddr > 0 && l.MaxConnsPerAddr <= l.MaxConns/8) // one address takes a small share
	// Zero limits, as a program embedding the server may leave them, take the defaults.
	hs := server.HTTPLimits{}.HTTPServer(http.NotFoundHandler(), nil)
	is.Equal(hs.ReadTimeout, l.ReadTimeout)
	is.Equal(hs.WriteTimeout, l.WriteTimeout)
	is.Equal(hs.IdleTimeout, l.IdleTimeout)
	is.Equal(hs.ReadHeaderTimeout, l.ReadHeaderTimeout)
	is.Equal(hs.MaxHeaderBytes, l.MaxHeaderBytes)
}

func TestOversizedHeadersAreRefused(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	addr := serveLimited(t, e, server.HTTPLimits{MaxHeaderBytes: 8 << 10})
	send := func(padding int) int {
		c := dial(t, addr)
		fmt.Fprintf(c, "POST /v1/companies/enrich HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nX-Padding: %s\r\nContent-Length: 21\r\n\r\n{\"domain\":\"acme.com\"}",
			e.Key, strings.Repeat("p", padding))
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		is.NoErr(err)
		return res.StatusCode
	}
	// Past the limit (and the 4 KiB net/http allows over it): 431 before any handler.
	is.Equal(send(16<<10), http.StatusRequestHeaderFieldsTooLarge)
	e.NothingCharged()
	// Within it, the same request is served.
	is.Equal(send(2<<10), http.StatusAccepted)
}
