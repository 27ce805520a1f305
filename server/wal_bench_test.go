package server_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// BenchmarkWALPeakAtRate submits company lookups at a steady rate for a few seconds
// and reports the largest the write-ahead log grew to (peak-wal-bytes) and the bytes
// the database file grew by per task: with headroomMargin, the free space serve needs
// at that rate (the README's storage section). b.N is not used: a rate is a duration.
func BenchmarkWALPeakAtRate(b *testing.B) {
	for _, rate := range []int{10, 50, 200} {
		b.Run(fmt.Sprintf("%d-tasks-a-second", rate), func(b *testing.B) {
			sqliteOnly(b, "the write-ahead log is SQLite's")
			dir := b.TempDir()
			e := newEnv(b, dbAt(filepath.Join(dir, "enrichd.db")))
			e.key, _ = e.newOrg("load", 1_000_000)
			e.startWorkers()
			size := func(p string) int64 {
				st, err := os.Stat(p)
				if err != nil {
					return 0
				}
				return st.Size()
			}
			startDB := size(e.path)
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
					peak = max(peak, size(e.path+"-wal"))
				}
			}()
			const seconds = 5
			n := rate * seconds
			tick := time.NewTicker(time.Second / time.Duration(rate))
			b.ResetTimer()
			for i := range n {
				<-tick.C
				domain := fmt.Sprintf("load%d.example", i)
				e.net.addCompany(company(fmt.Sprintf("Load %d", i), domain))
				if r := e.do("POST", "/v1/companies/enrich", map[string]any{"domain": domain}); r.status != 202 {
					b.Fatalf("%d %s", r.status, r.raw)
				}
			}
			tick.Stop()
			time.Sleep(time.Second)
			close(stop)
			sampler.Wait()
			b.ReportMetric(float64(peak), "peak-wal-bytes")
			b.ReportMetric(float64(size(e.path)-startDB)/float64(n), "db-bytes/task")
		})
	}
}
