package server_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"enrichd/server/servertest"
)

// BenchmarkWALPeakAtRate submits company lookups at a steady rate for a few seconds
// and reports the largest the write-ahead log grew to (peak-wal-bytes) and the bytes
// the database file grew by per task: with headroomMargin, the free space serve needs
// at that rate (the README's storage section), and the enqueues' p99 and slowest
// latency, which a checkpoint that holds the writer off shows. b.N is not used: a rate is a duration.
func BenchmarkWALPeakAtRate(b *testing.B) {
	for _, rate := range []int{10, 50, 200} {
		b.Run(fmt.Sprintf("%d-tasks-a-second", rate), func(b *testing.B) {
			servertest.SQLiteOnly(b, "the write-ahead log is SQLite's")
			dir := b.TempDir()
			e := servertest.NewEnv(b, servertest.DBAt(filepath.Join(dir, "enrichd.db")))
			e.Key, _ = e.NewOrg("load", 1_000_000)
			e.StartWorkers()
			size := func(p string) int64 {
				st, err := os.Stat(p)
				if err != nil {
					return 0
				}
				return st.Size()
			}
			startDB := size(e.Path)
			var peak int64
			stop := make(chan struct{})
			var sampler sync.WaitGroup
			sampler.Add(1)
			go func() {
				defer sampler.Done()
				for {
					select {
					case <-stop:
						return
					case <-time.After(5 * time.Millisecond):
					}
					peak = max(peak, size(e.Path+"-wal"))
				}
			}()
			const seconds = 5
			n := rate * seconds
			tick := time.NewTicker(time.Second / time.Duration(rate))
			b.ResetTimer()
			took := make([]time.Duration, 0, n)
			for i := range n {
				<-tick.C
				domain := fmt.Sprintf("load%d.example", i)
				e.Net.AddCompany(servertest.Company(fmt.Sprintf("Load %d", i), domain))
				start := time.Now()
				r := e.Do("POST", "/v1/companies/enrich", map[string]any{"domain": domain})
				took = append(took, time.Since(start))
				if r.Status != 202 {
					b.Fatalf("%d %s", r.Status, r.Raw)
				}
			}
			tick.Stop()
			time.Sleep(time.Second)
			close(stop)
			sampler.Wait()
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-enqueue-ms")
			b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "max-enqueue-ms")
			b.ReportMetric(float64(peak), "peak-wal-bytes")
			b.ReportMetric(float64(size(e.Path)-startDB)/float64(n), "db-bytes/task")
		})
	}
}
