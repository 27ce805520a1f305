package servertest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"enrichd/store"
	"enrichd/store/storetest"
)

// Main is the TestMain of a package whose tests use NewEnv. Most of an HTTP test's time
// is spent waiting (on workers, sweeps, deadlines, the network's fakes), not computing,
// so unless -parallel is given the tests that call t.Parallel run parallelTests at a
// time rather than one a core. It stops the PostgreSQL cluster the tests started, and
// removes the migrated SQLite file the tests' databases are copied from.
func Main(m *testing.M) {
	storetest.ParallelUnlessGiven(parallelTests)
	code := storetest.PostgresRun(m)
	if sqliteTemplate.dir != "" {
		os.RemoveAll(sqliteTemplate.dir)
	}
	os.Exit(code)
}

// parallelTests is how many tests run at once by default. Eight keep a 2-core machine's
// cores busy while most of them wait, and leave the timings the tests allow (a
// receiver's timeout, a deadline) well within reach under load.
const parallelTests = 8

// sqliteTemplate is a database file holding the store's schema and nothing else,
// migrated once for the test binary: a test's database is a copy of it, which takes a
// small fraction of the time the migrations take on an empty file (as the tests on
// PostgreSQL copy a template database).
var sqliteTemplate struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// copySQLiteTemplate writes a copy of the migrated template at path.
func copySQLiteTemplate(t testing.TB, path string) {
	t.Helper()
	tmpl := &sqliteTemplate
	tmpl.once.Do(func() {
		tmpl.dir, tmpl.err = os.MkdirTemp("", "enrichd-servertest-")
		if tmpl.err != nil {
			return
		}
		tmpl.path = filepath.Join(tmpl.dir, "template.db")
		db, err := store.Open(context.Background(), tmpl.path, storetest.Schema(t), store.WithSubjectKey(storetest.SubjectKey))
		if err != nil {
			tmpl.err = err
			return
		}
		// Closing checkpoints the write-ahead log into the file: the file alone is the
		// database.
		tmpl.err = db.Close()
	})
	if tmpl.err != nil {
		t.Fatalf("the migrated SQLite template: %v", tmpl.err)
	}
	if err := copyFile(tmpl.path, path); err != nil {
		t.Fatal(err)
	}
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return fmt.Errorf("copying the SQLite template: %w", err)
	}
	return dst.Close()
}
