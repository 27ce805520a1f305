package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"

	"enrichd/store"
)

// ceilings measures, once per run and on demand, the raw SQLite rates the scenarios
// are compared with: the same file settings and connection setup as the store, doing
// only the minimal work.
type ceilings struct {
	opt         Options
	once        sync.Once
	write, read float64
	err         error
}

func (c *ceilings) measure(ctx context.Context) {
	c.once.Do(func() { c.write, c.read, c.err = measureCeilings(ctx, c.opt) })
}

func (c *ceilings) withWrite(ctx context.Context, r *Result) error {
	c.measure(ctx)
	if c.err != nil {
		return c.err
	}
	r.Ceiling, r.CeilingUnit, r.Ratio = c.write, "tx/s", ratio(r.Rate, c.write)
	return nil
}

func (c *ceilings) withRead(ctx context.Context, r *Result) error {
	c.measure(ctx)
	if c.err != nil {
		return c.err
	}
	r.Ceiling, r.CeilingUnit, r.Ratio = c.read, "reads/s", ratio(r.Rate, c.read)
	return nil
}

func measureCeilings(ctx context.Context, opt Options) (write, read float64, err error) {
	dir, err := os.MkdirTemp("", "enrichd-ceiling-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	db, err := store.Open(ctx, filepath.Join(dir, "ceiling.db"), opt.Schema, subjectKey())
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	if _, _, err := db.CreateKey(ctx, store.BySystem, "ceiling", "bench", true); err != nil {
		return 0, 0, err
	}
	grant, err := db.GrantCredits(ctx, "ceiling", 1<<40, nil)
	if err != nil {
		return 0, 0, err
	}
	org, err := db.FindOrg(ctx, "ceiling")
	if err != nil {
		return 0, 0, err
	}
	// Writes: one transaction per task through the one writer connection, from one
	// client (no waiting for the connection) and from as many as the scenarios use;
	// the ceiling is the better of the two.
	var mu sync.Mutex
	var ids []string
	for _, clients := range []int{1, opt.Concurrency} {
		_, n, errs, elapsed := load(ctx, clients, opt.Duration/2, func(ctx context.Context, c, i int) bool {
			id, err := db.CeilingWrite(ctx, org.ID, grant)
			if err == nil {
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			}
			return err == nil
		})
		if errs > 0 || n == 0 {
			return 0, 0, fmt.Errorf("ceiling writes: %d failed", errs)
		}
		write = max(write, float64(n)/elapsed.Seconds())
	}
	_, n, errs, elapsed := load(ctx, opt.Concurrency, opt.Duration, func(ctx context.Context, c, i int) bool {
		return db.CeilingRead(ctx, ids[rand.IntN(len(ids))]) == nil
	})
	if errs > 0 || n == 0 {
		return 0, 0, fmt.Errorf("ceiling reads: %d failed", errs)
	}
	return write, float64(n) / elapsed.Seconds(), nil
}

// ratio is a/b, or 0 when there is no baseline to compare with: JSON has no NaN.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
