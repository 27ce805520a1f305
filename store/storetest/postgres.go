package storetest

import (
	"context"
	"testing"

	"enrichd/store"
	"enrichd/store/storetest/pgcluster"
)

// Environment variables the PostgreSQL tests read (see package pgcluster).
const (
	EnvPostgres        = pgcluster.EnvPostgres
	EnvRequirePostgres = pgcluster.EnvRequirePostgres
)

// PostgresMain is TestMain for a package whose tests call PostgresURL: it stops the
// cluster the tests started once they have run.
func PostgresMain(m *testing.M) { pgcluster.Main(m) }

// PostgresRun is PostgresMain that returns the tests' exit code instead of exiting
// (pgcluster.Run).
func PostgresRun(m *testing.M) int { return pgcluster.Run(m) }

// PostgresURL is a fresh, empty database for this test (pgcluster.URL).
func PostgresURL(t testing.TB) string { return pgcluster.URL(t) }

// PostgresMigratedURL is a fresh database for this test holding the store's schema and
// nothing else, as store.Open leaves an empty one: a copy of a database this process
// migrates once (pgcluster.Copy).
func PostgresMigratedURL(t testing.TB) string {
	t.Helper()
	schema := Schema(t)
	return pgcluster.Copy(t, "store", func(ctx context.Context, dsn string) error {
		db, err := store.Open(ctx, dsn, schema, store.WithSubjectKey(SubjectKey))
		if err != nil {
			return err
		}
		return db.Close()
	})
}

// PostgresServerURL is the server PostgresURL makes its databases on (pgcluster.ServerURL).
func PostgresServerURL(t testing.TB) string { return pgcluster.ServerURL(t) }
