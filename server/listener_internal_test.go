package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A response body is the handler's, byte for byte, even when one write of it has
// the form of net/http's own refusal: only what net/http writes before a handler runs
// is rewritten as JSON.
func TestAHandlersBytesAreNeverTakenForAParserError(t *testing.T) {
	// Longer than both of net/http's write buffers, so that it reaches the connection
	// in one Write of its own.
	line := "400 Bad Request: " + strings.Repeat("x", 5000)
	body := "HTTP/1.1 " + line + parserErrorHeaders + line
	if _, _, ok := parserError([]byte(body)); !ok {
		t.Fatal("the body must have the form of net/http's refusal")
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newListener(inner, HTTPLimits{}, &listenerEvents{refused: func(netip.Addr, int) {}, idleClosed: func() {}, malformed: func(int) {}})
	hs := l.HTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush() // the headers go first, the body alone after them
		w.Write([]byte(body))
	}), nil)
	go hs.Serve(l)
	t.Cleanup(func() { hs.Close() })

	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprint(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(res.Body)
	if err != nil || string(got) != body {
		t.Fatalf("body: %d bytes (%v), starting %q; want the handler's %d", len(got), err, clipString(string(got), 80), len(body))
	}
}

func clipString(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// fakeListener hands Accept the connections the test sends it.
type fakeListener struct {
	conns  chan net.Conn
	closed chan struct{}
}

func (f *fakeListener) Accept() (net.Conn, error) {
	select {
	case c := <-f.conns:
		return c, nil
	case <-f.closed:
		return nil, net.ErrClosed
	}
}
func (f *fakeListener) Close() error   { close(f.closed); return nil }
func (f *fakeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv6loopback} }

// fromConn is one end of a pipe that says it comes from addr; the test holds the other.
type fromConn struct {
	net.Conn
	addr *net.TCPAddr
}

func (c fromConn) RemoteAddr() net.Addr { return c.addr }

// An IPv6 client holds a /64, and can dial from any address in it: the cap counts the
// network, or one host would pass it with as many addresses as it likes.
func TestAnIPv6NetworkIsOneAddress(t *testing.T) {
	fake := &fakeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
	refused := make(chan netip.Addr, 10)
	l := newListener(fake, HTTPLimits{MaxConns: 100, MaxConnsPerAddr: 2},
		&listenerEvents{refused: func(a netip.Addr, _ int) { refused <- a }, idleClosed: func() {}, malformed: func(int) {}})
	defer l.Close()
	accepted := make(chan net.Conn)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	// dial offers Accept a connection from addr and says whether it was accepted.
	dial := func(addr string) bool {
		t.Helper()
		server, client := net.Pipe()
		t.Cleanup(func() { server.Close(); client.Close() })
		fake.conns <- fromConn{server, net.TCPAddrFromAddrPort(netip.MustParseAddrPort(addr))}
		select {
		case <-accepted:
			return true
		case <-refused:
			return false
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: neither accepted nor refused", addr)
			return false
		}
	}
	for _, c := range []struct {
		addr string
		want bool
	}{
		{"[2001:db8:0:1::1]:4000", true},
		{"[2001:db8:0:1::2]:4000", true},
		{"[2001:db8:0:1:ffff::3]:4000", false}, // the same /64, at its cap
		{"[2001:db8:0:2::1]:4000", true},       // another network
		{"[::ffff:192.0.2.1]:4000", true},      // IPv4 mapped into IPv6 is IPv4
		{"192.0.2.1:4001", true},
		{"192.0.2.1:4002", false},
		{"192.0.2.2:4000", true}, // IPv4 counts each address
	} {
		if got := dial(c.addr); got != c.want {
			t.Errorf("%s: accepted %v, want %v", c.addr, got, c.want)
		}
	}
}
