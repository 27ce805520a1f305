package server

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/VictoriaMetrics/metrics"
)

// serverMetrics are one Server's Prometheus metrics. Each Server has its own set, so
// servers in one process (parallel tests) count apart; process-wide Go and process
// metrics are added when the set is written.
//
// Counters move at the transitions they count (a task created, settled; credits
// charged, refunded; a delivery attempted), never from a scan. Queue depth and the
// sources' counters are read when scraped.
type serverMetrics struct {
	set             *metrics.Set
	requestDuration *histograms
	claimLag        *histograms
	// byRoute holds each route and status's counter and histogram labels: rendering
	// and looking them up by name on every request was a tenth of a task read's CPU.
	byRoute sync.Map // routeStatus -> *requestMetrics
}

type routeStatus struct {
	route  string
	status int
}

type requestMetrics struct {
	requests *metrics.Counter
	labels   string // the duration histogram's
}

// Latency buckets, in seconds: a stored answer takes a millisecond, a lookup through
// a vendor seconds.
var (
	requestBuckets  = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	claimLagBuckets = []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600}
)

func newServerMetrics() *serverMetrics {
	m := &serverMetrics{
		set:             metrics.NewSet(),
		requestDuration: newHistograms("enrichd_http_request_duration_seconds", requestBuckets),
		claimLag:        newHistograms("enrichd_task_claim_lag_seconds", claimLagBuckets),
	}
	m.set.RegisterMetricsWriter(m.requestDuration.write)
	m.set.RegisterMetricsWriter(m.claimLag.write)
	return m
}

func (m *serverMetrics) counter(name string, labels ...string) *metrics.Counter {
	return m.set.GetOrCreateCounter(name + labelString(labels))
}

// labelString renders name, value pairs as {name="value",...}.
func labelString(pairs []string) string {
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

func (m *serverMetrics) request(route string, status int, took time.Duration) {
	if route == "" {
		route = "unknown"
	}
	key := routeStatus{route, status}
	rm, ok := m.byRoute.Load(key)
	if !ok {
		rm, _ = m.byRoute.LoadOrStore(key, &requestMetrics{
			requests: m.counter("enrichd_http_requests_total", "route", route, "status", strconv.Itoa(status)),
			labels:   labelString([]string{"route", route}),
		})
	}
	r := rm.(*requestMetrics)
	r.requests.Inc()
	m.requestDuration.observeLabeled(took.Seconds(), r.labels)
}

// created counts a task that was created and charged (not an idempotent replay).
func (m *serverMetrics) created(t *store.Task) {
	m.counter("enrichd_tasks_created_total", "object_type", t.ObjectType).Inc()
	m.counter("enrichd_credits_charged_total").AddInt64(t.CreditsCharged)
	if t.Settled() {
		m.settled(t.ObjectType, t.Status, t.CreditsCharged)
	}
}

// settled counts a task reaching a final status; a failed or canceled one was refunded.
func (m *serverMetrics) settled(objectType, status string, credits int64) {
	m.counter("enrichd_tasks_settled_total", "object_type", objectType, "status", status).Inc()
	if status != store.StatusSucceeded {
		m.counter("enrichd_credits_refunded_total").AddInt64(credits)
	}
}

func (m *serverMetrics) claimed(c *store.Claim, now time.Time) {
	m.claimLag.observe(max(0, now.Sub(c.QueuedAt).Seconds()), "object_type", c.Input.Lookup.ObjectType())
}

// recorded counts delivery attempts and the deliveries they finished.
func (m *serverMetrics) recorded(batch []store.Attempted) {
	for _, a := range batch {
		if a.Attempt == nil {
			continue // cut short by a shutdown: not an attempt
		}
		if a.Attempt.NotSent {
			// Its destination was disabled: no request, yet the delivery is finished.
			m.counter("enrichd_webhook_deliveries_total", "result", store.DeliveryFailed).Inc()
			continue
		}
		result := "error"
		if a.Attempt.Err == "" {
			result = "ok"
		}
		m.counter("enrichd_webhook_attempts_total", "result", result).Inc()
		// A 410 Gone finishes its delivery as failed at once, like the last attempt.
		if status, _ := a.Attempt.Outcome(a.Dispatch); status != store.DeliveryPending {
			m.counter("enrichd_webhook_deliveries_total", "result", status).Inc()
		}
	}
}

// handleMetrics writes the Prometheus text format. Queue depth is counted now, from
// the indexes of unsettled tasks; the sources' counters are the ones GET /v1/status
// shows.
func handleMetrics(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := s.metrics
		queued, running, err := s.db.QueueDepth(r.Context())
		if err != nil {
			s.error(w, r, err)
			return
		}
		m.set.GetOrCreateGauge(`enrichd_queue_depth{state="queued"}`, nil).Set(float64(queued))
		m.set.GetOrCreateGauge(`enrichd_queue_depth{state="running"}`, nil).Set(float64(running))
		failing, disabled, err := s.db.LoopTrouble(r.Context())
		if err != nil {
			s.error(w, r, err)
			return
		}
		m.set.GetOrCreateGauge(`enrichd_loops_failing`, nil).Set(float64(failing))
		m.set.GetOrCreateGauge(`enrichd_loops_destination_disabled`, nil).Set(float64(disabled))
		s.storageMetrics()
		s.listenersMu.Lock()
		open := 0
		for _, l := range s.listeners {
			open += l.Open()
		}
		s.listenersMu.Unlock()
		m.set.GetOrCreateGauge("enrichd_http_connections_open", nil).Set(float64(open))
		for _, src := range s.cfg.Sources {
			st := enrich.StatsOf(src)
			if st.Calls == nil {
				continue // asks nothing upstream
			}
			m.counter("enrichd_source_calls_total", "source", st.Name).Set(uint64(*st.Calls))
			m.counter("enrichd_source_errors_total", "source", st.Name).Set(uint64(*st.Errors))
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		m.set.WritePrometheus(w)
		metrics.WriteProcessMetrics(w)
	})
}

// histograms is a family of Prometheus histograms with cumulative "le" buckets, one
// per label set. The library's own histogram exposes "vmrange" buckets, which
// Prometheus cannot compute quantiles from.
type histograms struct {
	name   string
	bounds []float64
	mu     sync.Mutex
	by     map[string]*histogram // by rendered labels
}

type histogram struct {
	counts []uint64 // per bucket, the last one past every bound; not cumulative
	sum    float64
}

func newHistograms(name string, bounds []float64) *histograms {
	return &histograms{name: name, bounds: bounds, by: map[string]*histogram{}}
}

func (h *histograms) observe(v float64, labels ...string) {
	h.observeLabeled(v, labelString(labels))
}

// observeLabeled is observe with the labels already rendered by labelString.
func (h *histograms) observeLabeled(v float64, key string) {
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

func (h *histograms) write(w io.Writer) {
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
