package sqlite

import (
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"modernc.org/sqlite"
)

// storageFault tells SQLite's storage errors, as SQLite itself returns them, from the
// others.
func TestStorageFaultClassification(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "c.db")
	rw, err := sql.Open("sqlite", "file:"+path)
	is.NoErr(err)
	defer rw.Close()
	_, err = rw.ExecContext(ctx, `CREATE TABLE t (id INTEGER PRIMARY KEY)`)
	is.NoErr(err)
	_, err = rw.ExecContext(ctx, `INSERT INTO t VALUES (1)`)
	is.NoErr(err)

	_, err = rw.ExecContext(ctx, `INSERT INTO t VALUES (1)`)
	is.True(err != nil)
	is.True(!storageFault(err)) // a constraint

	_, err = rw.ExecContext(ctx, `SELEC nonsense`)
	is.True(err != nil)
	is.True(!storageFault(err)) // a syntax error

	ro, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	is.NoErr(err)
	defer ro.Close()
	_, err = ro.ExecContext(ctx, `INSERT INTO t VALUES (2)`)
	is.True(err != nil)
	is.True(storageFault(err)) // SQLITE_READONLY: a read-only file

	missing, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "missing", "x.db"))
	is.NoErr(err) // opening is lazy
	defer missing.Close()
	err = missing.PingContext(ctx)
	is.True(err != nil)
	is.True(storageFault(err)) // SQLITE_CANTOPEN

	is.True(!storageFault(context.Canceled))
	is.True(!storageFault(nil))
}

// A disk that flaps (a probe that fits, then writes that do not) is logged once per
// StorageLogInterval, with the count of the failures in between.
func TestStorageFailuresAreLoggedOncePerInterval(t *testing.T) {
	is := is.New(t)
	var logs strings.Builder
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	db := &DB{Now: func() time.Time { return now }}
	db.SetLogger(slog.New(slog.NewTextHandler(&logs, nil)))
	full := &sqlite.Error{}
	lines := func(msg string) int { return strings.Count(logs.String(), msg) }

	for range 50 {
		db.storageFailed(full)
		db.storageFailed(full)
		is.True(db.StorageFailing())
		db.storageRecovered()
		is.True(!db.StorageFailing())
		now = now.Add(time.Second)
	}
	is.Equal(lines("cannot take writes"), 1) // the first failure
	is.Equal(lines("takes writes again"), 1) // the end of the run that was logged
	is.True(strings.Contains(logs.String(), "failures=1 "))
	is.Equal(db.StorageFailures(), uint64(100))

	now = now.Add(StorageLogInterval)
	db.storageFailed(full)
	is.Equal(lines("cannot take writes"), 2)
	is.True(strings.Contains(logs.String(), "failures=99 ")) // the 98 in between, and this one
}
