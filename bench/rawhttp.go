package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// The load generator shares the machine with the service it measures, so its own cost
// per request decides how much CPU is left to the service. net/http's client costs
// about as much per request as the server's handling of a task read; rawClient speaks
// just the HTTP/1.1 the bench needs over keep-alive connections, like wrk or oha:
// requests written from bytes, responses read for their status, the few headers the
// bench looks at, and a body by Content-Length or chunks.

type rawClient struct {
	addr    string // host:port
	timeout time.Duration
	mu      sync.Mutex
	idle    []*rawConn
}

type rawConn struct {
	c   net.Conn
	r   *bufio.Reader
	req []byte // the request being written, reused
}

func newRawClient(addr string) *rawClient {
	return &rawClient{addr: addr, timeout: 30 * time.Second}
}

func (rc *rawClient) take() *rawConn {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if n := len(rc.idle); n > 0 {
		c := rc.idle[n-1]
		rc.idle = rc.idle[:n-1]
		return c
	}
	return nil
}

func (rc *rawClient) put(c *rawConn) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.idle = append(rc.idle, c)
}

func (rc *rawClient) closeIdle() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, c := range rc.idle {
		c.c.Close()
	}
	rc.idle = nil
}

func (rc *rawClient) dial(ctx context.Context) (*rawConn, error) {
	d := net.Dialer{Timeout: rc.timeout}
	c, err := d.DialContext(ctx, "tcp", rc.addr)
	if err != nil {
		return nil, err
	}
	return &rawConn{c: c, r: bufio.NewReaderSize(c, 16<<10)}, nil
}

// do sends one request and reads its answer. A kept-alive connection the server
// closed meanwhile is replaced once.
func (rc *rawClient) do(ctx context.Context, key, method, path, body, idemKey string) (answer, error) {
	if err := ctx.Err(); err != nil {
		return answer{}, err
	}
	for attempt := 0; ; attempt++ {
		c := rc.take()
		reused := c != nil
		if c == nil {
			var err error
			if c, err = rc.dial(ctx); err != nil {
				return answer{}, err
			}
		}
		a, keep, err := c.roundTrip(rc.addr, key, method, path, body, idemKey, rc.timeout)
		if err != nil {
			c.c.Close()
			if reused && attempt == 0 && a.status == 0 {
				continue // closed while idle: nothing was answered
			}
			return a, err
		}
		if keep {
			rc.put(c)
		} else {
			c.c.Close()
		}
		return a, nil
	}
}

func (c *rawConn) roundTrip(host, key, method, path, body, idemKey string, timeout time.Duration) (a answer, keep bool, err error) {
	b := c.req[:0]
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\nAuthorization: Bearer "...)
	b = append(b, key...)
	if idemKey != "" {
		b = append(b, "\r\nIdempotency-Key: "...)
		b = append(b, idemKey...)
	}
	if body != "" || method == "POST" {
		b = append(b, "\r\nContent-Type: application/json\r\nContent-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
	}
	b = append(b, "\r\n\r\n"...)
	b = append(b, body...)
	c.req = b
	c.c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.c.Write(b); err != nil {
		return answer{}, false, err
	}
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return answer{}, false, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return answer{}, false, fmt.Errorf("not an HTTP response: %q", line)
	}
	if a.status, err = strconv.Atoi(string(line[9:12])); err != nil {
		return answer{}, false, fmt.Errorf("bad status line %q", line)
	}
	length, chunked, keep := int64(-1), false, true
	for {
		line, err := c.r.ReadSlice('\n')
		if err != nil {
			return a, false, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.ParseInt(string(value), 10, 64); err != nil || length < 0 {
				return a, false, fmt.Errorf("bad Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			keep = !bytes.EqualFold(value, []byte("close"))
		case bytes.EqualFold(name, []byte("Idempotent-Replayed")):
			a.replayed = bytes.Equal(value, []byte("true"))
		}
	}
	switch {
	case a.status == 204 || a.status == 304 || a.status/100 == 1:
	case chunked:
		if a.body, err = readChunked(c.r); err != nil {
			return a, false, err
		}
	case length >= 0:
		a.body = make([]byte, length)
		if _, err := io.ReadFull(c.r, a.body); err != nil {
			return a, false, err
		}
	default:
		if a.body, err = io.ReadAll(c.r); err != nil {
			return a, false, err
		}
		keep = false
	}
	a.taskID = taskID(a.body)
	return a, keep, nil
}

func readChunked(r *bufio.Reader) ([]byte, error) {
	var body []byte
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i]
		}
		size, err := strconv.ParseInt(string(line), 16, 64)
		if err != nil || size < 0 {
			return nil, fmt.Errorf("bad chunk size %q", line)
		}
		if size == 0 {
			for { // trailers, then the empty line
				line, err := r.ReadSlice('\n')
				if err != nil {
					return nil, err
				}
				if len(bytes.TrimRight(line, "\r\n")) == 0 {
					return body, nil
				}
			}
		}
		start := len(body)
		body = append(body, make([]byte, size)...)
		if _, err := io.ReadFull(r, body[start:]); err != nil {
			return nil, err
		}
		if _, err := r.Discard(2); err != nil { // the chunk's CRLF
			return nil, err
		}
	}
}
