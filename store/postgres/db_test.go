package postgres

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
)

func TestOpenMigratesOnceUnderConcurrentOpens(t *testing.T) {
	is := is.New(t)
	dsn := freshDSN(t)
	c := &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	var wg sync.WaitGroup
	dbs := make([]*DB, 3)
	errs := make([]error, 3)
	for i := range dbs {
		wg.Go(func() { dbs[i], errs[i] = Open(context.Background(), dsn, c.Now) })
	}
	wg.Wait()
	for i := range dbs {
		is.NoErr(errs[i])
		defer dbs[i].Close()
	}
	applied, known, err := facade(dbs[0]).Migrations(context.Background())
	is.NoErr(err)
	is.Equal(applied, known)
	var n int
	is.NoErr(dbs[0].pool.QueryRow(context.Background(), `SELECT count(*) FROM schema_migrations`).Scan(&n))
	is.Equal(n, known)
}

func TestCheckWritable(t *testing.T) {
	is := is.New(t)
	db, _ := newTestDB(t)
	is.NoErr(db.CheckWritable(context.Background()))
	is.True(db.Writable(context.Background()))
	tx, commits := db.WriteStats()
	is.True(tx >= 1 && commits >= 1)
}
