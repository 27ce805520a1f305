package store_test

import (
	"path/filepath"
	"testing"

	"enrichd/store/storetest"
)

// The conformance suite's tests wait on their databases' commits far more than they
// compute: they run eight at a time.
func TestMain(m *testing.M) {
	storetest.ParallelUnlessGiven(8)
	storetest.PostgresMain(m)
}

// TestConformance runs everything the store promises on each engine.
func TestConformance(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		storetest.Conformance(t, func(t testing.TB) string {
			return filepath.Join(t.TempDir(), "enrichd.db")
		})
	})
	t.Run("postgres", func(t *testing.T) {
		storetest.Conformance(t, storetest.PostgresMigratedURL)
	})
}
