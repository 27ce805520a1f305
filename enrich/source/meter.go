package source

import (
	"sync"
	"time"

	"enrichd/enrich"
)

// meter counts the upstream requests of one source. Errors are requests that did not
// get an answer the source could use: transport failures, 5xx, 429, refused keys. A
// 404 is an answer ("not known"), not an error.
type meter struct {
	mu        sync.Mutex
	calls     int64
	errors    int64
	lastErr   string
	lastErrAt time.Time
}

func (m *meter) call() {
	m.mu.Lock()
	m.calls++
	m.mu.Unlock()
}

func (m *meter) fail(msg string) {
	m.mu.Lock()
	m.errors++
	m.lastErr, m.lastErrAt = msg, time.Now().UTC().Truncate(time.Millisecond)
	m.mu.Unlock()
}

func (m *meter) stats(name string) enrich.SourceStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := enrich.SourceStats{Name: name, Calls: enrich.Ptr(m.calls), Errors: enrich.Ptr(m.errors)}
	if m.lastErr != "" {
		s.LastError, s.LastErrorAt = enrich.Ptr(m.lastErr), enrich.Ptr(m.lastErrAt)
	}
	return s
}
