package e2e

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"enrichd/store"
)

// serveWith runs serve with extra flags and returns its URL and a stop function.
func serveWith(t *testing.T, db string, extra ...string) (string, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	if store.Engine(db) != "sqlite" && !slices.Contains(extra, "--secret-key-file") {
		// On PostgreSQL serve needs a key file: there is no database file to keep it beside.
		extra = append(extra, "--secret-key-file", filepath.Join(t.TempDir(), "enrichd.secret-key"))
	}
	go func() {
		done <- run(ctx, append([]string{"serve", "--db", db, "--addr", "127.0.0.1:0", "--workers", "2"}, extra...), &stdout, &stderr)
	}()
	base := waitListening(t, &stderr, done)
	return base, func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("serve did not stop")
		}
	}
}

// A row whose runs each met a passing failure is enriched once the provider is back:
// earlier keys of its series replay their failed tasks for free, and a new key runs.
func TestEnrichRetriesARowAcrossRunsUntilTheProviderIsBack(t *testing.T) {
	t.Parallel()
	db, key := companiesDB(t, "acme.com")
	in := writeCSV(t, "domain", "sim-co.com")
	out := filepath.Join(t.TempDir(), "out.csv")
	args := func(base string) []string {
		return []string{"enrich", "--csv", in, "--out", out, "--column", "domain", "--url", base, "--key", key}
	}
	base, stop := serveWith(t, db, "--sources", "sim", "--sim-failure-rate", "1")
	for range 6 {
		runCLI(t, args(base)...) // each run fails the row as provider_unavailable
	}
	stop()
	// The provider is back.
	base, stop = serveWith(t, db, "--sources", "sim", "--sim-failure-rate", "0")
	defer stop()
	runCLI(t, args(base)...)
	_, rows := readOut(t, out)
	if rows[0]["enrichd_status"] != "succeeded" {
		t.Fatalf("provider healthy again, but the row is %s/%s: %s", rows[0]["enrichd_status"], rows[0]["enrichd_error_code"], rows[0]["enrichd_error_message"])
	}
}
