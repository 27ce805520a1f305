//go:build linux

package sqlite

import (
	"os"
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

// The blocks a file system reserves for root (5% of an ext4 one by default) are free
// space to a service that runs as root: SQLite writes into them, and refusing writes
// there would stop the service with gigabytes left on a large disk.
func TestHeadroomCountsTheBlocksReservedForRootWhenRoot(t *testing.T) {
	is := is.New(t)
	db := &DB{path: filepath.Join(t.TempDir(), "h.db")}
	defer func(real func(string, *syscall.Statfs_t) error) { statfs = real }(statfs)
	statfs = func(_ string, st *syscall.Statfs_t) error {
		*st = syscall.Statfs_t{Bsize: 4096, Blocks: 1 << 20, Bfree: 50 << 10, Bavail: 0}
		return nil
	}
	if os.Geteuid() == 0 {
		is.NoErr(db.checkHeadroom())
	} else {
		is.True(db.checkHeadroom() != nil)
	}
}

// A file system that reports more free blocks than an int64 of bytes holds (some
// network and FUSE ones report all ones for "unlimited") has room, not a negative
// amount of it.
func TestHeadroomOnAFileSystemThatReportsUnlimitedSpace(t *testing.T) {
	is := is.New(t)
	db := &DB{path: filepath.Join(t.TempDir(), "h.db")}
	defer func(real func(string, *syscall.Statfs_t) error) { statfs = real }(statfs)
	statfs = func(_ string, st *syscall.Statfs_t) error {
		*st = syscall.Statfs_t{Bsize: 4096, Blocks: ^uint64(0), Bfree: ^uint64(0), Bavail: ^uint64(0)}
		return nil
	}
	is.NoErr(db.checkHeadroom())
}
