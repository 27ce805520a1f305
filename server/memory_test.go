package server_test

import (
	"testing"
	"time"

	"enrichd/server"
)

// TestIdleMemoryIsReleased runs the workers with a short IdleRelease: the memory is
// released once the service is idle, and once more after a request ends the spell.
func TestIdleMemoryIsReleased(t *testing.T) {
	e := newEnv(t, func(c *server.Config) { c.IdleRelease = 20 * time.Millisecond })
	e.startWorkers()
	e.waitMetric("enrichd_idle_memory_releases_total", 1)
	e.do("GET", "/v1/tasks", nil)
	e.waitMetric("enrichd_idle_memory_releases_total", 2)
}
