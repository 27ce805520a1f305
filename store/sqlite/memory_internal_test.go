package sqlite

import (
	"context"
	"database/sql"
	"enrichd/store"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
	"modernc.org/sqlite"
)

func openWith(t *testing.T, opts ...Option) *DB {
	t.Helper()
	schema, err := os.ReadFile(filepath.Join("..", "..", "schema.sql"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "enrichd.db"), string(schema), nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// cacheSizeOf reads PRAGMA cache_size back from a connection: negative, in KiB.
func cacheSizeOf(t *testing.T, conn *sql.Conn) int {
	t.Helper()
	var v int
	if err := conn.QueryRowContext(context.Background(), `PRAGMA cache_size`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestCacheSizeReachesTheConnections reads PRAGMA cache_size back from the writer and
// from every reader, held at once so that each is a connection of its own.
func TestCacheSizeReachesTheConnections(t *testing.T) {
	for _, tt := range []struct {
		name                 string
		opts                 []Option
		readers              int
		writerKiB, readerKiB int
	}{
		{"given", []Option{store.WithCacheSize(10), store.WithReaders(3)}, 3, 5 << 10, 5 << 10 / 3},
		{"defaults", nil, store.DefaultReaders(), DefaultCacheSize << 9, DefaultCacheSize << 9 / store.DefaultReaders()},
		{"a reader's floor", []Option{store.WithCacheSize(1), store.WithReaders(8)}, 8, 512, minReaderCacheKiB},
	} {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			db := openWith(t, tt.opts...)
			is.Equal(db.read.Stats().MaxOpenConnections, tt.readers)

			w, err := db.write.Conn(ctx)
			is.NoErr(err)
			is.Equal(cacheSizeOf(t, w), -tt.writerKiB)
			is.NoErr(w.Close())

			var held []*sql.Conn
			for range tt.readers {
				r, err := db.read.Conn(ctx)
				is.NoErr(err)
				held = append(held, r)
				is.Equal(cacheSizeOf(t, r), -tt.readerKiB)
			}
			is.Equal(db.read.Stats().OpenConnections, tt.readers)
			for _, r := range held {
				is.NoErr(r.Close())
			}
		})
	}
}

// TestOpenRefusesABadBudget checks the options before the file is created.
func TestOpenRefusesABadBudget(t *testing.T) {
	for _, tt := range []struct {
		opt  Option
		want string
	}{
		{store.WithCacheSize(0), "page cache must be from 1"},
		{store.WithCacheSize(MaxCacheSize + 1), "page cache must be from 1"},
		{store.WithReaders(0), "readers must be from 1"},
		{store.WithReaders(MaxReaders + 1), "readers must be from 1"},
	} {
		t.Run(tt.want, func(t *testing.T) {
			is := is.New(t)
			path := filepath.Join(t.TempDir(), "enrichd.db")
			_, err := Open(context.Background(), path, "-- migration 1: nothing\n", nil, tt.opt)
			is.True(err != nil && strings.Contains(err.Error(), tt.want)) // the error says what is wrong
			_, err = os.Stat(path)
			is.True(errors.Is(err, fs.ErrNotExist)) // and leaves no file behind
		})
	}
}

// TestReleaseMemoryEmptiesTheWriterCache fills the writer's page cache with the pages
// of many writes and checks that ReleaseMemory gives them back.
func TestReleaseMemoryEmptiesTheWriterCache(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db := openWith(t)
	is.NoErr(db.inTx(ctx, func(tx *Tx) error {
		_, err := tx.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
			INSERT INTO orgs (id, name, created_at) SELECT 'org-' || i, 'name-' || i || '-' || hex(randomblob(40)), 0 FROM n`)
		return err
	}))
	// What the writer's cache holds, in bytes (sqlite3_db_status).
	cacheUsed := func() int {
		conn, err := db.write.Conn(ctx)
		is.NoErr(err)
		defer conn.Close()
		var used int
		is.NoErr(conn.Raw(func(dc any) error {
			var err error
			used, _, err = dc.(sqlite.DBStatus).Status(sqlite.DBStatusCacheUsed, false)
			return err
		}))
		return used
	}
	before := cacheUsed()
	is.True(before > 1<<20) // the writes left more than a MiB of pages cached
	is.NoErr(db.ReleaseMemory(ctx))
	after := cacheUsed()
	t.Logf("writer's page cache: %d bytes before, %d after", before, after)
	is.True(after < before/10)

	// The database works on as before, reading the pages back.
	var n int
	is.NoErr(db.read.QueryRowContext(ctx, `SELECT count(*) FROM orgs`).Scan(&n))
	is.Equal(n, 20000)
}
