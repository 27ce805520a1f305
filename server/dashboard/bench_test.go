package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"enrichd/server/servertest"
	"enrichd/store"
)

// benchTasks is the size of database every dashboard page must stay fast on.
const benchTasks = 100_000

// BenchmarkDashboardPages renders every dashboard page through the real handler, over
// loopback HTTP with a signed-in session, for an organization with 100,000 tasks, a
// month's ledger of 100,000 charges and a Loop that 100,000 deliveries went through:
// each page must stay under 50 ms (reported as ms/op), which it can only do by reading
// through an index from where it starts. The CSV export is the one answer that grows
// with the ledger, by design; it is measured apart.
func BenchmarkDashboardPages(b *testing.B) {
	e := servertest.NewEnv(b)
	ctx := context.Background()
	if err := e.DB.SeedTasks(ctx, e.OrgID, benchTasks); err != nil {
		b.Fatal(err)
	}
	grant, err := e.DB.GrantCredits(ctx, "acme", 1<<40, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := e.DB.SeedLedger(ctx, e.OrgID, grant, benchTasks, 30*24*time.Hour); err != nil {
		b.Fatal(err)
	}
	loop, err := e.DB.CreateLoop(ctx, store.NewLoop{OrgID: e.OrgID, Name: "CRM sync", ObjectType: "company",
		WebhookURL: "https://hooks.example.com/enrichd", Enabled: true})
	if err != nil {
		b.Fatal(err)
	}
	if err := e.DB.SeedDeliveries(ctx, e.OrgID, loop.ID, benchTasks); err != nil {
		b.Fatal(err)
	}
	for range 5 {
		if _, _, err := e.DB.CreateKey(ctx, store.BySystem, "acme", "bench", false); err != nil {
			b.Fatal(err)
		}
	}
	admin := e.SignIn("acme", "admin")

	// A task and a delivery 90% of the way down their lists, and the cursor of the
	// tasks page that starts there.
	deep, _, err := e.DB.FindTasks(ctx, e.OrgID, store.TaskFilter{To: e.DB.Now().Add(-benchTasks * 9 / 10 * time.Millisecond), Limit: 1})
	if err != nil || len(deep) != 1 {
		b.Fatal(len(deep), err)
	}
	cursor := store.TaskCursor{CreatedAt: deep[0].CreatedAt, ID: deep[0].ID}.String()
	deliveries, total, err := e.DB.ListDeliveries(ctx, e.OrgID, loop.ID, benchTasks*9/10/50, 50)
	if err != nil || len(deliveries) == 0 || total != benchTasks {
		b.Fatal(len(deliveries), total, err)
	}
	ledger, err := e.DB.LedgerPage(ctx, e.OrgID, 0, 1)
	if err != nil {
		b.Fatal(err)
	}
	day := e.DB.Now().UTC().Format(time.DateOnly)

	pages := []struct{ name, path string }{
		{"overview", "/dashboard/"},
		{"tasks", "/dashboard/tasks"},
		{"tasks_by_status", "/dashboard/tasks?status=succeeded"},
		{"tasks_by_type_and_day", "/dashboard/tasks?type=company&from=" + day + "&to=" + day},
		{"tasks_deep", "/dashboard/tasks?before=" + cursor},
		{"tasks_by_status_deep", "/dashboard/tasks?status=succeeded&before=" + cursor},
		{"task", "/dashboard/tasks/" + deep[0].ID},
		{"try", "/dashboard/try"},
		{"keys", "/dashboard/settings/keys"},
		{"credits", "/dashboard/credits"},
		{"credits_deep", fmt.Sprintf("/dashboard/credits?before=%d", ledger[0].ID-benchTasks*9/10)},
		{"loops", "/dashboard/loops"},
		{"loop", "/dashboard/loops/" + loop.ID},
		{"loop_last_page", fmt.Sprintf("/dashboard/loops/%s?page=201", loop.ID)},
		{"delivery", "/dashboard/deliveries/" + deliveries[0].ID},
	}
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) {
			br := *admin
			br.T = b // a failure ends this benchmark's goroutine, not the parent's
			for b.Loop() {
				if got := br.Get(p.path); got.Status != http.StatusOK {
					b.Fatalf("%s: %d %s", p.path, got.Status, got.Body)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
		})
	}
	b.Run("credits_csv_whole", func(b *testing.B) {
		br := *admin
		br.T = b
		for b.Loop() {
			got := br.Get("/dashboard/credits.csv")
			if got.Status != http.StatusOK || strings.Count(got.Body, "\n") < benchTasks {
				b.Fatalf("credits.csv: %d, %d lines", got.Status, strings.Count(got.Body, "\n"))
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
	})
}
