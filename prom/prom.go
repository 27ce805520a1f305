// Package prom is what package server and package worker count with on one
// Prometheus metrics set (VictoriaMetrics'): histograms with the cumulative "le"
// buckets Prometheus computes quantiles from, and labels rendered once.
package prom

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Labels renders name, value pairs as {name="value",...}.
func Labels(pairs []string) string {
	if len(pairs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i+1 < len(pairs); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%s", pairs[i], strconv.Quote(pairs[i+1]))
	}
	b.WriteByte('}')
	return b.String()
}

// Histograms is a family of Prometheus histograms with cumulative "le" buckets, one
// per label set. The library's own histogram exposes "vmrange" buckets, which
// Prometheus cannot compute quantiles from.
type Histograms struct {
	name   string
	bounds []float64
	mu     sync.Mutex
	by     map[string]*histogram // by rendered labels
}

type histogram struct {
	counts []uint64 // per bucket, the last one past every bound; not cumulative
	sum    float64
}

// NewHistograms is the family name of histograms with the buckets bounds.
func NewHistograms(name string, bounds []float64) *Histograms {
	return &Histograms{name: name, bounds: bounds, by: map[string]*histogram{}}
}

// Observe adds v to the histogram of the labels, name, value pairs.
func (h *Histograms) Observe(v float64, labels ...string) {
	h.ObserveLabeled(v, Labels(labels))
}

// ObserveLabeled is Observe with the labels already rendered by Labels.
func (h *Histograms) ObserveLabeled(v float64, key string) {
	i := sort.SearchFloat64s(h.bounds, v) // the first bound >= v
	h.mu.Lock()
	defer h.mu.Unlock()
	one := h.by[key]
	if one == nil {
		one = &histogram{counts: make([]uint64, len(h.bounds)+1)}
		h.by[key] = one
	}
	one.counts[i]++
	one.sum += v
}

// Write writes the family in the Prometheus text format (metrics.Set's
// RegisterMetricsWriter).
func (h *Histograms) Write(w io.Writer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	keys := make([]string, 0, len(h.by))
	for k := range h.by {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		one := h.by[key]
		inner := strings.TrimSuffix(strings.TrimPrefix(key, "{"), "}")
		if inner != "" {
			inner += ","
		}
		var cum uint64
		for i, c := range one.counts {
			cum += c
			le := "+Inf"
			if i < len(h.bounds) {
				le = strconv.FormatFloat(h.bounds[i], 'g', -1, 64)
			}
			fmt.Fprintf(w, "%s_bucket{%sle=%q} %d\n", h.name, inner, le, cum)
		}
		fmt.Fprintf(w, "%s_sum%s %s\n", h.name, key, strconv.FormatFloat(one.sum, 'g', -1, 64))
		fmt.Fprintf(w, "%s_count%s %d\n", h.name, key, cum)
	}
}
