package sqlite_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"
)

// BenchmarkClaimTask claims from a queue of 10,000 tasks spread over 100 organizations,
// each claim followed by the settle-free release that puts the task back, so the queue
// stays the same size however many iterations run.
func BenchmarkClaimTask(b *testing.B) {
	ctx := context.Background()
	db, _, _ := openDB(b)
	for o := range 100 {
		org := newOrg(b, db, fmt.Sprintf("org-%d", o))
		grantCredits(b, db, fmt.Sprintf("org-%d", o), 1000)
		for i := range 100 {
			if _, err := db.CreateTask(ctx, store.BySystem, newTask(org, fmt.Sprintf("d%d-%d.com", o, i))); err != nil {
				b.Fatal(err)
			}
		}
	}
	for b.Loop() {
		c, err := db.ClaimTask(ctx, time.Minute)
		if err != nil || c == nil {
			b.Fatal(c, err)
		}
		if err := db.ReleaseTask(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreateTaskStoreHit is the transaction behind a 200 from the store: the
// idempotency check, the record lookup, the charge, the task row.
func BenchmarkCreateTaskStoreHit(b *testing.B) {
	ctx := context.Background()
	db, _, _ := openDB(b)
	org := newOrg(b, db, "acme")
	grantCredits(b, db, "acme", 1<<40)
	storeCompany(b, db, org, "acme.com")
	nt := newTask(org, "acme.com")
	for b.Loop() {
		if _, err := db.CreateTask(ctx, store.BySystem, nt); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreateTaskStoreHitConcurrent is the same transaction from 32 goroutines at
// once, as 32 clients send it: what group commit makes of it. Besides the time per
// task it reports the process's CPU time per task (cpu-µs/op), which a machine busy
// with other work changes far less than the rate, and how many tasks a commit carried.
func BenchmarkCreateTaskStoreHitConcurrent(b *testing.B) {
	ctx := context.Background()
	db, _, _ := openDB(b)
	org := newOrg(b, db, "acme")
	grantCredits(b, db, "acme", 1<<40)
	storeCompany(b, db, org, "acme.com")
	nt := newTask(org, "acme.com")
	transactions, commits := db.WriteStats()
	cpu := cpuTime()
	b.SetParallelism(16) // 32 goroutines on two processors
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := db.CreateTask(ctx, store.BySystem, nt); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	t, c := db.WriteStats()
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(t-transactions)/float64(max(1, c-commits)), "tasks/commit")
}

// cpuTime is the CPU time the process has used, in user and kernel mode.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func grantCredits(b *testing.B, db *store.DB, org string, amount int64) {
	b.Helper()
	if _, err := db.GrantCredits(context.Background(), org, amount, nil); err != nil {
		b.Fatal(err)
	}
}

// storeCompany fetches a company into the 30-day store the way a worker does.
func storeCompany(b *testing.B, db *store.DB, org, domain string) {
	b.Helper()
	ctx := context.Background()
	if _, err := db.CreateTask(ctx, store.BySystem, newTask(org, domain)); err != nil {
		b.Fatal(err)
	}
	c, err := db.ClaimTask(ctx, time.Minute)
	if err != nil || c == nil {
		b.Fatal(c, err)
	}
	res := enrich.Result{Company: &enrich.Company{Name: "Acme", EnrichmentStatus: enrich.StatusEnriched, Domain: &domain}}
	if _, err := db.Settle(ctx, c, store.Outcome{Result: &res, Fetched: true}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkDashboard measures the dashboard's reads on an organization with 100,000
// tasks and 100,000 ledger rows over 60 days: each must cost the same as on an empty
// database, since each walks an index from where it starts, never the table.
func BenchmarkDashboard(b *testing.B) {
	ctx := context.Background()
	db, _, clk := openDB(b)
	org := newOrg(b, db, "acme")
	const n = 100_000
	if err := db.SeedTasks(ctx, org, n); err != nil {
		b.Fatal(err)
	}
	grant, err := db.GrantCredits(ctx, "acme", 1<<40, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := db.SeedLedger(ctx, org, grant, n, 60*24*time.Hour); err != nil {
		b.Fatal(err)
	}

	// The page 90% of the way down the list, and one as deep inside a date window.
	deep, _, err := db.FindTasks(ctx, org, store.TaskFilter{To: clk.Now().Add(-n * 9 / 10 * time.Millisecond), Limit: 1})
	if err != nil || len(deep) != 1 {
		b.Fatal(deep, err)
	}
	deepCursor := &store.TaskCursor{CreatedAt: deep[0].CreatedAt, ID: deep[0].ID}
	ledger, err := db.LedgerPage(ctx, org, 0, 1)
	if err != nil {
		b.Fatal(err)
	}
	deepLedger := ledger[0].ID - n*9/10

	for _, c := range []struct {
		name string
		f    store.TaskFilter
	}{
		{"FindTasks/first page", store.TaskFilter{}},
		{"FindTasks/deep page", store.TaskFilter{Before: deepCursor}},
		{"FindTasks/by status, deep page", store.TaskFilter{Status: store.StatusSucceeded, Before: deepCursor}},
		{"FindTasks/by type and date, deep page", store.TaskFilter{ObjectType: enrich.ObjectCompany,
			From: clk.Now().Add(-n * time.Millisecond), To: clk.Now(), Before: deepCursor}},
		{"FindTasks/status with no task", store.TaskFilter{Status: store.StatusFailed}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				tasks, _, err := db.FindTasks(ctx, org, c.f)
				if err != nil || (len(tasks) != store.DefaultTaskPage && c.f.Status != store.StatusFailed) {
					b.Fatal(len(tasks), err)
				}
			}
		})
	}
	b.Run("DailyCredits/30 days", func(b *testing.B) {
		for b.Loop() {
			if days, err := db.DailyCredits(ctx, org, 30, clk.Now()); err != nil || days[0].Charged == 0 {
				b.Fatal(days, err)
			}
		}
	})
	for _, c := range []struct {
		name   string
		before int64
	}{{"LedgerPage/first page", 0}, {"LedgerPage/deep page", deepLedger}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if page, err := db.LedgerPage(ctx, org, c.before, store.DefaultLedgerPage); err != nil || len(page) != store.DefaultLedgerPage {
					b.Fatal(len(page), err)
				}
			}
		})
	}
}

// BenchmarkAuthenticate is the start of every API request: a key answered from the
// key cache, and one read from the file each time (the cache emptied, as another
// process's commit empties it).
func BenchmarkAuthenticate(b *testing.B) {
	ctx := context.Background()
	for _, cached := range []bool{true, false} {
		b.Run(fmt.Sprintf("cached=%v", cached), func(b *testing.B) {
			db, _, _ := openDB(b)
			plain, _, err := db.CreateKey(ctx, store.BySystem, "acme", "ci", true)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if !cached {
					engine(db).EmptyKeyCache()
				}
				if _, err := db.Authenticate(ctx, plain); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFillLists is the read a worker makes for each task it claims: the
// organization's fill lists by primary key, among 1,000 organizations that set theirs,
// and for one that keeps the server's default (no row).
func BenchmarkFillLists(b *testing.B) {
	ctx := context.Background()
	db, _, _ := openDB(b)
	company, person := []string{"name", "employee_count", "slogan", "about"}, []string{"headline", "positions"}
	var orgs []string
	for o := range 1000 {
		org := newOrg(b, db, fmt.Sprintf("org-%d", o))
		if err := db.SetFillLists(ctx, org, store.FillUpdate{Company: &company, Person: &person}); err != nil {
			b.Fatal(err)
		}
		orgs = append(orgs, org)
	}
	defaults := enrich.FillLists{Company: []string{"name"}}
	for _, c := range []struct {
		name string
		org  string
	}{{"own", orgs[500]}, {"default", newOrg(b, db, "plain")}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := db.FillLists(ctx, c.org, defaults); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
