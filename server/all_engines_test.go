package server_test

import (
	"testing"

	"enrichd/server/servertest"
	"enrichd/store/storetest"
)

func TestMain(m *testing.M) { storetest.PostgresMain(m) }

// TestHTTPSuiteOnPostgres runs the tests this run selects again, on PostgreSQL.
func TestHTTPSuiteOnPostgres(t *testing.T) { servertest.RunOnPostgres(t) }
