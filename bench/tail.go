package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime/metrics"
	"slices"
	"sync"
	"text/tabwriter"
	"time"
)

// Tail is the tail scenario's figures: one long run of store hits cut into windows,
// each window's latency beside what the process was doing in it, so that a window
// whose p99 stands out can be laid at the door of a cause (the collector, a
// checkpoint, the scheduler, the log's growth) rather than guessed at.
type Tail struct {
	Window  string       `json:"window"`
	Windows []TailWindow `json:"windows"`
	// WorstP99ms is the highest p99 of any window.
	WorstP99ms float64 `json:"worst_p99_ms"`
}

// TailWindow is one window of the tail scenario.
type TailWindow struct {
	StartS float64 `json:"start_s"` // seconds from the run's start
	Rate   float64 `json:"rate"`    // store hits a second
	P99ms  float64 `json:"p99_ms"`
	MaxMS  float64 `json:"max_ms"`
	// GCCycles are the collector's cycles that ended in the window, GCPauseMaxMS the
	// longest stop-the-world pause it made (the upper bound of runtime/metrics' bucket).
	GCCycles     uint64  `json:"gc_cycles"`
	GCPauseMaxMS float64 `json:"gc_pause_max_ms"`
	// SchedP99MS is the 99th percentile of how long a runnable goroutine waited for a
	// processor: on a machine whose cores are all taken, a request's wait lands here.
	SchedP99MS float64 `json:"sched_p99_ms"`
	// Checkpoints ran in the window, taking CheckpointMS in all; WriterCheckpointMS
	// of that is the writer's own, which holds the writes off while it runs.
	Checkpoints        int64   `json:"checkpoints"`
	CheckpointMS       float64 `json:"checkpoint_ms"`
	WriterCheckpointMS float64 `json:"writer_checkpoint_ms"`
	// PerCommit is the write transactions a commit carried; WALMB the write-ahead
	// log's size at the window's end.
	PerCommit float64 `json:"per_commit"`
	WALMB     float64 `json:"wal_mb"`
}

// checkpointCounter is the SQLite driver's count of its background checkpoints.
type checkpointCounter interface {
	CheckpointStats() (count int64, busy, writerBusy time.Duration)
}

// processSample is what the tail scenario reads of the process at a window's edge.
type processSample struct {
	at                                   time.Time
	gcCycles                             uint64
	gcPauses, schedLatency               *metrics.Float64Histogram
	checkpoints                          int64
	checkpointBusy, writerCheckpointBusy time.Duration
	transactions, commits                int64
	walBytes                             int64
}

var tailMetrics = []string{"/gc/cycles/total:gc-cycles", "/sched/pauses/total/gc:seconds", "/sched/latencies:seconds"}

func (e *env) sample() processSample {
	ms := make([]metrics.Sample, len(tailMetrics))
	for i, name := range tailMetrics {
		ms[i].Name = name
	}
	metrics.Read(ms)
	s := processSample{at: time.Now()}
	if ms[0].Value.Kind() == metrics.KindUint64 {
		s.gcCycles = ms[0].Value.Uint64()
	}
	if ms[1].Value.Kind() == metrics.KindFloat64Histogram {
		s.gcPauses = ms[1].Value.Float64Histogram()
	}
	if ms[2].Value.Kind() == metrics.KindFloat64Histogram {
		s.schedLatency = ms[2].Value.Float64Histogram()
	}
	if cc, ok := e.db.Driver.(checkpointCounter); ok {
		s.checkpoints, s.checkpointBusy, s.writerCheckpointBusy = cc.CheckpointStats()
	}
	s.transactions, s.commits = e.db.WriteStats()
	if st, err := os.Stat(e.dbPath() + "-wal"); err == nil {
		s.walBytes = st.Size()
	}
	return s
}

// histogramSince is the part of h recorded after was, as counts per bucket.
func histogramSince(h, was *metrics.Float64Histogram) []uint64 {
	if h == nil {
		return nil
	}
	counts := slices.Clone(h.Counts)
	if was != nil && len(was.Counts) == len(counts) {
		for i := range counts {
			counts[i] -= was.Counts[i]
		}
	}
	return counts
}

// bucketQuantile is the upper bound, in milliseconds, of the bucket holding quantile
// q of counts (q = 1: the highest bucket with anything in it); 0 when it is empty.
func bucketQuantile(h *metrics.Float64Histogram, counts []uint64, q float64) float64 {
	var total uint64
	for _, c := range counts {
		total += c
	}
	if total == 0 {
		return 0
	}
	want := uint64(q * float64(total))
	if want == 0 {
		want = 1
	}
	var seen uint64
	for i, c := range counts {
		seen += c
		if seen >= want {
			upper := h.Buckets[i+1]
			if math.IsInf(upper, 1) { // the last bucket is open: say its lower bound
				upper = h.Buckets[i]
			}
			return upper * 1000
		}
	}
	return 0
}

