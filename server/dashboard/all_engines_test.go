package dashboard_test

import (
	"testing"

	"enrichd/server/servertest"
)

func TestMain(m *testing.M) { servertest.Main(m) }

// TestHTTPSuiteOnPostgres runs the tests this run selects again, on PostgreSQL.
func TestHTTPSuiteOnPostgres(t *testing.T) { servertest.RunOnPostgres(t) }
