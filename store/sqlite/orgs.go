package sqlite

import (
	"enrichd/store"
)

// KeyTouches are the writes of keys' last use under way, on the writer.
func (db *DB) KeyTouches() *store.KeyTouches { return &db.touches }

// KeyCache is the keys this process has read. One process writes the file at a time,
// so what it keeps goes stale only by its own revocations, which empty it, or by
// another process's commit, which watchForeignWrites notices and empties it for.
func (db *DB) KeyCache() *store.KeyCache { return &db.keys }

// SuppressionCache is the suppressions this process has read, per organization, kept
// and emptied as the keys are.
func (db *DB) SuppressionCache() *store.SuppressionCache { return &db.suppressed }
