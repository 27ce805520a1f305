package server

import (
	"context"

	"enrichd/enrich"
	"enrichd/store"
)

// What the HTTP tests outside this package (the dashboard's, through servertest) read
// of a running server, or make it do now rather than on its heartbeat. Nothing in
// enrichd itself calls these.

// Spend is the server's keeper of what sources cost, which the pipeline consults
// before and after each ask of a source.
func (s *Server) Spend() enrich.Spend { return s.spend }

// SettleDeadAsks is the sweep of the asks on the books of processes that are gone,
// which the heartbeat runs.
func (s *Server) SettleDeadAsks(ctx context.Context) { s.settleDeadAsks(ctx) }

// FillFor is the fill list a worker reads for a claimed task.
func (s *Server) FillFor(ctx context.Context, c *store.Claim) ([]string, error) {
	return s.fillFor(ctx, c)
}
