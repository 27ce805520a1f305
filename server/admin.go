package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"enrichd/enrich"
)

// The operator's endpoints: liveness, readiness and metrics. They take no key: a load
// balancer or Prometheus has none. They say nothing about any organization (metrics
// carry no organization label), but in production serve them on a private
// --admin-addr rather than on the API's address.
const (
	routeHealthz = "healthz"
	routeReadyz  = "readyz"
	routeMetrics = "metrics"
)

// readyTimeout bounds the readiness checks: a writer held longer than this by other
// work is reported as not ready rather than making the probe hang.
const readyTimeout = 2 * time.Second

// addAdminRoutes adds /healthz, /readyz and /metrics to r. On the API's listener they
// share its per-address rate limit (far above any probe's or scraper's rate).
func addAdminRoutes(r *Router, s *Server, limit bool) {
	wrap := func(name string, h http.Handler) http.Handler {
		if limit {
			h = s.limitIP(h)
		}
		return s.route(name, h)
	}
	r.Handler(http.MethodGet, "/healthz", wrap(routeHealthz, handleHealthz()))
	r.Handler(http.MethodGet, "/readyz", wrap(routeReadyz, handleReadyz(s)))
	r.Handler(http.MethodGet, "/metrics", wrap(routeMetrics, handleMetrics(s)))
}

// AdminHandler serves /healthz, /readyz and /metrics alone, for a listener of their
// own (serve --admin-addr), and Go's profiles under /debug/pprof/. With
// Config.SeparateAdmin the API's handler does not serve the first three; it never
// serves the profiles.
func (s *Server) AdminHandler() http.Handler {
	router := &Router{}
	addAdminRoutes(router, s, false)
	addPprofRoutes(router, s)
	notFound := s.route("not_found", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.error(w, r, &enrich.Error{Kind: enrich.KindNotFound, Code: "not_found",
			Message: "no such endpoint: " + r.Method + " " + clip(r.URL.Path, 200) + "; this address serves /healthz, /readyz, /metrics and /debug/pprof/"})
	}))
	notAllowed := s.route("method_not_allowed", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.error(w, r, &enrich.Error{Kind: enrich.KindMethodNotAllowed, Code: "method_not_allowed",
			Message: r.Method + " is not allowed on " + clip(r.URL.Path, 200) + "; allowed: " + w.Header().Get("Allow")})
	}))
	return s.logRequests(router.handler(func(w http.ResponseWriter, r *http.Request, allow []string) {
		if len(allow) == 0 {
			notFound.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		notAllowed.ServeHTTP(w, r)
	}))
}

// handleHealthz says the process is up and serving HTTP, nothing more: a failing
// database makes it not ready, not dead, and restarting it would not help.
func handleHealthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		encode(w, http.StatusOK, map[string]string{"status": "ok"})
	})
}

// readyBody is GET /readyz.
type readyBody struct {
	Status string `json:"status"`           // "ready" or "not_ready"
	Reason string `json:"reason,omitempty"` // why not ready
	// Database is "writable", or why it is not.
	Database string `json:"database"`
	Schema   struct {
		Applied int `json:"applied"` // the newest migration applied to the file
		Known   int `json:"known"`   // the newest this binary knows
	} `json:"schema"`
	// Sources are each configured source's counters and last error. They inform, they
	// do not decide: a vendor that is down is down for every instance, and tasks meanwhile
	// fail provider_unavailable (refunded) or are served from the store.
	Sources []enrich.SourceStats `json:"sources"`
}

// handleReadyz answers 200 when the service can do its work: the database takes writes
// (a small probe write commits through the writer: a full disk, a read-only file or
// failing I/O make it fail; see store.CheckWritable) and its schema is the one this
// binary was built for. Otherwise 503, with the reason. It turns 200 again by itself
// once a probe commits.
func handleReadyz(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		body := readyBody{Status: "ready", Database: "writable", Sources: make([]enrich.SourceStats, 0, len(s.cfg.Sources))}
		for _, src := range s.cfg.Sources {
			body.Sources = append(body.Sources, enrich.StatsOf(src))
		}
		var reasons []string
		if err := s.db.CheckWritable(ctx); err != nil {
			body.Database = err.Error()
			reasons = append(reasons, "the database does not take writes")
		}
		applied, known, err := s.db.Migrations(ctx)
		body.Schema.Applied, body.Schema.Known = applied, known
		switch {
		case err != nil:
			reasons = append(reasons, "the schema version cannot be read: "+err.Error())
		case applied < known:
			reasons = append(reasons, fmt.Sprintf("the database is at migration %d, this binary needs %d", applied, known))
		case applied > known:
			reasons = append(reasons, fmt.Sprintf("the database is at migration %d, newer than this binary's %d: run the newer binary", applied, known))
		}
		status := http.StatusOK
		if len(reasons) > 0 {
			status, body.Status = http.StatusServiceUnavailable, "not_ready"
			body.Reason = reasons[0]
			for _, more := range reasons[1:] {
				body.Reason += "; " + more
			}
		}
		encode(w, status, body)
	})
}
