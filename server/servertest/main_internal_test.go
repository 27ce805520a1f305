package servertest

import "testing"

// TestMain is Main, as for every package whose tests start an Env: it removes the
// migrated template those tests copy and stops the PostgreSQL they start.
func TestMain(m *testing.M) { Main(m) }
