package store

import (
	"errors"
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
