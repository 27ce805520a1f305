package sqlite

import (
	"context"
)

// SingleWriter is true: one writer runs every write transaction here.
func (db *DB) SingleWriter() bool { return true }

// IndexedBy names the index: a schema that could no longer serve the query makes it
// fail ("no query solution") instead of scanning the table.
func (db *DB) IndexedBy(table, index string) string { return table + ` INDEXED BY ` + index }

// LockOrgs locks nothing: the single writer orders the enqueues and the claims.
func (e txExec) LockOrgs(ctx context.Context, orgIDs ...string) error { return nil }

// NotifyQueued does nothing: the workers share the process, and the server wakes them.
func (e txExec) NotifyQueued(ctx context.Context) error { return nil }
