package server

import (
	"testing"
	"time"
)

// SetMCPHold shortens, for the test, how long an /mcp request may hold its connection
// past the write timeout.
func SetMCPHold(t testing.TB, d time.Duration) {
	old := mcpHold
	mcpHold = d
	t.Cleanup(func() { mcpHold = old })
}
