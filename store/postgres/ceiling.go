package postgres

import (
	"context"

	"enrichd/store"
)

// WriteAlone is Write: each write transaction commits on its own here.
func (db *DB) WriteAlone(ctx context.Context, fn func(store.Tx) error) error {
	return db.Write(ctx, fn)
}
