package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/matryer/is"
)

func openInternal(t *testing.T) *DB {
	t.Helper()
	schema, err := os.ReadFile(filepath.Join("..", "..", "schema.sql"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "enrichd.db"), string(schema), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestGroupCommitUndoesOnlyWhatFailed runs many transactions at once, so that they are
// committed together: each that fails after writing must leave nothing behind, each
// canceled before it ran must not run, and every other must be committed.
func TestGroupCommitUndoesOnlyWhatFailed(t *testing.T) {
	is := is.New(t)
	db := openInternal(t)
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	errUndo := errors.New("undo")
	var wg sync.WaitGroup
	results := make([]error, 300)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			if i%10 == 9 {
				ctx = canceled
			}
			results[i] = db.inTx(ctx, func(tx *Tx) error {
				if _, err := tx.ExecContext(ctx, `INSERT INTO orgs (id, name, created_at) VALUES (?, ?, 0)`,
					fmt.Sprint(i), fmt.Sprintf("org-%d", i)); err != nil {
					return err
				}
				if i%3 == 0 {
					return errUndo // after writing
				}
				return nil
			})
		}()
	}
	wg.Wait()
	for i, err := range results {
		var n int
		is.NoErr(db.read.QueryRowContext(context.Background(), `SELECT count(*) FROM orgs WHERE id = ?`, fmt.Sprint(i)).Scan(&n))
		switch {
		case i%10 == 9:
			is.True(errors.Is(err, context.Canceled))
			is.Equal(n, 0)
		case i%3 == 0:
			is.True(errors.Is(err, errUndo))
			is.Equal(n, 0) // its insert was undone
		default:
			is.NoErr(err)
			is.Equal(n, 1)
		}
	}
}

func TestClosedDatabaseRefusesWrites(t *testing.T) {
	is := is.New(t)
	db := openInternal(t)
	is.NoErr(db.Close())
	err := db.inTx(context.Background(), func(tx *Tx) error { return nil })
	is.True(errors.Is(err, errClosed))
}

// TestAPanicInATransactionIsItsError: the writer goroutine runs every caller's
// transaction; a panic in one must fail that one, not the process.
func TestAPanicInATransactionIsItsError(t *testing.T) {
	is := is.New(t)
	db := openInternal(t)
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = db.inTx(context.Background(), func(tx *Tx) error {
				if _, err := tx.ExecContext(context.Background(), `INSERT INTO orgs (id, name, created_at) VALUES (?, ?, 0)`,
					fmt.Sprint(i), fmt.Sprintf("org-%d", i)); err != nil {
					return err
				}
				if i%5 == 0 {
					var m map[string]int
					m["boom"]++ // a nil map: panics
				}
				return nil
			})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		var n int
		is.NoErr(db.read.QueryRowContext(context.Background(), `SELECT count(*) FROM orgs WHERE id = ?`, fmt.Sprint(i)).Scan(&n))
		if i%5 == 0 {
			is.True(err != nil && strings.Contains(err.Error(), "panicked"))
			is.Equal(n, 0) // undone
		} else {
			is.NoErr(err)
			is.Equal(n, 1)
		}
	}
}
