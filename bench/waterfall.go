package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"enrichd/enrich"
	"enrichd/enrich/source"
	"enrichd/server"
)

// The waterfall scenario's subjects and the fields it wants filled.
const waterfallSubjects = 10_000

var waterfallWanted = []string{"employee_count", "primary_industry", "year_founded", "about", "slogan", "headquarters"}

// vendor is a synthetic data vendor for the waterfall scenario: the sim's network, of
// which it knows a set share of the companies and, of each one it knows, a set share of
// the fields, at a set price a call (hit or miss, as most vendors bill a lookup). Which
// companies and fields it knows is a hash of its name and the subject, so that every
// run, and both passes of one run, ask the same questions of the same answers.
type vendor struct {
	name     string
	sim      *source.Sim
	coverage float64 // share of the companies it knows
	fields   float64 // share of a known company's fields it has
	price    int64   // vendor credits a call

	calls, credits atomic.Int64
}

func (v *vendor) Name() string { return v.name }

// Prices says the vendor bills its calls, so budgets hold it; it matches nobody by
// email and searches no staff.
func (v *vendor) Prices() enrich.Prices { return enrich.Prices{} }

func (v *vendor) CompanyByDomain(ctx context.Context, tally *enrich.Tally, domain string) (*enrich.Company, error) {
	return v.company(ctx, tally, domain, func() (*enrich.Company, error) { return v.sim.CompanyByDomain(ctx, unbilled(), domain) })
}

func (v *vendor) CompanyByURL(ctx context.Context, tally *enrich.Tally, networkURL string) (*enrich.Company, error) {
	return v.company(ctx, tally, networkURL, func() (*enrich.Company, error) { return v.sim.CompanyByURL(ctx, unbilled(), networkURL) })
}

// unbilled is a tally of its own, so the sim the vendor reads its records from does
// not count a second call, or its own price, on the ask's.
func unbilled() *enrich.Tally { return &enrich.Tally{} }

func (v *vendor) PersonByURL(ctx context.Context, tally *enrich.Tally, networkURL string) (*enrich.Person, error) {
	if err := v.bill(ctx, tally); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%s: people: %w", v.name, enrich.ErrNotFound)
}

// bill puts one call on the ask's books at its price, then counts it and its price in
// the vendor's own counters and in the ask's tally, as an adapter of a real vendor
// does; a call that cannot be booked is not made.
func (v *vendor) bill(ctx context.Context, t *enrich.Tally) error {
	if err := t.Book(ctx, v.price); err != nil {
		return err
	}
	v.calls.Add(1)
	v.credits.Add(v.price)
	t.Call()
	t.Charge(v.price)
	return nil
}

func (v *vendor) company(ctx context.Context, tally *enrich.Tally, subject string, fetch func() (*enrich.Company, error)) (*enrich.Company, error) {
	if err := v.bill(ctx, tally); err != nil {
		return nil, err
	}
	if !v.knows(subject, "") {
		return nil, fmt.Errorf("%s: %s: %w", v.name, subject, enrich.ErrNotFound)
	}
	c, err := fetch()
	if err != nil {
		return nil, err
	}
	// Drop the fields this vendor lacks for this company, by their JSON names.
	raw, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, err
	}
	for name := range fields {
		if slices.Contains(waterfallWanted, name) && !v.knows(subject, name) {
			delete(fields, name)
		}
	}
	if raw, err = json.Marshal(fields); err != nil {
		return nil, err
	}
	var partial enrich.Company
	return &partial, json.Unmarshal(raw, &partial)
}

// knows reports whether the vendor knows the subject (field "") or, of a subject it
// knows, the field.
func (v *vendor) knows(subject, field string) bool {
	h := fnv.New64a()
	io.WriteString(h, v.name+"\x00"+subject+"\x00"+field)
	share := v.coverage
	if field != "" {
		share = v.fields
	}
	return float64(h.Sum64()%1_000_000) < share*1_000_000
}

// waterfallVendors are three vendors, cheapest first: the cheap one knows fewer
// companies and less of each.
func waterfallVendors() []*vendor {
	sim := &source.Sim{NetworkHost: enrich.DefaultNetworkHost}
	return []*vendor{
		{name: "cheap", sim: sim, coverage: 0.60, fields: 0.50, price: 1},
		{name: "middle", sim: sim, coverage: 0.75, fields: 0.70, price: 3},
		{name: "dear", sim: sim, coverage: 0.90, fields: 0.90, price: 10},
	}
}

