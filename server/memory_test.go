package server_test

import (
	"testing"
	"time"

	"enrichd/server"
	"enrichd/server/servertest"
)

// TestIdleMemoryIsReleased runs the workers with a short IdleRelease: the memory is
// released once the service is idle, not again while it stays idle (a slow machine
// only makes fewer ticks), and once more after a request ends the spell.
func TestIdleMemoryIsReleased(t *testing.T) {
	t.Parallel()
	servertest.SQLiteOnly(t, "what is released is SQLite's page cache")
	e := servertest.NewEnv(t, func(c *server.Config) { c.IdleRelease = 20 * time.Millisecond })
	e.StartWorkers()
	e.WaitMetric("enrichd_idle_memory_releases_total", 1)
	time.Sleep(200 * time.Millisecond) // ten more idle ticks
	if got := servertest.Scrape(t, e.HTTP.URL)["enrichd_idle_memory_releases_total"]; got != 1 {
		t.Fatalf("released %v times in one idle spell, want 1", got)
	}
	e.Do("GET", "/v1/tasks", nil)
	e.WaitMetric("enrichd_idle_memory_releases_total", 2)
}
