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

// TestSteadyWritesStartTheLogOver writes without a pause until the write-ahead log has
// grown past walRestartAt, and requires it to be started over (cut back to
// walSizeLimit) while the writes go on. The background checkpoint alone never got to
// the end of a log the writer kept appending to: under a steady load it grew without
// end, hundreds of megabytes a minute, and every read and checkpoint slowed with it.
func TestSteadyWritesStartTheLogOver(t *testing.T) {
	db := openInternal(t)
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

	grown := false
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && !t.Failed() {
		time.Sleep(20 * time.Millisecond)
		size := db.walBytes()
		switch {
		case size > walRestartAt:
			grown = true
		case grown && size <= walSizeLimit:
			// The writers are still at it: the log was started over under load, not in
			// a pause that let the background checkpoint reach its end.
			before := written.Load()
			time.Sleep(time.Second)
			if written.Load() == before {
				t.Fatal("the writes had stopped")
			}
			return
		}
	}
	t.Fatalf("the log was not started over under steady writes (grown past %d bytes: %v; %d bytes now, %d rows written)",
		walRestartAt, grown, db.walBytes(), written.Load())
}