// WaterfallRun is one way of asking the vendors, over the same subjects twice.
type WaterfallRun struct {
	Mode string `json:"mode"`
	Pass int    `json:"pass"` // 1, then 2 for the same subjects again within the freshness window
	// Filled is the share of the wanted fields of every subject that the answers carry.
	Filled float64 `json:"filled"`
	// Found is the share of subjects the task succeeded for.
	Found float64 `json:"found"`
	// Calls and Credits are the vendors' calls and vendor credits per subject, counted
	// by the vendors themselves.
	Calls   float64 `json:"vendor_calls_per_record"`
	Credits float64 `json:"vendor_credits_per_record"`
	// TaskCalls are the calls the tasks' `sources` report, per subject: the same as
	// Calls when the tasks tell the truth.
	TaskCalls float64 `json:"task_vendor_calls_per_record"`
	// FoundCalls are the calls the tasks that succeeded report, per subject: on the
	// second pass those are the records held, which must cost nothing. So must the
	// rest: a vendor's miss is remembered for the freshness window, and a subject no
	// vendor knew is asked of none again.
	FoundCalls float64 `json:"found_vendor_calls_per_record"`
	// TaskCredits are the vendor credits the tasks' `sources` report, per subject.
	TaskCredits float64 `json:"task_vendor_credits_per_record"`
	// VendorCredits are the credits each vendor counted itself in the pass, in all, by
	// name: what a budget of one vendor is measured against.
	VendorCredits map[string]int64 `json:"vendor_credits_by_vendor"`
}

// Waterfall is the waterfall scenario's figures.
type Waterfall struct {
	Subjects int            `json:"subjects"`
	Wanted   []string       `json:"wanted"`
	Vendors  []string       `json:"vendors"`
	Runs     []WaterfallRun `json:"runs"`
}

// waterfall enriches the same companies through three synthetic vendors, first with
// first-hit-wins (no fill list), then as a waterfall filling the wanted fields, then
// the same with the dearest vendor under a monthly budget, each twice: the second pass
// is within the freshness window and asks nothing, neither for a record held nor of a
// vendor that did not know the subject the first time.
func waterfall(ctx context.Context, opt Options) (Result, error) {
	subjects := opt.WaterfallSubjects
	if subjects <= 0 {
		subjects = waterfallSubjects
	}
	w := &Waterfall{Subjects: subjects, Wanted: waterfallWanted}
	for _, v := range waterfallVendors() {
		w.Vendors = append(w.Vendors, fmt.Sprintf("%s (knows %.0f%% of companies, %.0f%% of their fields, %d credits a call)", v.name, 100*v.coverage, 100*v.fields, v.price))
	}
	// The dear vendor's monthly budget in the third mode: 2 credits a subject, a fifth
	// of what the waterfall pays it unbounded.
	capped := map[string]int64{"dear": int64(2 * subjects)}
	modes := []struct {
		name    string
		fill    []string
		budgets map[string]int64
	}{
		{"first-hit-wins", nil, nil},
		{"waterfall", waterfallWanted, nil},
		{fmt.Sprintf("waterfall, dear capped at %d credits", capped["dear"]), waterfallWanted, capped},
	}
	for _, mode := range modes {
		runs, err := waterfallMode(ctx, opt, subjects, mode.name, mode.fill, mode.budgets)
		if err != nil {
			return Result{}, err
		}
		w.Runs = append(w.Runs, runs...)
	}
	return Result{Scenario: "waterfall", Unit: "subjects", Rate: float64(subjects), Count: int64(subjects), Waterfall: w,
		Note: "three synthetic vendors; see the waterfall table"}, nil
}

