package store_test

import (
	"path/filepath"
	"testing"

	"enrichd/store/storetest"
)

func TestMain(m *testing.M) { storetest.PostgresMain(m) }

// postgresDriverLinked says whether this test binary can open postgres:// DSNs. It is
// false until the PostgreSQL driver is merged: then import _ "enrichd/store/postgres"
// and _ "enrichd/store/sqlite" here and set it to true.
const postgresDriverLinked = false

// TestConformance runs everything the store promises on each engine.
func TestConformance(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		storetest.Conformance(t, func(t testing.TB) string {
			return filepath.Join(t.TempDir(), "enrichd.db")
		})
	})
	t.Run("postgres", func(t *testing.T) {
		if !postgresDriverLinked {
			t.Skip("the PostgreSQL driver is not in this build yet")
		}
		storetest.Conformance(t, storetest.PostgresURL)
	})
}
