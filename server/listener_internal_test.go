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
