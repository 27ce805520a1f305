package worker

import (
	"os"
	"testing"

	"enrichd/store/storetest"
)

// TestMain stops the throwaway PostgreSQL the tests on that engine start, so that no
// server outlives the test binary.
func TestMain(m *testing.M) { os.Exit(storetest.PostgresRun(m)) }
