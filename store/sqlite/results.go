package sqlite

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"modernc.org/sqlite"
)

// resultColumn is the task's result, as it was stored, in a column list of tasks.
const resultColumn = `(SELECT data FROM task_results WHERE task_results.id = tasks.result_id)`

func init() {
	// Migration 8 moves the results already stored into task_results, keyed by the same
	// hash keepResult gives them; SQLite has no sha256 of its own.
	sqlite.MustRegisterDeterministicScalarFunction("sha256", 1, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		var b []byte
		switch v := args[0].(type) {
		case nil:
			return nil, nil
		case string:
			b = []byte(v)
		case []byte:
			b = v
		default:
			return nil, fmt.Errorf("sha256 takes text or a blob, not %T", v)
		}
		sum := sha256.Sum256(b)
		return sum[:], nil
	})
}

// keepResult returns the id of the task_results row holding data, adding it if no task
// has had the same bytes yet. The task that points at it is counted by a trigger.
func keepResult(ctx context.Context, tx *Tx, data []byte) (int64, error) {
	sum := sha256.Sum256(data)
	var id int64
	// Most results are already there (every store hit on a company shares one): a read
	// of the hash's index finds them without writing the row.
	err := tx.QueryRowContext(ctx, `SELECT id FROM task_results WHERE hash = ?`, sum[:]).Scan(&id)
	if !errors.Is(err, sql.ErrNoRows) {
		return id, err
	}
	err = tx.QueryRowContext(ctx, `INSERT INTO task_results (hash, refs, data) VALUES (?, 0, ?) RETURNING id`,
		sum[:], string(data)).Scan(&id)
	return id, err
}
