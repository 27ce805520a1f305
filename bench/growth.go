package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"enrichd/store"
)

// growth measures, on an organization with a few hundred tasks, the two reads of the
// task list and of a task, and the enqueue of a store hit and of a miss; stores
// opt.GrowthTasks more tasks and measures them again: the indexes should keep all four
// as fast at a million tasks as at a few hundred. Then it times a claim behind a
// short and behind a long backlog (growthClaim).
func growth(ctx context.Context, opt Options) ([]Result, error) {
	e, key, orgID, err := startEnv(ctx, opt)
	if err != nil {
		return nil, err
	}
	defer e.close()
	var ids, domains []string
	for i := range 200 {
		domain := fmt.Sprintf("small-%d.com", i)
		status, id, err := e.post(ctx, key, "/v1/companies/enrich", `{"domain":"`+domain+`"}`)
		if err != nil || status != http.StatusAccepted {
			return nil, fmt.Errorf("creating tasks: %d %v", status, err)
		}
		ids, domains = append(ids, id), append(domains, domain)
	}
	if err := e.settled(ctx, orgID); err != nil {
		return nil, err
	}
	round := 0
	measure := func() ([]Result, error) {
		round++
		half := opt.Duration / 2
		var out []Result
		add := func(name, unit string, fn func(ctx context.Context, c, i int) bool) {
			lat, n, errs, elapsed := load(ctx, opt.Concurrency, half, fn)
			r := Result{Scenario: name, Unit: unit, Rate: float64(n) / elapsed.Seconds(), Count: n, Errors: errs}
			lat.fill(&r)
			out = append(out, r)
		}
		add("growth-list", "req/s", func(ctx context.Context, c, i int) bool {
			status, _, err := e.get(ctx, key, "/v1/tasks?pageSize=25")
			return err == nil && status == http.StatusOK
		})
		add("growth-get", "req/s", func(ctx context.Context, c, i int) bool {
			status, _, err := e.get(ctx, key, "/v1/tasks/"+ids[rand.IntN(len(ids))])
			return err == nil && status == http.StatusOK
		})
		add("growth-hit", "req/s", func(ctx context.Context, c, i int) bool {
			status, _, err := e.post(ctx, key, "/v1/companies/enrich", `{"domain":"`+domains[rand.IntN(len(domains))]+`"}`)
			return err == nil && status == http.StatusOK
		})
		add("growth-miss", "req/s", func(ctx context.Context, c, i int) bool {
			status, _, err := e.post(ctx, key, "/v1/companies/enrich", fmt.Sprintf(`{"domain":"grow-%d-%d-%d.com"}`, round, c, i))
			return err == nil && status == http.StatusAccepted
		})
		// The next measurement starts without this one's misses still being worked.
		return out, e.settled(ctx, orgID)
	}
	// The first round warms connections, statements and caches, so both measured
	// rounds start alike.
	if _, err := measure(); err != nil {
		return nil, err
	}
	small, err := measure()
	if err != nil {
		return nil, err
	}
	if opt.Progress != nil {
		fmt.Fprintf(opt.Progress, "storing %d tasks ...\n", opt.GrowthTasks)
	}
	if err := e.db.SeedTasks(ctx, orgID, opt.GrowthTasks); err != nil {
		return nil, err
	}
	big, err := measure()
	if err != nil {
		return nil, err
	}
	rss := peakRSS()
	whats := []string{"GET /v1/tasks page 0", "GET /v1/tasks/{id}", "POST /v1/companies/enrich answered from the store (200)", "POST /v1/companies/enrich of a new domain (202)"}
	for i := range big {
		// The small database is this scenario's baseline.
		big[i].Ceiling, big[i].CeilingUnit, big[i].Ratio = small[i].Rate, small[i].Unit, ratio(big[i].Rate, small[i].Rate)
		big[i].Note = fmt.Sprintf("%s with %d more tasks stored, as a ratio to the same on the small database (200 tasks and what the measurements add; %.0f req/s, p99 %.1f ms); peak RSS of the whole bench process %s",
			whats[i], opt.GrowthTasks, small[i].Rate, small[i].P99ms, rss)
	}
	claim, err := growthClaim(ctx, opt)
	if err != nil {
		return nil, err
	}
	return append(big, claim), nil
}

// growthClaim times ClaimTask behind a backlog of queued tasks and behind one a
// hundred times longer (1,000 and 100,000; fewer when opt.GrowthTasks is smaller),
// each claim released at once so the backlog keeps its size. It runs on a store of its
// own, without workers that would claim too.
func growthClaim(ctx context.Context, opt Options) (Result, error) {
	dir, err := os.MkdirTemp("", "enrichd-bench-claim-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)
	db, err := store.Open(ctx, filepath.Join(dir, "claim.db"), opt.Schema, subjectKey())
	if err != nil {
		return Result{}, err
	}
	defer db.Close()
	org, err := db.CreateOrg(ctx, "claim")
	if err != nil {
		return Result{}, err
	}
	long := max(2, min(100_000, opt.GrowthTasks))
	short := max(1, min(1000, long/100))
	if err := db.SeedQueuedTasks(ctx, org.ID, short); err != nil {
		return Result{}, err
	}
	if _, err := claims(ctx, db, opt.Duration/4); err != nil { // warms the statements
		return Result{}, err
	}
	base, err := claims(ctx, db, opt.Duration/2)
	if err != nil {
		return Result{}, err
	}
	if err := db.SeedQueuedTasks(ctx, org.ID, long-short); err != nil {
		return Result{}, err
	}
	r, err := claims(ctx, db, opt.Duration/2)
	if err != nil {
		return Result{}, err
	}
	r.Ceiling, r.CeilingUnit, r.Ratio = base.Rate, base.Unit, ratio(r.Rate, base.Rate)
	r.Note = fmt.Sprintf("ClaimTask from one worker behind %d queued tasks, each released again, as a ratio to the same behind %d (%.0f claims/s, p99 %.2f ms); the rate counts the claims' own time",
		long, short, base.Rate, base.P99ms)
	return r, nil
}

// claims claims and releases from one worker for d, timing the claims alone.
func claims(ctx context.Context, db *store.DB, d time.Duration) (Result, error) {
	var lat latencies
	var spent time.Duration
	for deadline := time.Now().Add(d); len(lat) == 0 || time.Now().Before(deadline); {
		t := time.Now()
		c, err := db.ClaimTask(ctx, time.Minute)
		took := time.Since(t)
		if err != nil {
			return Result{}, err
		}
		if c == nil {
			return Result{}, fmt.Errorf("nothing to claim from the backlog")
		}
		lat, spent = append(lat, took), spent+took
		if err := db.ReleaseTask(ctx, c); err != nil {
			return Result{}, err
		}
	}
	r := Result{Scenario: "growth-claim", Unit: "claims/s", Rate: float64(len(lat)) / spent.Seconds(), Count: int64(len(lat))}
	lat.fill(&r)
	return r, nil
}

// peakRSS is the process's peak resident set (VmHWM), "unknown" where /proc is not.
func peakRSS() string {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			if err == nil {
				return fmt.Sprintf("%d MB", kb/1024)
			}
		}
	}
	return "unknown"
}
