package server

import (
	"fmt"
	"runtime/debug"
)

// panicked logs a recovered panic with its stack, and counts it.
func (s *Server) panicked(where string, v any, attrs ...any) {
	s.metrics.counter("enrichd_panics_total", "in", where).Inc()
	s.log.Error("recovered from a panic in "+where, append(attrs, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))...)
}
