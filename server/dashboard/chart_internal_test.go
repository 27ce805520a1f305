package dashboard

import (
	"testing"
	"time"

	"enrichd/store"
)

// TestSpendChartLabels checks the chart's day labels: today's is there, the others a
// week apart so that none overlaps the next, and every one inside the chart.
func TestSpendChartLabels(t *testing.T) {
	for _, n := range []int{1, 7, 8, 30} {
		var days []store.CreditDay
		start := time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC)
		for i := range n {
			days = append(days, store.CreditDay{Day: start.AddDate(0, 0, i), Charged: int64(i)})
		}
		c := newSpendChart(days)
		if len(c.Ticks) == 0 || c.Ticks[len(c.Ticks)-1].Label != days[n-1].Day.Format("Jan 2") {
			t.Fatalf("%d days: labels %+v, want the last day's last", n, c.Ticks)
		}
		slot := (c.Width - 36) / float64(n)
		for i, tick := range c.Ticks {
			if tick.X-tickHalfWidth < 0 || tick.X+tickHalfWidth > c.Width {
				t.Errorf("%d days: label %q at %.1f runs off the chart", n, tick.Label, tick.X)
			}
			if i > 0 && tick.X-c.Ticks[i-1].X < min(7*slot, 2*tickHalfWidth) {
				t.Errorf("%d days: labels %q and %q overlap", n, c.Ticks[i-1].Label, tick.Label)
			}
		}
	}
}
