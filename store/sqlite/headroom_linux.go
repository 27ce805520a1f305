package sqlite

import (
	"path/filepath"
	"syscall"
)

// statfs is the file system's report, a variable so that tests can stand in for file
// systems that report oddly.
var statfs = syscall.Statfs

// freeBytes is the space left to an unprivileged writer on the file system holding
// path. A file system that reports no size at all (a FUSE file system that does not
// implement statfs reports zeros) says nothing about its free space: reading its
// zero free blocks as a full disk would refuse every write for good.
func freeBytes(path string) (int64, bool) {
	var st syscall.Statfs_t
	if err := statfs(filepath.Dir(path), &st); err != nil || st.Blocks == 0 || st.Bsize <= 0 {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}
