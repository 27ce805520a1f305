package server

import (
	"net/http"
	"net/http/pprof"
)

// routePprof names every profile request in the logs and metrics.
const routePprof = "pprof"

// addPprofRoutes adds Go's profiles (net/http/pprof) under /debug/pprof/: the index,
// cmdline, profile (CPU), symbol, trace, and the named profiles (heap, goroutine,
// allocs, block, mutex, threadcreate). They are for the admin listener only: a CPU
// profile or a trace keeps the process busy for as long as asked, and the command
// line may hold what an operator passed as a flag. (Importing net/http/pprof also
// registers them on http.DefaultServeMux, which enrichd never serves.)
func addPprofRoutes(r *Router, s *Server) {
	handlers := map[string]http.Handler{
		"/debug/pprof/cmdline": http.HandlerFunc(pprof.Cmdline),
		"/debug/pprof/profile": http.HandlerFunc(pprof.Profile),
		"/debug/pprof/symbol":  http.HandlerFunc(pprof.Symbol), // also POST: pprof's symbol lookups
		"/debug/pprof/trace":   http.HandlerFunc(pprof.Trace),
	}
	// Index serves the list at /debug/pprof/ and each named profile below it.
	index := http.HandlerFunc(pprof.Index)
	h := s.route(routePprof, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h, ok := handlers[r.URL.Path]; ok {
			h.ServeHTTP(w, r)
			return
		}
		index.ServeHTTP(w, r)
	}))
	r.Handler(http.MethodGet, "/debug/pprof/*name", h)
	r.Handler(http.MethodPost, "/debug/pprof/symbol", h)
}
