//go:build linux

package sqlite

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/matryer/is"
)

// A file system that reports no size (a FUSE one without statfs reports zeros) does
// not stop writes: its free space is unknown, not nil. One that reports a full disk
// does.
func TestHeadroomOnAFileSystemThatReportsNoSize(t *testing.T) {
	is := is.New(t)
	db := &DB{path: filepath.Join(t.TempDir(), "h.db")} // all checkHeadroom reads

	report := syscall.Statfs_t{Bsize: 512}
	defer func(real func(string, *syscall.Statfs_t) error) { statfs = real }(statfs)
	statfs = func(_ string, st *syscall.Statfs_t) error { *st = report; return nil }
	is.NoErr(db.checkHeadroom()) // no size reported: not checked

	report = syscall.Statfs_t{Bsize: 4096, Blocks: 1 << 20, Bfree: 2, Bavail: 0}
	is.True(db.checkHeadroom() != nil) // a full disk: refused
}
