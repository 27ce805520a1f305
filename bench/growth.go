package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
)

// growth measures GET /v1/tasks (page 0) and GET /v1/tasks/{id} on an organization
// with a few hundred tasks, stores opt.GrowthTasks more, and measures again: the
// indexes should keep both as fast at a million tasks as at a few hundred.
func growth(ctx context.Context, opt Options) ([]Result, error) {
	e, key, orgID, err := startEnv(ctx, opt)
	if err != nil {
		return nil, err
	}
	defer e.close()
	var ids []string
	for i := range 200 {
		status, id, err := e.post(ctx, key, "/v1/companies/enrich", fmt.Sprintf(`{"domain":"small-%d.com"}`, i))
		if err != nil || status != http.StatusAccepted {
			return nil, fmt.Errorf("creating tasks: %d %v", status, err)
		}
		ids = append(ids, id)
	}
	if err := e.settled(ctx, orgID); err != nil {
		return nil, err
	}
	measure := func() (list, get Result) {
		lat, n, errs, elapsed := load(ctx, opt.Concurrency, opt.Duration/2, func(ctx context.Context, c, i int) bool {
			status, _, err := e.get(ctx, key, "/v1/tasks?pageSize=25")
			return err == nil && status == http.StatusOK
		})
		list = Result{Scenario: "growth-list", Unit: "req/s", Rate: float64(n) / elapsed.Seconds(), Count: n, Errors: errs}
		lat.fill(&list)
		lat, n, errs, elapsed = load(ctx, opt.Concurrency, opt.Duration/2, func(ctx context.Context, c, i int) bool {
			status, _, err := e.get(ctx, key, "/v1/tasks/"+ids[rand.IntN(len(ids))])
			return err == nil && status == http.StatusOK
		})
		get = Result{Scenario: "growth-get", Unit: "req/s", Rate: float64(n) / elapsed.Seconds(), Count: n, Errors: errs}
		lat.fill(&get)
		return list, get
	}
	measure() // warms connections, statements and caches, so both runs start alike
	smallList, smallGet := measure()
	if opt.Progress != nil {
		fmt.Fprintf(opt.Progress, "storing %d tasks ...\n", opt.GrowthTasks)
	}
	if err := e.db.SeedTasks(ctx, orgID, opt.GrowthTasks); err != nil {
		return nil, err
	}
	list, get := measure()
	rss := peakRSS()
	for _, pair := range []struct {
		big   *Result
		small Result
		what  string
	}{{&list, smallList, "GET /v1/tasks page 0"}, {&get, smallGet, "GET /v1/tasks/{id}"}} {
		// The small database is this scenario's baseline.
		pair.big.Ceiling, pair.big.CeilingUnit, pair.big.Ratio = pair.small.Rate, "req/s", ratio(pair.big.Rate, pair.small.Rate)
		pair.big.Note = fmt.Sprintf("%s with %d more tasks stored, as a ratio to the same on 200 tasks (%.0f req/s, p99 %.1f ms); peak RSS of the whole bench process %s",
			pair.what, opt.GrowthTasks, pair.small.Rate, pair.small.P99ms, rss)
	}
	return []Result{list, get}, nil
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
