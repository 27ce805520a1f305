package e2e

import (
	"fmt"
	"os"
	"testing"

	"enrichd/store/storetest"
)

// TestMain gives the binary the tests build a directory of its own, and once they
// have run removes it and stops the throwaway PostgreSQL they started, if any.
func TestMain(m *testing.M) {
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
