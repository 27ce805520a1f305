package server

import (
	"context"
	"testing"
	"time"

	"enrichd/store"
)

// SetMCPHold shortens, for the test, how long an /mcp request may hold its connection
// past the write timeout.
func SetMCPHold(t testing.TB, d time.Duration) {
	old := mcpHold
	mcpHold = d
	t.Cleanup(func() { mcpHold = old })
}

// FillFor is the fill list a worker reads for a claimed task.
func (s *Server) FillFor(ctx context.Context, c *store.Claim) ([]string, error) {
	return s.fillFor(ctx, c)
}
