package e2e

import (
	"testing"

	"enrichd/store/storetest"
)

// TestMain stops the throwaway PostgreSQL the PostgreSQL tests start, if any, once
// they have run.
func TestMain(m *testing.M) { storetest.PostgresMain(m) }
