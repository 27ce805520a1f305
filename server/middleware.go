package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"golang.org/x/time/rate"
)

type ctxKey int

const (
	requestInfoKey ctxKey = iota
	principalKey
)

// requestInfo is what the request's log line says, filled in as the request goes.
type requestInfo struct {
	id    string
	route string
	orgID string
	err   error // an internal error behind a 500
	// clientClosed: the client hung up before the answer, and the error is the
	// request's cancellation showing through. Logged and counted as 499, not as a 500.
	clientClosed bool
	// panicked: the handler panicked; a bug of ours even when the client has gone.
	panicked bool
}

// statusClientClosed is the status a request is logged and counted with when its
// client hung up before the answer (nginx's "client closed request"). No client ever
// sees it.
const statusClientClosed = 499

// clientClosed says whether the request's client went away: the server cancels a
// request's context when its connection closes. Whatever the handler failed with
// then (the cancellation itself, or a query interrupted by it) is the client's doing.
func clientClosed(r *http.Request) bool {
	return errors.Is(r.Context().Err(), context.Canceled) && !info(r).panicked
}

// abortStream ends a download that failed after its first bytes were sent. The status
// is written already, so the connection is dropped: the client sees a broken download,
// not a file that looks complete and is not. It is logged once, as msg with the
// requestId (the request's own line is not written for a dropped connection).
func (s *Server) abortStream(r *http.Request, msg string, err error, attrs ...any) {
	ri := info(r)
	ri.err = err
	if clientClosed(r) {
		ri.clientClosed = true
	} else {
		s.log.Error(msg, append([]any{"requestId", ri.id, "err", err.Error()}, attrs...)...)
	}
	panic(http.ErrAbortHandler)
}

// quietRoute is a probe or a scrape: logged at debug level unless it fails, since it
// comes every few seconds, and not counted as activity.
func quietRoute(route string) bool {
	return route == routeHealthz || route == routeReadyz || route == routeMetrics
}

func info(r *http.Request) *requestInfo {
	if ri, ok := r.Context().Value(requestInfoKey).(*requestInfo); ok {
		return ri
	}
	return &requestInfo{}
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection: to flush a stream, or to
// give a long MCP call a later write deadline.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// logRequests writes one log line a request (method, route, path, status, duration,
// the organization once authenticated, and the requestId that the response's
// X-Request-Id header and any 500 body also show) and counts it in the metrics.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		var id [8]byte
		rand.Read(id[:])
		ri := &requestInfo{id: hex.EncodeToString(id[:])}
		w.Header().Set("X-Request-Id", ri.id)
		sw := &statusWriter{ResponseWriter: w}
		s.serveSafely(sw, r.WithContext(context.WithValue(r.Context(), requestInfoKey, ri)), next)
		switch {
		case ri.clientClosed:
			// Whatever was written before the client left, it got no answer: logged and
			// counted as a hang-up.
			sw.status = statusClientClosed
		case sw.status == 0:
			sw.status = http.StatusOK // a handler that wrote nothing answered 200
		}
		took := time.Since(start)
		s.metrics.request(ri.route, sw.status, took)
		attrs := []slog.Attr{
			slog.String("method", r.Method), slog.String("route", ri.route), slog.String("path", r.URL.Path),
			slog.Int("status", sw.status), slog.Float64("duration_ms", float64(took.Microseconds())/1000),
			slog.String("requestId", ri.id),
		}
		if ri.orgID != "" {
			attrs = append(attrs, slog.String("org", ri.orgID))
		}
		level := slog.LevelInfo
		if quietRoute(ri.route) {
			if sw.status < 400 {
				level = slog.LevelDebug
			}
		} else {
			s.bg.Active()
		}
		switch {
		case ri.clientClosed:
			// The client's doing: worth a line, not an alert.
			attrs = append(attrs, slog.String("err", "client closed the request: "+ri.err.Error()))
		case ri.err != nil:
			level = slog.LevelError
			attrs = append(attrs, slog.String("err", ri.err.Error()))
		}
		s.log.LogAttrs(r.Context(), level, "request", attrs...)
	})
}

// serveSafely runs a handler so that a panic in it answers the contract's 500 with
// the requestId, logged once with its stack, instead of a dropped connection.
func (s *Server) serveSafely(w *statusWriter, r *http.Request, next http.Handler) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		if v == http.ErrAbortHandler {
			panic(v) // the handler's way of dropping the connection on purpose
		}
		s.panicked("request", v, "requestId", info(r).id)
		info(r).panicked = true
		err := fmt.Errorf("panic: %v", v)
		if w.status == 0 {
			s.error(w, r, err)
			return
		}
		info(r).err = err // the status is written: the log line says why it went wrong
	}()
	next.ServeHTTP(w, r)
}

// route names the route in the request's log line.
func (s *Server) route(name string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info(r).route = name
		next.ServeHTTP(w, r)
	})
}

