//go:build !linux

package sqlite

// freeBytes reports that the free space is not known here: checkHeadroom then leaves
// a full disk to SQLite's own SQLITE_FULL.
func freeBytes(string) (int64, bool) { return 0, false }
