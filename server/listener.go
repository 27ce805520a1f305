package server

import (
	"context"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Listener accepts the connections of one address within HTTPLimits, so that no client
// address can take the connections every other client needs:
//
//   - A client address (for IPv6, a /64: see peerAddr) may hold at most
//     MaxConnsPerAddr connections. One more is closed as soon as it is accepted,
//     before anything is read from it, unless that address has a keep-alive
//     connection waiting idle for its next request: that one is closed instead, since
//     it is the same client's.
//   - At most MaxConns connections are open at once. When that many are open, the
//     keep-alive connection idle the longest is closed to make room for a new one;
//     with none idle, new connections wait (in the kernel's backlog) until one closes.
//
// It knows which connections are idle from the http.Server that HTTPServer builds.
// It also answers the requests net/http refuses before any handler sees them (headers
// too large, a malformed request) with the API's JSON error (see parserError).
type Listener struct {
	net.Listener
	limits HTTPLimits
	events *listenerEvents

	mu      sync.Mutex
	open    int                        // connections accepted and not closed
	perAddr map[netip.Addr]int         // by client address, with the one an Accept waits room for
	idle    map[*limitedConn]time.Time // keep-alive connections between requests, since when
	// changed is closed, and replaced, when a connection closes or turns idle while
	// an Accept waits for room (waiting says so): what that Accept waits for.
	changed chan struct{}
	waiting bool
	closed  chan struct{}
	once    sync.Once
}

// listenerEvents are what a Listener counts and logs; the Server that made it owns
// them.
type listenerEvents struct {
	refused    func(addr netip.Addr, limit int) // over the per-address cap
	idleClosed func()                           // closed to make room for a new connection
	malformed  func(status int)                 // a request net/http refused, answered as JSON
}

// listenerEvents counts what s's listeners refuse in its metrics, and logs refused
// connections at most once a minute, so that an attack does not flood the log.
func (s *Server) listenerEvents() *listenerEvents {
	refused := s.metrics.counter("enrichd_http_connections_refused_total", "reason", "per_address")
	idleClosed := s.metrics.counter("enrichd_http_idle_connections_closed_total")
	return &listenerEvents{
		refused: func(addr netip.Addr, limit int) {
			refused.Inc()
			s.refusals.note(s.log, addr, limit)
		},
		idleClosed: idleClosed.Inc,
		malformed: func(status int) {
			s.metrics.counter("enrichd_http_malformed_requests_total", "status", strconv.Itoa(status)).Inc()
		},
	}
}

// refusalLog says in the log that connections are being refused: the first refusal,
// then one line a minute at most while they go on, with how many there were.
type refusalLog struct {
	mu     sync.Mutex
	logged time.Time
	since  int // refusals not logged yet
}

func (r *refusalLog) note(logger *slog.Logger, addr netip.Addr, limit int) {
	r.mu.Lock()
	r.since++
	now := time.Now()
	if now.Sub(r.logged) < time.Minute {
		r.mu.Unlock()
		return
	}
	n := r.since
	r.logged, r.since = now, 0
	r.mu.Unlock()
	shown := addr.String()
	if addr.Is6() {
		shown += "/64"
	}
	logger.Warn("connections refused: a client address already holds as many as --max-conns-per-addr allows",
		"addr", shown, "limit", limit, "refused", n)
}

// Listen listens on addr for connections bounded by limits; what it refuses and closes
// is counted in s's metrics.
func (s *Server) Listen(addr string, limits HTTPLimits) (*Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	l := newListener(ln, limits, s.listenerEvents())
	s.listenersMu.Lock()
	s.listeners = append(s.listeners, l)
	s.listenersMu.Unlock()
	return l, nil
}

func newListener(ln net.Listener, limits HTTPLimits, events *listenerEvents) *Listener {
	return &Listener{
		Listener: ln,
		limits:   limits.withDefaults(),
		events:   events,
		perAddr:  map[netip.Addr]int{},
		idle:     map[*limitedConn]time.Time{},
		changed:  make(chan struct{}),
		closed:   make(chan struct{}),
	}
}

// HTTPServer returns an http.Server for h within the listener's limits that tells the
// listener which of its connections are idle. Serve it on this listener.
func (l *Listener) HTTPServer(h http.Handler, errorLog *log.Logger) *http.Server {
	hs := l.limits.HTTPServer(h, errorLog)
	hs.ConnState = l.connState
	hs.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, c)
	}
	hs.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// From here until the connection turns idle, what is written to it is the
		// handler's answer, never net/http's refusal of a request (see Write).
		if lc, ok := r.Context().Value(connKey{}).(*limitedConn); ok {
			lc.responding.Store(true)
		}
		h.ServeHTTP(w, r)
	})
	return hs
}

// connKey is the context key under which HTTPServer's handler finds its connection.
type connKey struct{}

