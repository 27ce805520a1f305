package sqlite

import (
	"crypto/sha256"
	"database/sql/driver"
	"fmt"

	"modernc.org/sqlite"
)

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
