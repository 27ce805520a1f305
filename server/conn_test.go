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

	"github.com/matryer/is"
)

// serveLimited serves e's handler the way serve does, through the limits' listener and
// http.Server, and returns the address.
func serveLimited(t *testing.T, e *env, limits server.HTTPLimits) string {
	t.Helper()
	ln, err := limits.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := limits.HTTPServer(e.srv, nil)
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
	is := is.New(t)
	e := newEnv(t)
	readTimeout := 300 * time.Millisecond
	addr := serveLimited(t, e, server.HTTPLimits{ReadHeaderTimeout: readTimeout, ReadTimeout: readTimeout, WriteTimeout: 5 * time.Second, IdleTimeout: time.Minute})

	// The server's deadline runs from when it starts reading the connection, which can
	// be before dial returns: the clock starts before dialing.
	start := time.Now()
	c := dial(t, addr)
	fmt.Fprintf(c, "POST /v1/companies/enrich HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"domain\":", e.key)
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

	e.nothingCharged()
}

func TestOpenConnectionsAreCapped(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	addr := serveLimited(t, e, server.HTTPLimits{MaxConns: 2, ReadHeaderTimeout: time.Minute, IdleTimeout: time.Minute})

	// Two keep-alive connections, each answered once, then left open.
	request := "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
	held := []net.Conn{dial(t, addr), dial(t, addr)}
	for _, c := range held {
		io.WriteString(c, request)
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		is.NoErr(err)
		is.Equal(res.StatusCode, http.StatusOK)
		res.Body.Close()
	}

	// A third is not served while they are open...
	third := dial(t, addr)
	io.WriteString(third, request)
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

func TestDefaultLimitsBoundAConnection(t *testing.T) {
	is := is.New(t)
	l := server.DefaultConfig().HTTP
	for _, d := range []time.Duration{l.ReadHeaderTimeout, l.ReadTimeout, l.WriteTimeout, l.IdleTimeout} {
		is.True(d > 0)
	}
	is.True(l.ReadTimeout <= time.Minute)
	is.True(l.WriteTimeout > l.ReadTimeout+15*time.Second) // the body, then the slowest handler
	is.True(l.MaxHeaderBytes > 0 && l.MaxHeaderBytes < 1<<20)
	is.True(l.MaxConns > 0)
	// Zero limits, as a program embedding the server may leave them, take the defaults.
	hs := server.HTTPLimits{}.HTTPServer(http.NotFoundHandler(), nil)
	is.Equal(hs.ReadTimeout, l.ReadTimeout)
	is.Equal(hs.WriteTimeout, l.WriteTimeout)
	is.Equal(hs.IdleTimeout, l.IdleTimeout)
	is.Equal(hs.ReadHeaderTimeout, l.ReadHeaderTimeout)
	is.Equal(hs.MaxHeaderBytes, l.MaxHeaderBytes)
}

func TestOversizedHeadersAreRefused(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	addr := serveLimited(t, e, server.HTTPLimits{MaxHeaderBytes: 8 << 10})
	send := func(padding int) int {
		c := dial(t, addr)
		fmt.Fprintf(c, "POST /v1/companies/enrich HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nX-Padding: %s\r\nContent-Length: 21\r\n\r\n{\"domain\":\"acme.com\"}",
			e.key, strings.Repeat("p", padding))
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		is.NoErr(err)
		return res.StatusCode
	}
	// Past the limit (and the 4 KiB net/http allows over it): 431 before any handler.
	is.Equal(send(16<<10), http.StatusRequestHeaderFieldsTooLarge)
	e.nothingCharged()
	// Within it, the same request is served.
	is.Equal(send(2<<10), http.StatusAccepted)
}
