package store_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"enrichd/store"

	"github.com/matryer/is"
)

// A disk that flaps (a probe that fits, then writes that do not) is logged once per
// StorageLogInterval, with the count of the failures in between.
func TestStorageFailuresAreLoggedOncePerInterval(t *testing.T) {
	is := is.New(t)
	var logs strings.Builder
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	var h store.Health
	h.Init(func() time.Time { return now }, func(context.Context) error { return nil })
	h.SetLogger(slog.New(slog.NewTextHandler(&logs, nil)))
	full := errors.New("disk full")
	lines := func(msg string) int { return strings.Count(logs.String(), msg) }

	for range 50 {
		h.Failed(full)
		h.Failed(full)
		is.True(h.StorageFailing())
		h.Recovered()
		is.True(!h.StorageFailing())
		now = now.Add(time.Second)
	}
	is.Equal(lines("cannot take writes"), 1) // the first failure
	is.Equal(lines("takes writes again"), 1) // the end of the run that was logged
	is.True(strings.Contains(logs.String(), "failures=1 "))
	is.Equal(h.StorageFailures(), uint64(100))

	now = now.Add(store.StorageLogInterval)
	h.Failed(full)
	is.Equal(lines("cannot take writes"), 2)
	is.True(strings.Contains(logs.String(), "failures=99 ")) // the 98 in between, and this one
}

// Probes are shared: callers within ProbeEvery of the last probe get its result, and
// a probe that commits ends a run of failures.
func TestProbesAreShared(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	var h store.Health
	probes := 0
	fail := errors.New("read-only")
	h.Init(time.Now, func(context.Context) error {
		probes++
		if probes == 1 {
			h.Failed(fail)
			return fail
		}
		return nil
	})
	h.SetLogger(slog.New(slog.DiscardHandler))
	is.True(h.Writable(ctx)) // nothing failed: no probe
	is.Equal(probes, 0)

	is.True(errors.Is(h.CheckWritable(ctx), fail))
	is.True(errors.Is(h.CheckWritable(ctx), fail)) // the same probe's result
	is.True(!h.Writable(ctx))
	is.Equal(probes, 1)
	is.True(h.StorageFailing())

	h.ForgetProbe()
	is.NoErr(h.CheckWritable(ctx))
	is.Equal(probes, 2)
	is.True(!h.StorageFailing())
	is.True(h.Writable(ctx))
}
