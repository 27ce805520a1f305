package worker

import (
	"time"

	"enrichd/prom"
	"enrichd/store"

	"github.com/VictoriaMetrics/metrics"
)

// workerMetrics are the background's Prometheus metrics, kept in the set serve shares
// with the server (Config.Metrics), whose /metrics writes them.
type workerMetrics struct {
	set      *metrics.Set
	claimLag *prom.Histograms
}

var claimLagBuckets = []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600}

func newWorkerMetrics(set *metrics.Set) *workerMetrics {
	m := &workerMetrics{set: set, claimLag: prom.NewHistograms("enrichd_task_claim_lag_seconds", claimLagBuckets)}
	set.RegisterMetricsWriter(m.claimLag.Write)
	return m
}

func (m *workerMetrics) counter(name string, labels ...string) *metrics.Counter {
	return m.set.GetOrCreateCounter(name + prom.Labels(labels))
}

// created counts a task that was created and charged (not an idempotent replay), as
// the server counts those the API makes.
func (m *workerMetrics) created(t *store.Task) {
	m.counter("enrichd_tasks_created_total", "object_type", t.ObjectType).Inc()
	m.counter("enrichd_credits_charged_total").AddInt64(t.CreditsCharged)
	if t.Settled() {
		m.settled(t.ObjectType, t.Status, t.CreditsCharged)
	}
}

// settled counts a task reaching a final status; a failed or canceled one was refunded.
func (m *workerMetrics) settled(objectType, status string, credits int64) {
	m.counter("enrichd_tasks_settled_total", "object_type", objectType, "status", status).Inc()
	if status != store.StatusSucceeded {
		m.counter("enrichd_credits_refunded_total").AddInt64(credits)
	}
}

func (m *workerMetrics) claimed(c *store.Claim, now time.Time) {
	m.claimLag.Observe(max(0, now.Sub(c.QueuedAt).Seconds()), "object_type", c.Input.Lookup.ObjectType())
}

// recorded counts delivery attempts and the deliveries they finished.
func (m *workerMetrics) recorded(batch []store.Attempted) {
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
