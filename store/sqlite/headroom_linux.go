package sqlite

import (
	"path/filepath"
	"syscall"
)

// freeBytes is the space left to an unprivileged writer on the file system holding
// path.
func freeBytes(path string) (int64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(path), &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}