func waterfallMode(ctx context.Context, opt Options, subjects int, mode string, fill []string, budgets map[string]int64) ([]WaterfallRun, error) {
	vendors := waterfallVendors()
	e, err := newEnv(ctx, opt, func(cfg *server.Config) {
		cfg.Sources = nil
		for _, v := range vendors {
			cfg.Sources = append(cfg.Sources, v)
		}
		cfg.Fill = enrich.FillLists{Company: fill}
		cfg.SourceBudgets = budgets
	})
	if err != nil {
		return nil, err
	}
	defer e.close()
	key, orgID, err := e.newOrg(ctx, "bench")
	if err != nil {
		return nil, err
	}
	e.startWorkers()
	var runs []WaterfallRun
	for pass := 1; pass <= 2; pass++ {
		var calls0, credits0 int64
		each0 := map[string]int64{}
		for _, v := range vendors {
			calls0, credits0 = calls0+v.calls.Load(), credits0+v.credits.Load()
			each0[v.name] = v.credits.Load()
		}
		ids, err := e.enqueueAll(ctx, key, subjects, opt.Concurrency)
		if err != nil {
			return nil, err
		}
		if err := e.settled(ctx, orgID); err != nil {
			return nil, err
		}
		run := WaterfallRun{Mode: mode, Pass: pass, VendorCredits: map[string]int64{}}
		var calls, credits int64
		for _, v := range vendors {
			calls, credits = calls+v.calls.Load(), credits+v.credits.Load()
			run.VendorCredits[v.name] = v.credits.Load() - each0[v.name]
		}
		run.Calls = float64(calls-calls0) / float64(subjects)
		run.Credits = float64(credits-credits0) / float64(subjects)
		filled, found, taskCalls, foundCalls, taskCredits, err := e.scoreTasks(ctx, key, ids, opt.Concurrency)
		if err != nil {
			return nil, err
		}
		run.Filled = float64(filled) / float64(subjects*len(waterfallWanted))
		run.Found = float64(found) / float64(subjects)
		run.TaskCalls = float64(taskCalls) / float64(subjects)
		run.FoundCalls = float64(foundCalls) / float64(subjects)
		run.TaskCredits = float64(taskCredits) / float64(subjects)
		runs = append(runs, run)
	}
	return runs, nil
}

// enqueueAll asks for company i of the subjects, for every i, from n clients, and
// returns the tasks' ids by subject.
func (e *env) enqueueAll(ctx context.Context, key string, subjects, n int) ([]string, error) {
	ids := make([]string, subjects)
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= subjects || ctx.Err() != nil {
					return
				}
				status, id, err := e.post(ctx, key, "/v1/companies/enrich", fmt.Sprintf(`{"domain":"waterfall-%d.com"}`, i))
				if err == nil && (status != http.StatusOK && status != http.StatusAccepted || id == "") {
					err = fmt.Errorf("enqueueing waterfall-%d.com: status %d", i, status)
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				ids[i] = id
			}
		}()
	}
	wg.Wait()
	return ids, firstErr
}

// scoreTasks reads every task and counts the wanted fields its data carries, the tasks
// that succeeded, and the vendor calls their `sources` report, all of them and those of
// the tasks that succeeded.
func (e *env) scoreTasks(ctx context.Context, key string, ids []string, n int) (filled, found, calls, foundCalls, credits int64, err error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(ids) || ctx.Err() != nil {
					return
				}
				a, rerr := e.do(ctx, key, http.MethodGet, "/v1/tasks/"+ids[i], "", "")
				var task struct {
					Task struct {
						Status string `json:"status"`
					} `json:"task"`
					Data    map[string]json.RawMessage `json:"data"`
					Sources []enrich.SourceCall        `json:"sources"`
				}
				if rerr == nil && a.status != http.StatusOK {
					rerr = fmt.Errorf("reading task %s: status %d", ids[i], a.status)
				}
				if rerr == nil {
					rerr = json.Unmarshal(a.body, &task)
				}
				mu.Lock()
				if rerr != nil {
					if err == nil {
						err = rerr
					}
					mu.Unlock()
					return
				}
				if task.Task.Status == "succeeded" {
					found++
				}
				for _, f := range waterfallWanted {
					if v, ok := task.Data[f]; ok && !isNull(v) {
						filled++
					}
				}
				for _, s := range task.Sources {
					calls += s.VendorCalls
					credits += s.Credits
					if task.Task.Status == "succeeded" {
						foundCalls += s.VendorCalls
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return filled, found, calls, foundCalls, credits, err
}

func isNull(v json.RawMessage) bool {
	s := strings.TrimSpace(string(v))
	return s == "null" || s == `""` || s == "[]" || s == "{}"
}

func writeWaterfall(w io.Writer, wf *Waterfall) {
	fmt.Fprintf(w, "\nwaterfall: %d companies, wanted fields %s; vendors asked in this order:\n", wf.Subjects, strings.Join(wf.Wanted, ", "))
	for _, v := range wf.Vendors {
		fmt.Fprintf(w, "  %s\n", v)
	}
	fmt.Fprintln(w, "\n| mode | pass | found | wanted fields filled | vendor calls / record | vendor credits / record | calls the tasks report / record | of which for records found |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, r := range wf.Runs {
		fmt.Fprintf(w, "| %s | %d | %.1f%% | %.1f%% | %.2f | %.2f | %.2f | %.2f |\n", r.Mode, r.Pass, 100*r.Found, 100*r.Filled, r.Calls, r.Credits, r.TaskCalls, r.FoundCalls)
	}
}
