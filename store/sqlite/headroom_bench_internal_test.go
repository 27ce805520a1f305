package sqlite

import (
	"path/filepath"
	"testing"
)

// The headroom check runs once per group commit of the writer: a statfs and a stat.
func BenchmarkCheckHeadroom(b *testing.B) {
	db := &DB{path: filepath.Join(b.TempDir(), "h.db")}
	for b.Loop() {
		db.checkHeadroom()
	}
}
