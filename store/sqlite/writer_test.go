package sqlite_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/matryer/is"
)

// TestWriteStatsCountEveryTransaction: every transaction handed to the writer is
// counted once, and no commit carries none.
func TestWriteStatsCountEveryTransaction(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, _, _ := openDB(t)
	tx0, c0 := db.WriteStats()
	errs := make(chan error, 50)
	for i := range cap(errs) {
		go func() {
			_, err := db.CreateOrg(ctx, fmt.Sprintf("org-%d", i))
			errs <- err
		}()
	}
	for range cap(errs) {
		is.NoErr(<-errs)
	}
	tx1, c1 := db.WriteStats()
	is.Equal(tx1-tx0, int64(50))
	is.True(c1-c0 >= 1 && c1-c0 <= 50)
}
