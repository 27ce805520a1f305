package server

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"enrichd/enrich"
	"enrichd/prom"
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
	requestDuration *prom.Histograms
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
var requestBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// newServerMetrics keeps the server's metrics in set (Config.Metrics, which serve
// shares with the background work), or in a set of its own when set is nil.
func newServerMetrics(set *metrics.Set) *serverMetrics {
	if set == nil {
		set = metrics.NewSet()
	}
	m := &serverMetrics{
		set:             set,
		requestDuration: prom.NewHistograms("enrichd_http_request_duration_seconds", requestBuckets),
	}
	m.set.RegisterMetricsWriter(m.requestDuration.Write)
	return m
}

func (m *serverMetrics) counter(name string, labels ...string) *metrics.Counter {
	return m.set.GetOrCreateCounter(name + prom.Labels(labels))
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
			labels:   prom.Labels([]string{"route", route}),
		})
	}
	r := rm.(*requestMetrics)
	r.requests.Inc()
	m.requestDuration.ObserveLabeled(took.Seconds(), r.labels)
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
