package sqlite

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSteadyWritesStartTheLogOver writes without a pause until the write-ahead log is
// longer than its restart length, and requires the writer to copy the whole log, so
// that the next commit starts it over, twice while the writes go on. The background
// checkpoint alone never got to the end of a log the writer kept appending to: under
// a steady load its file grew without end, gigabytes a minute.
func TestSteadyWritesStartTheLogOver(t *testing.T) {
	db := openInternal(t)
	const restartAt = 1 << 20
	db.restartAt.Store(restartAt)
	ctx := context.Background()
	filler := strings.Repeat("x", 2000)
	var stop atomic.Bool
	var written atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				err := db.inTx(ctx, func(tx *Tx) error {
					_, err := tx.ExecContext(ctx, `INSERT INTO orgs (id, name, created_at) VALUES (?, ?, 0)`,
						fmt.Sprintf("%d-%d", w, i), fmt.Sprintf("%s-%d-%d", filler, w, i))
					return err
				})
				if err != nil {
					t.Error(err)
					return
				}
				written.Add(1)
			}
		}()
	}
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()

	deadline := time.Now().Add(60 * time.Second)
	for db.logCopied.Load() < 2 && time.Now().Before(deadline) && !t.Failed() {
		time.Sleep(20 * time.Millisecond)
	}
	if db.logCopied.Load() < 2 {
		t.Fatalf("the writer did not copy the whole log twice under steady writes within 60 s (%d rows written, %d bytes of log file)",
			written.Load(), db.walBytes())
	}
	// The writers are still at it: the log was started over under load, not in a pause
	// that let the background checkpoint reach its end.
	before := written.Load()
	time.Sleep(time.Second)
	if written.Load() == before {
		t.Fatal("the writes had stopped")
	}
	_, _, writer := db.CheckpointStats()
	if writer == 0 {
		t.Fatal("the writer never finished a checkpoint itself")
	}
}
