package postgres

import (
	"context"
	"time"

	"enrichd/store"
)

// The driver for postgres:// and postgresql:// URLs. Its connection pool is sized by
// the URL's pool_max_conns (DefaultPoolSize without it); SQLite's page cache and
// readers options do not apply, and its schema text neither: the migrations are
// this package's own (schema.sql).
func init() {
	store.Register("postgres", func(ctx context.Context, dsn, _ string, now func() time.Time, _ store.Options) (store.Driver, error) {
		db, err := Open(ctx, dsn, now)
		if err != nil {
			return nil, err
		}
		return db, nil
	})
}

var _ store.Driver = (*DB)(nil)
