package store

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// ProbeEvery is how often, at most, a probe write is made: callers that ask again
// within it share the last probe's result, whether it committed or failed.
const ProbeEvery = time.Second

// Health is what a driver knows of its database's ability to take writes; drivers
// embed it, so its methods are theirs. A write the database cannot take (which errors
// those are is the driver's to say) is recorded with Failed, and from then on
// StorageFailing is true until a write commits again (Recovered), so readiness,
// workers and the webhook sender stop short of the database instead of failing
// against it. Failures are logged once per StorageLogInterval with a count, not one
// line a write: a disk that is full for hours, or one that flaps between a probe that
// fits and writes that do not, makes one ERROR line a minute.
//
// CheckWritable and Writable make probe writes through the function the driver gives
// Init: what a probe writes is the engine's; how often it runs and who shares its
// result is the same everywhere.
type Health struct {
	now   func() time.Time
	write func(context.Context) error

	failing  atomic.Bool
	failures atomic.Uint64 // writes refused for storage since Open
	log      atomic.Pointer[slog.Logger]

	mu         sync.Mutex
	since      time.Time // the first failure of the current run of failures
	announced  bool      // whether a line was logged during the current run
	unreported uint64    // failures not yet in a log line
	reported   time.Time // when the last failure line was written

	probeMu sync.Mutex
	probe   *writeProbe // the last CheckWritable, under way or done
}

// Init gives h the clock of its log lines and the probe write: probe commits one
// write that readers never see and returns its error, having recorded (Failed) a
// storage fault itself. Call it before any other method.
func (h *Health) Init(now func() time.Time, probe func(context.Context) error) {
	h.now, h.write = now, probe
}

// SetLogger sets where storage failures are reported; slog.Default() until then.
func (h *Health) SetLogger(l *slog.Logger) { h.log.Store(l) }

// Logger is where storage failures are reported.
func (h *Health) Logger() *slog.Logger {
	if l := h.log.Load(); l != nil {
		return l
	}
	return slog.Default()
}

// StorageFailing reports whether a write failed for storage and no write (a probe or
// any other that changed a row) has committed since.
func (h *Health) StorageFailing() bool { return h.failing.Load() }

// StorageFailures counts the writes refused for storage since Open (probes included).
func (h *Health) StorageFailures() uint64 { return h.failures.Load() }

// Failed records a write refused for storage, and logs it at most once per
// StorageLogInterval with the count since the last line.
func (h *Health) Failed(err error) {
	h.failures.Add(1)
	now := h.now()
	h.mu.Lock()
	if !h.failing.Swap(true) {
		h.since, h.announced = now, false
	}
	h.unreported++
	var n uint64
	if h.reported.IsZero() || now.Sub(h.reported) >= StorageLogInterval {
		n, h.unreported, h.reported, h.announced = h.unreported, 0, now, true
	}
	since := h.since
	h.mu.Unlock()
	if n > 0 {
		h.Logger().Error("the database cannot take writes: writes are answered storage_unavailable",
			"failures", n, "failing_since", since.UTC().Format(time.RFC3339), "err", err.Error())
	}
}

// Recovered records a write that changed rows and committed (a probe or any other):
// the end of a run of failures, logged once if the run's start was. A commit that
// wrote nothing proves nothing, and is not reported.
func (h *Health) Recovered() {
	if !h.failing.Load() {
		return
	}
	h.mu.Lock()
	if !h.failing.Swap(false) {
		h.mu.Unlock()
		return
	}
	n, since, announced := h.unreported, h.since, h.announced
	if announced {
		h.unreported = 0
	}
	h.mu.Unlock()
	if announced {
		h.Logger().Info("the database takes writes again", "failures_unreported", n,
			"failing_for", h.now().Sub(since).Round(time.Millisecond).String())
	}
}

// Writable reports whether the database takes writes, cheaply: true while no write
// has failed for storage; otherwise it makes a probe write (CheckWritable, at most one
// every ProbeEvery across callers) and reports whether it committed. Workers ask it
// before claiming work, so they wait instead of failing against a full disk.
func (h *Health) Writable(ctx context.Context) bool {
	if !h.StorageFailing() {
		return true
	}
	return h.CheckWritable(ctx) == nil
}

// CheckWritable proves the database takes writes by committing one (the driver's
// probe). A probe that commits ends a run of storage failures.
//
// Probes are shared: one runs at a time, and callers within ProbeEvery of the last
// one get its result, committed or failed, so workers waiting for the disk, or a
// flood of unauthenticated /readyz requests, cost at most one small write a second
// however many they are. A write may wait on a lock no context interrupts (SQLite's
// busy timeout, a row another transaction holds), so the probe runs on its own and
// callers wait for it only as long as their context lets them.
func (h *Health) CheckWritable(ctx context.Context) error {
	h.probeMu.Lock()
	p := h.probe
	// A probe that committed is not reused once a write has failed for storage since.
	if p == nil || (p.finished() && (time.Since(p.ended) >= ProbeEvery || p.err == nil && h.StorageFailures() != p.failures)) {
		p = &writeProbe{done: make(chan struct{})}
		h.probe = p
		go func() {
			err := h.write(context.Background())
			if err == nil {
				h.Recovered()
			}
			p.err, p.ended, p.failures = err, time.Now(), h.StorageFailures()
			close(p.done)
		}()
	}
	h.probeMu.Unlock()
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Errorf("the database does not take writes: %w", p.err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the database write could not be made in time (a lock held by a long transaction?): %w", ctx.Err())
	}
}

// ForgetProbe drops the last probe's result, so that the next CheckWritable makes a
// new one whenever the last was made: for tests, which do not wait out ProbeEvery.
func (h *Health) ForgetProbe() {
	h.probeMu.Lock()
	h.probe = nil
	h.probeMu.Unlock()
}

// writeProbe is one CheckWritable, under way or done.
type writeProbe struct {
	done     chan struct{}
	err      error     // once done
	ended    time.Time // once done
	failures uint64    // StorageFailures once done
}

func (p *writeProbe) finished() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
