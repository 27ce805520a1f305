package sqlite

import (
	"context"
	"time"

	"enrichd/store"
)

func init() {
	store.Register("sqlite", func(ctx context.Context, path, schema string, now func() time.Time, o store.Options) (store.Driver, error) {
		return Open(ctx, path, schema, now, store.WithCacheSize(o.CacheMiB), store.WithReaders(o.Readers))
	})
}

var _ store.Driver = (*DB)(nil)
