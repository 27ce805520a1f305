package cli

import (
	"runtime/debug"
)

// Go's default collector (GOGC=100) ran about 27 times a second under enrichd's load,
// since the live heap is small (about 10 MB) and every request allocates: each cycle
// takes a share of the two cores the single database writer needs. serve and bench
// let the heap grow to five times what is live, within a soft limit, unless the
// environment already says otherwise (GOGC, GOMEMLIMIT). SQLite's page cache is not
// Go memory and is bounded by --cache-size instead.
const (
	gcPercent     = 400
	gcMemoryLimit = 128 << 20
	gcPercentEnv  = "GOGC"
	gcMemLimitEnv = "GOMEMLIMIT"
)

// tuneGC sets the collector as above; getenv reads the environment.
func tuneGC(getenv func(string) string) {
	if getenv(gcPercentEnv) == "" {
		debug.SetGCPercent(gcPercent)
	}
	if getenv(gcMemLimitEnv) == "" {
		debug.SetMemoryLimit(gcMemoryLimit)
	}
}
