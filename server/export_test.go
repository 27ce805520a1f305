package server

import (
	"context"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"
)

// SetMCPHold shortens, for the test, how long an /mcp request may hold its connection
// past the write timeout.
func SetMCPHold(t testing.TB, d time.Duration) {
	old := mcpHold
	mcpHold = d
	t.Cleanup(func() { mcpHold = old })
}

// Spend is the server's keeper of what sources cost, which the pipeline consults
// before and after each ask of a source.
func (s *Server) Spend() enrich.Spend { return s.spend }

// SettleDeadAsks is the sweep of the asks on the books of processes that are gone,
// which the heartbeat runs.
func (s *Server) SettleDeadAsks(ctx context.Context) { s.settleDeadAsks(ctx) }

// Replica is this server's name among the replicas, which its asks on the books carry.
func (s *Server) Replica() string { return s.replica }

// FillFor is the fill list a worker reads for a claimed task.
func (s *Server) FillFor(ctx context.Context, c *store.Claim) ([]string, error) {
	return s.fillFor(ctx, c)
}
