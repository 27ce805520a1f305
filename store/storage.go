package store

import (
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"enrichd/enrich"
)

// CodeStorageUnavailable is the API code of a write refused because the database
// cannot take writes.
const CodeStorageUnavailable = "storage_unavailable"

// StorageRetryAfter is the Retry-After, in seconds, of a storage_unavailable answer.
const StorageRetryAfter = 5

// StorageLogInterval is how often a storage failure that goes on is logged again.
const StorageLogInterval = time.Minute

// IsStorageFault reports whether err is a write refused because the database cannot
// take writes (storage_unavailable). The store logs those once a minute with a count,
// so callers that would log every failure leave them out.
func IsStorageFault(err error) bool {
	var e *enrich.Error
	return errors.As(err, &e) && e.Code == CodeStorageUnavailable
}

// WriteChecked is the error the caller of a write transaction sees for err, its
// outcome: a storage fault, which fault says on each engine, becomes
// storage_unavailable and is recorded (Failed); anything else is returned as it is.
func (h *Health) WriteChecked(err error, fault func(error) bool) error {
	if err == nil || !fault(err) {
		return err
	}
	h.Failed(err)
	return StorageUnavailable()
}

// ReadChecked is the error a read's caller sees for err: storage_unavailable (503,
// retry) for a database that cannot serve it, which fault says on each engine, rather
// than an internal error. Unlike a write's, it is not recorded (Health.Failed): a read
// does not count as a write refused.
func ReadChecked(err error, fault func(error) bool) error {
	if err == nil || !fault(err) {
		return err
	}
	return StorageUnavailable()
}

// Guarded turns a panic in fn into its error, which rolls its transaction back: fn
// is a caller's, run by a driver on a connection or writer that other callers share,
// where a panic would end the process and every transaction with it.
func Guarded[T any](fn func(T) error) func(T) error {
	return func(tx T) (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("a database transaction panicked: %v\n%s", p, debug.Stack())
			}
		}()
		return fn(tx)
	}
}