// Open is the number of connections open now.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// Accept returns the next connection whose address is under its cap, closing those
// over it at once, once there is room for it under MaxConns: made by closing the
// connection idle the longest when there is one, else waited for.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := peerAddr(c)
		if !l.admit(addr) {
			c.Close() // before any read: the address holds its share
			l.events.refused(addr, l.limits.MaxConnsPerAddr)
			continue
		}
		if err := l.takeSlot(); err != nil {
			l.mu.Lock()
			l.release(addr)
			l.mu.Unlock()
			c.Close()
			return nil, err
		}
		return &limitedConn{Conn: c, l: l, addr: addr}, nil
	}
}

// admit counts a new connection from addr if the address is under its cap, or can be
// brought under it by closing one of its own idle connections; false if it cannot.
func (l *Listener) admit(addr netip.Addr) bool {
	if !addr.IsValid() {
		return true
	}
	for {
		l.mu.Lock()
		if l.perAddr[addr] < l.limits.MaxConnsPerAddr {
			l.perAddr[addr]++
			l.mu.Unlock()
			return true
		}
		victim := l.longestIdle(addr, true)
		l.mu.Unlock()
		if victim == nil {
			return false
		}
		victim.Close() // gives back the address's share, which the loop takes
		l.events.idleClosed()
	}
}

// takeSlot counts an admitted connection among those open, closing the connection
// idle the longest to make room, or waiting for one to close, when the listener is
// full.
func (l *Listener) takeSlot() error {
	for {
		l.mu.Lock()
		if l.open < l.limits.MaxConns {
			l.open++
			l.mu.Unlock()
			return nil
		}
		victim := l.longestIdle(netip.Addr{}, false)
		changed := l.changed
		l.waiting = victim == nil
		l.mu.Unlock()
		if victim != nil {
			victim.Close() // gives back its slot, which the loop takes
			l.events.idleClosed()
			continue
		}
		select {
		case <-changed:
		case <-l.closed:
			return net.ErrClosed
		}
	}
}

// release forgets a connection from addr. Called with mu held.
func (l *Listener) release(addr netip.Addr) {
	if !addr.IsValid() {
		return
	}
	if l.perAddr[addr]--; l.perAddr[addr] <= 0 {
		delete(l.perAddr, addr)
	}
}

// longestIdle is the connection idle the longest (of addr only, when only is set),
// taken out of the idle set so that no one else closes it too; nil if none.
func (l *Listener) longestIdle(addr netip.Addr, only bool) *limitedConn {
	var victim *limitedConn
	var since time.Time
	for c, t := range l.idle {
		if only && c.addr != addr {
			continue
		}
		if victim == nil || t.Before(since) {
			victim, since = c, t
		}
	}
	if victim != nil {
		delete(l.idle, victim)
	}
	return victim
}

// signal wakes an Accept waiting for room, if one is. Called with mu held.
func (l *Listener) signal() {
	if l.waiting {
		close(l.changed)
		l.changed = make(chan struct{})
		l.waiting = false
	}
}

// connState is the http.Server's ConnState hook: it keeps the set of idle connections.
func (l *Listener) connState(c net.Conn, state http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	if state == http.StateIdle {
		lc.responding.Store(false) // the answer is written; the next request is read
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if state == http.StateIdle && !lc.isClosed() {
		l.idle[lc] = time.Now()
		l.signal()
		return
	}
	delete(l.idle, lc)
}

// Close stops accepting; connections already accepted stay open until the
// http.Server closes them.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// peerAddr is the client address a connection counts against: the peer's IPv4
// address (one mapped into IPv6 read as IPv4), or for IPv6 the first address of the
// peer's /64, since one host or subscriber is given a whole /64 and can dial from any
// address in it; the zero Addr for a connection that is not TCP, which has no cap.
func peerAddr(c net.Conn) netip.Addr {
	a, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.Addr{}
	}
	addr := a.AddrPort().Addr().Unmap()
	if addr.Is6() {
		addr = netip.PrefixFrom(addr.WithZone(""), 64).Masked().Addr()
	}
	return addr
}

// limitedConn is an accepted connection: closing it gives its slot back.
type limitedConn struct {
	net.Conn
	l      *Listener
	addr   netip.Addr
	once   sync.Once
	closed bool // under l.mu
	// responding is set while a handler answers a request on it, until the answer is
	// written: its writes then are the handler's, whatever they look like.
	responding atomic.Bool
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		l := c.l
		l.mu.Lock()
		c.closed = true
		l.open--
		l.release(c.addr)
		delete(l.idle, c)
		l.signal()
		l.mu.Unlock()
	})
	return err
}

// isClosed says whether Close was called. Called with l.mu held.
func (c *limitedConn) isClosed() bool { return c.closed }

// CloseWrite half-closes the connection, as net/http does before closing one whose
// request it refused, so that the client reads the answer rather than a reset.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