// tail sends store hits from --concurrency clients for --duration without a break,
// and reports each --tail-window of it: the rate, p99 and longest answer, beside the
// collector's cycles and longest pause, the scheduler's wait, the checkpoints and the
// log's size in that window.
func tail(ctx context.Context, opt Options) (Result, error) {
	window := opt.TailWindow
	if window <= 0 {
		window = 10 * time.Second
	}
	e, key, domains, err := startWarmed(ctx, opt)
	if err != nil {
		return Result{}, err
	}
	defer e.close()

	type done struct{ at, took time.Duration }
	var mu sync.Mutex
	var all []done
	var bad int64
	start := time.Now()
	deadline := start.Add(opt.Duration)
	samples := []processSample{e.sample()}
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(window)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				samples = append(samples, e.sample())
			case <-stopSampling:
				samples = append(samples, e.sample())
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range opt.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []done
			var myBad int64
			for ctx.Err() == nil && time.Now().Before(deadline) {
				t := time.Now()
				status, _, err := e.post(ctx, key, "/v1/companies/enrich", `{"domain":"`+domains[rand.IntN(len(domains))]+`"}`)
				if ctx.Err() != nil {
					break
				}
				now := time.Now()
				mine = append(mine, done{at: now.Sub(start), took: now.Sub(t)})
				if err != nil || status != http.StatusOK {
					myBad++
				}
			}
			mu.Lock()
			all = append(all, mine...)
			bad += myBad
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stopSampling)
	<-sampled
	if ctx.Err() != nil {
		return Result{}, ctx.Err()
	}

	t := &Tail{Window: window.String()}
	perWindow := make([]latencies, len(samples)-1)
	var whole latencies
	for _, d := range all {
		whole = append(whole, d.took)
		i := 0
		for i < len(perWindow)-1 && d.at >= samples[i+1].at.Sub(start) {
			i++
		}
		perWindow[i] = append(perWindow[i], d.took)
	}
	for i, lat := range perWindow {
		from, to := samples[i], samples[i+1]
		secs := to.at.Sub(from.at).Seconds()
		w := TailWindow{StartS: from.at.Sub(start).Seconds(), P99ms: lat.percentile(0.99), MaxMS: lat.percentile(1),
			GCCycles: to.gcCycles - from.gcCycles, Checkpoints: to.checkpoints - from.checkpoints,
			CheckpointMS:       float64((to.checkpointBusy - from.checkpointBusy).Microseconds()) / 1000,
			WriterCheckpointMS: float64((to.writerCheckpointBusy - from.writerCheckpointBusy).Microseconds()) / 1000,
			WALMB:              float64(to.walBytes) / (1 << 20)}
		if secs > 0 {
			w.Rate = float64(len(lat)) / secs
		}
		if c := to.commits - from.commits; c > 0 {
			w.PerCommit = float64(to.transactions-from.transactions) / float64(c)
		}
		if to.gcPauses != nil {
			w.GCPauseMaxMS = bucketQuantile(to.gcPauses, histogramSince(to.gcPauses, from.gcPauses), 1)
		}
		if to.schedLatency != nil {
			w.SchedP99MS = bucketQuantile(to.schedLatency, histogramSince(to.schedLatency, from.schedLatency), 0.99)
		}
		t.WorstP99ms = max(t.WorstP99ms, w.P99ms)
		t.Windows = append(t.Windows, w)
	}
	r := Result{Scenario: "tail", Unit: "req/s", Rate: float64(len(all)) / elapsed.Seconds(), Count: int64(len(all)) - bad, Errors: bad, Tail: t,
		Note: fmt.Sprintf("POST /v1/companies/enrich answered from the store (200) from %d clients for %s without a break, cut into windows of %s; the worst window's p99 %.1f ms",
			opt.Concurrency, opt.Duration, window, t.WorstP99ms)}
	whole.fill(&r)
	return r, nil
}

// writeTail prints the tail scenario's windows.
func writeTail(w io.Writer, t *Tail) {
	fmt.Fprintf(w, "\ntail: store hits window by window (%s each), beside what the process did in the window\n", t.Window)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "from\treq/s\tp99\tmax\tGC cycles\tlongest GC pause\tscheduler wait p99\tcheckpoints\tcheckpoint time\tof it the writer's\twrites a commit\tWAL at end")
	for _, win := range t.Windows {
		fmt.Fprintf(tw, "%.0f s\t%s\t%.1f ms\t%.1f ms\t%d\t%.2f ms\t%.2f ms\t%d\t%.0f ms\t%.0f ms\t%.1f\t%.1f MB\n", win.StartS, thousands(win.Rate), win.P99ms, win.MaxMS,
			win.GCCycles, win.GCPauseMaxMS, win.SchedP99MS, win.Checkpoints, win.CheckpointMS, win.WriterCheckpointMS, win.PerCommit, win.WALMB)
	}
	tw.Flush()
}
