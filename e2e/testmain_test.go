package e2e

import (
	"fmt"
	"os"
	"testing"
	"time"

	"enrichd/store/storetest"
)

// TestMain gives the binary the tests build a directory of its own, and once they
// have run removes it and stops the throwaway PostgreSQL they started, if any. Most
// of these tests wait (on a serve process, a browser, a sweep) far more than they
// compute, so unless -parallel is given those that call t.Parallel run parallelTests
// at a time rather than one a core.
func TestMain(m *testing.M) {
	storetest.ParallelUnlessGiven(parallelTests)
	dir, err := os.MkdirTemp("", "enrichd-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	built.dir = dir
	code := storetest.PostgresRun(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// parallelTests is how many tests run at once by default: enough to keep a 2-core
// machine's cores busy while most of them wait on their processes, few enough that
// the browser tests' and the 10,000-row batch's timings stay well within reach.
const parallelTests = 6

// patience bounds a test's wait for something that comes (serve listening, a task
// settling, a page's change): a guard against a hang, not a measure of speed, so it
// is set for two cores shared with the rest of the suite under the race detector.
const patience = time.Minute
