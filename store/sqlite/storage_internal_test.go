package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/matryer/is"
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
