package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"enrichd/store"
)

// benchTasks is the size of database every dashboard page must stay fast on.
const benchTasks = 100_000

// BenchmarkDashboardPages renders every dashboard page through the real handler, over
// loopback HTTP with a signed-in session, for an organization with 100,000 tasks and a
// month's ledger of 100,000 charges: each page must stay under 50 ms (reported as
// ms/op), which it can only do by reading through an index from where it starts.
func BenchmarkDashboardPages(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	if err := e.db.SeedTasks(ctx, e.orgID, benchTasks); err != nil {
		b.Fatal(err)
	}
	grant, err := e.db.GrantCredits(ctx, "acme", 1<<40, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := e.db.SeedLedger(ctx, e.orgID, grant, benchTasks, 30*24*time.Hour); err != nil {
		b.Fatal(err)
	}
	admin := e.signIn("acme", "admin")

	pages := []struct{ name, path string }{
		{"overview", "/dashboard/"},
	}
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) {
			br := *admin
			br.t = b // a failure ends this benchmark's goroutine, not the parent's
			for b.Loop() {
				if got := br.get(p.path); got.status != http.StatusOK {
					b.Fatalf("%s: %d %s", p.path, got.status, got.body)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
		})
	}
}

var _ = store.DefaultTaskPage
