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
func (s *Server) Spend() interface {
	Admit(ctx context.Context, org, src string, own bool) string
	Spent(ctx context.Context, org string, call enrich.SourceCall)
} {
	return s.spend
}

// FillFor is the fill list a worker reads for a claimed task.
func (s *Server) FillFor(ctx context.Context, c *store.Claim) ([]string, error) {
	return s.fillFor(ctx, c)
}
