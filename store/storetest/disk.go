package storetest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The storage tests put the database on a small tmpfs, or make its file immutable:
// both take root, and skip without it. Where a variable below is 1 (.ci/run sets both
// when it runs as root) such a refusal fails the test instead, so that these tests
// cannot stop running unseen.
const (
	RequireMount  = "ENRICHD_REQUIRE_MOUNT"
	RequireChattr = "ENRICHD_REQUIRE_CHATTR"
)

// MountTmpfs mounts a tmpfs of the given size ("8m") on a new directory and unmounts
// it when the test ends, after everything the test registers later (a database on it)
// is closed. It skips the test where mounting is refused: it takes root
// (CAP_SYS_ADMIN).
func MountTmpfs(t testing.TB, size string) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput()
	if err != nil {
		why := fmt.Sprintf("this test puts the database on a small tmpfs and fills it; mounting one was refused here (it takes root): %v: %s",
			err, strings.TrimSpace(string(out)))
		if os.Getenv(RequireMount) == "1" {
			t.Fatalf("%s; %s=1 requires it", why, RequireMount)
		}
		t.Skip(why)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// FillDisk writes a file in dir until the file system holding dir has not one byte
// left, and returns its path: removing it frees the space again.
func FillDisk(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for size := len(chunk); size > 0; {
		_, err := f.Write(chunk[:size])
		switch {
		case errors.Is(err, syscall.ENOSPC):
			size /= 2 // then smaller writes, down to a single byte
		case err != nil:
			t.Fatalf("filling %s: %v", dir, err)
		}
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Bavail != 0 {
		t.Fatalf("%s still has %d blocks free after filling it", dir, st.Bavail)
	}
	return path
}

// Chattr sets ("+i") or clears ("-i") the immutable flag of files: not even root can
// write an immutable file, through descriptors already open too. Setting it skips the
// test where it is refused: it takes CAP_LINUX_IMMUTABLE (root has it) and a file
// system that keeps the flag (ext4, xfs, btrfs, tmpfs). A flag set is cleared when the
// test ends, or its temporary directory could not be removed.
func Chattr(t testing.TB, flag string, paths ...string) {
	t.Helper()
	out, err := exec.Command("chattr", append([]string{flag}, paths...)...).CombinedOutput()
	if err != nil {
		if flag == "+i" {
			why := fmt.Sprintf("this test makes the database file read-only with chattr +i; that was refused here (it takes root): %v: %s",
				err, strings.TrimSpace(string(out)))
			if os.Getenv(RequireChattr) == "1" {
				t.Fatalf("%s; %s=1 requires it", why, RequireChattr)
			}
			t.Skip(why)
		}
		t.Fatalf("chattr %s: %v: %s", flag, err, out)
	}
	if flag == "+i" {
		t.Cleanup(func() { exec.Command("chattr", append([]string{"-i"}, paths...)...).Run() })
	}
}
