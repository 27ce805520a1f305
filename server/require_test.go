package server_test

import (
	"os"
	"testing"

	"enrichd/store/storetest"
)

// The storage tests put the database on a small tmpfs, or make its file immutable:
// both take root, and skip without it. Where a variable below is 1 (.ci/run sets both
// when it runs as root) such a skip is a failure, so that these tests cannot stop
// running unseen.
const (
	envRequireMount  = "ENRICHD_REQUIRE_MOUNT"
	envRequireChattr = "ENRICHD_REQUIRE_CHATTR"
)

// mountTmpfs is storetest.MountTmpfs, required to work where ENRICHD_REQUIRE_MOUNT=1.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	failSkip(t, envRequireMount, "mounting a tmpfs")
	return storetest.MountTmpfs(t, size)
}

// chattr is storetest.Chattr, required to work where ENRICHD_REQUIRE_CHATTR=1.
func chattr(t *testing.T, flag string, paths ...string) {
	t.Helper()
	if flag == "+i" {
		failSkip(t, envRequireChattr, "making a file immutable (chattr +i)")
	}
	storetest.Chattr(t, flag, paths...)
}

// failSkip turns a skip of this test into a failure when the variable env is 1.
func failSkip(t *testing.T, env, what string) {
	t.Helper()
	if os.Getenv(env) != "1" {
		return
	}
	t.Cleanup(func() {
		if t.Skipped() {
			t.Errorf("the test skipped (see above) where %s was to work: %s=1 requires it", what, env)
		}
	})
}
