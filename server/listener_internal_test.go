package server

import (
	"bufio"
	"context"
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

// Every way a connection ends gives back what it counted: closed by its client,
// refused over its address's cap, closed idle to make room, refused by net/http,
// and at shutdown, which also ends an Accept waiting for room.
func TestEveryClosedConnectionIsUncounted(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newListener(inner, HTTPLimits{MaxConns: 3, MaxConnsPerAddr: 2, IdleTimeout: time.Minute},
		&listenerEvents{refused: func(netip.Addr, int) {}, idleClosed: func() {}, malformed: func(int) {}})
	hs := l.HTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }), nil)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(l) }()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	dial := func(local, send string) net.Conn {
		t.Helper()
		c, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}).Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, send)
		return c
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				l.mu.Lock()
				defer l.mu.Unlock()
				t.Fatalf("%s: open %d, by address %v, idle %d", what, l.open, l.perAddr, len(l.idle))
			}
		}
	}
	counted := func(open, addrs, idle int) func() bool {
		return func() bool {
			l.mu.Lock()
			defer l.mu.Unlock()
			return l.open == open && len(l.perAddr) == addrs && len(l.idle) == idle
		}
	}
	get := "GET / HTTP/1.1\r\nHost: x\r\n\r\n"

	// Two idle keep-alive connections from 127.0.0.1, then a third from it: the
	// older idle one is closed for it, and the third is served and closed.
	a := dial("127.0.0.1", get)
	bufio.NewReader(a).ReadString('k')
	b := dial("127.0.0.1", get)
	bufio.NewReader(b).ReadString('k')
	waitFor("two idle", counted(2, 1, 2))
	io.ReadAll(dial("127.0.0.1", "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
	waitFor("one idle left", counted(1, 1, 1))
	// A request net/http refuses.
	io.ReadAll(dial("127.0.0.2", "GARBAGE\r\n\r\n"))
	// A client that goes away.
	dial("127.0.0.3", "GET / HT").Close()
	waitFor("the idle one only", counted(1, 1, 1))

	// Full: b idle is closed for the first of these; then an Accept waits for room.
	dial("127.0.0.4", "GET / HT")
	dial("127.0.0.4", "GET / HT")
	dial("127.0.0.5", "GET / HT")
	waitFor("full of stalled ones", counted(3, 2, 0))
	dial("127.0.0.6", "GET / HT")
	waitFor("one waiting for room", counted(3, 3, 0))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go hs.Shutdown(ctx)
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return: its Accept still waits for room")
	}
	hs.Close() // the stalled ones, which Shutdown would wait for
	waitFor("all closed", counted(0, 0, 0))
}
