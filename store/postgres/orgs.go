package postgres

import (
	"sync"
	"sync/atomic"
	"time"
)

// keyTouches are the writes of keys' last use under way. They run beside the request
// that authenticated: a read-only request must not wait for a write, and a failed write
// costs nothing but a stale "last used".
type keyTouches struct {
	mu       sync.Mutex
	inFlight map[string]bool // by key id: many requests at the minute's turn make one write
	// written is the last use written, by key id: a request that read the key just
	// before that write committed has nothing to write.
	written map[string]time.Time
	closed  bool // Close has begun: no new write may start
	wg      sync.WaitGroup
	started atomic.Int64 // writes started since Open, for tests
}
