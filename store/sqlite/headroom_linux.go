package sqlite

import (
	"math"
	"os"
	"path/filepath"
	"syscall"
)

// statfs is the file system's report, a variable so that tests can stand in for file
// systems that report oddly.
var statfs = syscall.Statfs

// freeBytes is the space left to this process's writes on the file system holding
// path. A file system that reports no size at all (a FUSE file system that does not
// implement statfs reports zeros) says nothing about its free space: reading its
// zero free blocks as a full disk would refuse every write for good.
func freeBytes(path string) (int64, bool) {
	var st syscall.Statfs_t
	if err := statfs(filepath.Dir(path), &st); err != nil || st.Blocks == 0 || st.Bsize <= 0 {
		return 0, false
	}
	avail := st.Bavail
	if os.Geteuid() == 0 {
		// The blocks reserved for root (5% of an ext4 file system by default) are
		// this process's to write.
		avail = st.Bfree
	}
	// Some file systems report all ones for "unlimited": that much room, not a product
	// that overflows to a negative amount.
	if bsize := uint64(st.Bsize); avail > math.MaxInt64/bsize {
		return math.MaxInt64, true
	}
	return int64(avail) * int64(st.Bsize), true
}
