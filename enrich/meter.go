package enrich

import (
	"sync"
	"time"
)

// SourceStats is what an operator sees of one source: how many requests it sent
// upstream (what the upstream bills and rate-limits), how many failed, and the last
// failure. Calls and Errors are nil for a source that calls nothing upstream.
type SourceStats struct {
	Name        string     `json:"name"`
	Calls       *int64     `json:"calls"`
	Errors      *int64     `json:"errors"`
	LastError   *string    `json:"last_error"`
	LastErrorAt *time.Time `json:"last_error_at"`
}

// Metered is a Source that counts its upstream requests.
type Metered interface {
	Stats() SourceStats
}

// StatsOf returns the counters of src, or its name alone when it keeps none.
func StatsOf(src Source) SourceStats {
	if m, ok := src.(Metered); ok {
		return m.Stats()
	}
	return SourceStats{Name: src.Name()}
}

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

func (m *meter) stats(name string) SourceStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := SourceStats{Name: name, Calls: Ptr(m.calls), Errors: Ptr(m.errors)}
	if m.lastErr != "" {
		s.LastError, s.LastErrorAt = Ptr(m.lastErr), Ptr(m.lastErrAt)
	}
	return s
}
