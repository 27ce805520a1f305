package server

import (
	"net/http"

	"enrichd/enrich"
)

// statusBody is GET /v1/status: what each configured source has cost upstream since
// the server started, in the order the sources are asked.
type statusBody struct {
	Sources []enrich.SourceStats `json:"sources"`
}

// handleStatus shows the running server's counters. They are the installation's, not
// the organization's: every organization's lookups go through the same sources.
func handleStatus(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := statusBody{Sources: make([]enrich.SourceStats, 0, len(s.cfg.Sources))}
		for _, src := range s.cfg.Sources {
			body.Sources = append(body.Sources, enrich.StatsOf(src))
		}
		encode(w, http.StatusOK, body)
	})
}
