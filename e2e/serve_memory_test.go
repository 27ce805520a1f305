package e2e

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// TestServeRefusesABadMemoryBudget checks that --cache-size and --readers out of their
// bounds stop serve with an error naming the flag, before any database is created.
func TestServeRefusesABadMemoryBudget(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--cache-size", "0"}, "--cache-size must be from 1 to 65536 (MiB), not 0"},
		{[]string{"--cache-size", "65537"}, "--cache-size must be from 1 to 65536 (MiB), not 65537"},
		{[]string{"--readers", "0"}, "--readers must be from 1 to 64, not 0"},
		{[]string{"--readers", "65"}, "--readers must be from 1 to 64, not 65"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			db := newDBPath(t)
			msg := runServeExpectError(t, append([]string{"serve", "--db", db, "--addr", "127.0.0.1:0"}, tt.args...)...)
			contains(t, msg, tt.want)
			if _, err := os.Stat(db); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a refused serve left %s behind (%v)", db, err)
			}
		})
	}
}

// TestServeTakesTheCacheSizeFromTheEnvironment gives ENRICHD_CACHE_SIZE a bad value:
// the error names the flag it stands for.
func TestServeTakesTheCacheSizeFromTheEnvironment(t *testing.T) {
	t.Setenv("ENRICHD_CACHE_SIZE", "0")
	msg := runServeExpectError(t, "serve", "--db", newDBPath(t), "--addr", "127.0.0.1:0")
	contains(t, msg, "--cache-size must be from 1")
}

// TestServeProfilesOnTheAdminAddress runs serve with a memory budget and an admin
// listener: Go's profiles are served there, and not on the API's address.
func TestServeProfilesOnTheAdminAddress(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	logs, done := startServe(t, ctx, "--db", newDB(t), "--cache-size", "8", "--readers", "3", "--admin-addr", "127.0.0.1:0")
	defer func() { cancel(); <-done }()
	get := func(url string) (int, string) {
		res, err := http.Get(url)
		is.NoErr(err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		is.NoErr(err)
		return res.StatusCode, string(body)
	}
	status, body := get(logField(t, logs, "enrichd listening", "admin_addr") + "/debug/pprof/heap?debug=1")
	is.Equal(status, http.StatusOK)
	is.True(strings.HasPrefix(body, "heap profile: "))
	status, _ = get(logField(t, logs, "enrichd listening", "addr") + "/debug/pprof/heap?debug=1")
	is.Equal(status, http.StatusNotFound)
	status, _ = get(logField(t, logs, "enrichd listening", "addr") + "/debug/pprof/")
	is.Equal(status, http.StatusNotFound)
}

func TestServeHelpShowsTheMemoryBudget(t *testing.T) {
	t.Parallel()
	help := mustCLI(t, "serve", "--help")
	contains(t, help, "--cache-size int")
	contains(t, help, "(default 32)")
	contains(t, help, "--readers int")
}
