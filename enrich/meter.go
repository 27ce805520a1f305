package enrich

import (
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
