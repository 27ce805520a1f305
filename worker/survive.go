package worker

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"enrichd/enrich"
)

// restartPause is how long a background loop that panicked waits before it starts
// again, so a panic on every round does not spin.
const restartPause = time.Second

// internalError is how a task whose enrichment panicked fails.
func internalError() *enrich.TaskError {
	return &enrich.TaskError{Code: enrich.CodeInternalError,
		Message: "the enrichment failed on our side (an internal error, logged with the task's id); the task was refunded"}
}

// runSafely runs fn, a task's enrichment (the pipeline and the sources, code that
// must not take the process down), and reports the TaskError the task fails with
// when fn panicked: the panic is logged once, with its stack and the task's id.
func (s *Pool) runSafely(taskID string, fn func()) (failed *enrich.TaskError) {
	defer func() {
		if v := recover(); v != nil {
			s.panicked("task", v, "task", taskID)
			failed = internalError()
		}
	}()
	fn()
	return nil
}

// keepRunning runs loop until ctx ends. A panic that escapes it is logged once, with
// its stack, and loop starts again after restartPause: one bad round stops neither
// the loop for good nor the process.
func (s *Pool) keepRunning(ctx context.Context, what string, loop func(context.Context)) {
	for {
		ok := func() (ok bool) {
			defer func() {
				if v := recover(); v != nil {
					s.panicked(what, v)
				}
			}()
			loop(ctx)
			return true
		}()
		if ok || ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(restartPause):
		}
	}
}

// panicked logs a recovered panic with its stack, and counts it.
func (s *Pool) panicked(where string, v any, attrs ...any) {
	s.metrics.counter("enrichd_panics_total", "in", where).Inc()
	s.log.Error("recovered from a panic in "+where, append(attrs, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))...)
}
