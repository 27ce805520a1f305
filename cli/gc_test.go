package cli

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestTuneGCLeavesTheEnvironmentsChoice: without GOGC and GOMEMLIMIT the collector
// gets enrichd's settings; with them, the environment's stand.
func TestTuneGCLeavesTheEnvironmentsChoice(t *testing.T) {
	percent, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetGCPercent(percent); debug.SetMemoryLimit(limit) })

	tuneGC(func(string) string { return "" })
	if got := debug.SetGCPercent(100); got != gcPercent {
		t.Errorf("GOGC unset: percent %d, want %d", got, gcPercent)
	}
	if got := debug.SetMemoryLimit(math.MaxInt64); got != gcMemoryLimit {
		t.Errorf("GOMEMLIMIT unset: limit %d, want %d", got, gcMemoryLimit)
	}

	set := map[string]string{"GOGC": "50", "GOMEMLIMIT": "1GiB"}
	tuneGC(func(k string) string { return set[k] })
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC set: percent changed to %d", got)
	}
	if got := debug.SetMemoryLimit(math.MaxInt64); got != math.MaxInt64 {
		t.Errorf("GOMEMLIMIT set: limit changed to %d", got)
	}
}
