package cli

import (
	"testing"
	"time"

	"github.com/matryer/is"
)

func TestRetainFlag(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var d days
	for in, want := range map[string]time.Duration{"90d": 90 * 24 * time.Hour, "0": 0, "36h": 36 * time.Hour, "1d": 24 * time.Hour} {
		is.NoErr(d.Set(in))
		is.Equal(time.Duration(d), want)
	}
	is.NoErr(d.Set("2d"))
	is.Equal(d.String(), "2d") // shown in days when it is whole days
	is.NoErr(d.Set("36h"))
	is.Equal(d.String(), "36h0m0s")
	for _, bad := range []string{"-1d", "ninety", "9x", "-5h"} {
		is.True(d.Set(bad) != nil)
	}
}