// authed rate-limits by client address, authenticates the bearer key, rate-limits by
// key, then refuses a query string that does not say one thing (plainQuery). A
// request with two Authorization headers is not authenticated: which key it meant,
// and so which organization, is not for the server to guess.
func (s *Server) authed(next http.Handler) http.Handler {
	return s.limitIP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Values("Authorization")
		if len(auth) != 1 {
			s.error(w, r, enrich.Errorf(enrich.KindUnauthorized, "Unauthorized"))
			return
		}
		scheme, key, _ := strings.Cut(auth[0], " ")
		if !strings.EqualFold(scheme, "Bearer") {
			s.error(w, r, enrich.Errorf(enrich.KindUnauthorized, "Unauthorized"))
			return
		}
		p, err := s.db.Authenticate(r.Context(), strings.TrimSpace(key))
		if err != nil {
			s.error(w, r, err)
			return
		}
		info(r).orgID = p.OrgID
		if wait, ok := s.keyLimits.allow(p.KeyID); !ok {
			s.error(w, r, rateLimited(wait, "this API key"))
			return
		}
		if err := plainQuery(r.URL.RawQuery); err != nil {
			s.error(w, r, err)
			return
		}
		if err := RefusedID(r); err != nil {
			s.error(w, r, err)
			return
		}
		// What the request does is the key's, for the audit log (ActingOf).
		ctx := acting(context.WithValue(r.Context(), principalKey, p), store.By{Actor: store.KeyActor(p), RequestID: info(r).id})
		next.ServeHTTP(w, r.WithContext(ctx))
	}))
}

// plainQuery refuses a query string that does not say one thing: one that is not
// well-formed (a bad escape such as %zz, a semicolon), which url.Values would read in
// part and quietly drop the rest of, and a parameter sent more than once, of which
// url.Values.Get would take the first. Every handler behind authed reads its query
// with url.Values, so each may.
func plainQuery(raw string) error {
	if raw == "" {
		return nil
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return enrich.Errorf(enrich.KindInvalid, "the query string is not well-formed (%s): percent-encode each name and value (RFC 3986)", clip(err.Error(), 120))
	}
	for name, values := range q {
		if len(values) > 1 {
			return enrich.Errorf(enrich.KindInvalid, "the query parameter %q is sent %d times; send it once", clip(name, 64), len(values))
		}
	}
	return nil
}

func principal(r *http.Request) *store.Principal {
	return r.Context().Value(principalKey).(*store.Principal)
}

func (s *Server) limitIP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		if wait, ok := s.ipLimits.allow(host); !ok {
			s.error(w, r, rateLimited(wait, "your address"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func rateLimited(wait time.Duration, who string) error {
	secs := max(1, int(math.Ceil(wait.Seconds())))
	return &enrich.Error{Kind: enrich.KindTooManyRequests, Code: "rate_limited", RetryAfter: secs,
		Message: "too many requests from " + who + "; wait Retry-After seconds and try again"}
}

// limiter keeps one token bucket per key (a client address or an API key). With
// share n it lets each key through at 1/n of its rate and burst (a burst of at least
// one): the limit of a key that n replicas serve is split between them.
type limiter struct {
	rate    Rate
	mu      sync.Mutex
	share   int
	buckets map[string]*bucket
	swept   time.Time
}

type bucket struct {
	lim   *rate.Limiter
	share int // the share lim was set for
	seen  time.Time
}

func newLimiter(r Rate) *limiter {
	return &limiter{rate: r, share: 1, buckets: map[string]*bucket{}}
}

// setShare sets how many replicas share each key's limit, and returns the share it
// had; buckets take the new share the next time they are used.
func (l *limiter) setShare(n int) int {
	n = max(n, 1)
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.share
	l.share = n
	return old
}

// shared is r divided among n replicas.
func shared(r Rate, n int) (rate.Limit, int) {
	return r.Limit / rate.Limit(n), max(1, r.Burst/n)
}

// allow takes a token from key's bucket, or says how long until one is there.
func (l *limiter) allow(key string) (time.Duration, bool) {
	if l.rate.Limit <= 0 {
		return 0, true
	}
	now := time.Now()
	l.mu.Lock()
	b, ok := l.buckets[key]
	limit, burst := shared(l.rate, l.share)
	switch {
	case !ok:
		b = &bucket{lim: rate.NewLimiter(limit, burst), share: l.share}
		l.buckets[key] = b
	case b.share != l.share:
		b.lim.SetLimitAt(now, limit)
		b.lim.SetBurstAt(now, burst)
		b.share = l.share
	}
	b.seen = now
	// A bucket idle long enough to be full again is the same as a new one: drop it.
	refill := max(time.Minute, time.Duration(float64(l.rate.Burst)/float64(l.rate.Limit)*float64(time.Second)))
	if now.Sub(l.swept) > time.Minute {
		for k, old := range l.buckets {
			if now.Sub(old.seen) > refill {
				delete(l.buckets, k)
			}
		}
		l.swept = now
	}
	l.mu.Unlock()
	res := b.lim.ReserveN(now, 1)
	if !res.OK() {
		return time.Second, false
	}
	if wait := res.DelayFrom(now); wait > 0 {
		res.CancelAt(now)
		return wait, false
	}
	return 0, true
}
