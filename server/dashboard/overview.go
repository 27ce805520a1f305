package dashboard

import (
	"net/http"
	"sort"
	"strconv"
	"time"

	"enrichd/store"
)

// chartDays is how far back the overview's spending chart reaches.
const chartDays = 30

// recentFailures is how many of the latest failed tasks the overview groups by code.
const recentFailures = 100

// failureCount is one error code among the latest failures.
type failureCount struct {
	Code    string
	Count   int
	Last    time.Time
	Message string // the latest one's, which says what to do
	TaskID  string
}

// tickHalfWidth is half the width of the widest day label ("Nov 30") at the chart's
// largest type: 20 units, what a phone's layout draws it at (see style.css).
const tickHalfWidth = 42

// spendChart is the overview's bar chart of credits spent per day, laid out here so the
// template only draws it: an SVG that needs no script and scales to any width.
type spendChart struct {
	Width, Height, Top, Bottom float64
	Bars                       []chartBar
	Max                        int64
	Total                      int64
	Ticks                      []chartTick
}

type chartBar struct {
	X, Y, W, H float64
	Title      string
}

type chartTick struct {
	X     float64
	Label string
}

func newSpendChart(days []store.CreditDay) spendChart {
	c := spendChart{Width: 720, Height: 180, Top: 16, Bottom: 24}
	for _, d := range days {
		c.Max = max(c.Max, spent(d))
		c.Total += spent(d)
	}
	if len(days) == 0 {
		return c
	}
	left := 36.0
	slot := (c.Width - left) / float64(len(days))
	plot := c.Height - c.Top - c.Bottom
	for i, d := range days {
		h := 0.0
		if c.Max > 0 {
			h = plot * float64(spent(d)) / float64(c.Max)
		}
		if spent(d) > 0 {
			h = max(h, 1) // a day with any spending shows
		}
		x := left + float64(i)*slot
		c.Bars = append(c.Bars, chartBar{X: x + 1, Y: c.Top + plot - h, W: max(slot-2, 1), H: h,
			Title: d.Day.UTC().Format("Mon Jan 2") + ": " + strconv.FormatInt(spent(d), 10) + " credits spent"})
		// A label a week, counted back from today's, so that no two labels meet; the
		// last, centred on the last bar, is kept from running off the right edge.
		if (len(days)-1-i)%7 == 0 {
			c.Ticks = append(c.Ticks, chartTick{X: min(x+slot/2, c.Width-tickHalfWidth), Label: d.Day.UTC().Format("Jan 2")})
		}
	}
	return c
}

// spent is what a day cost: charges less what was refunded.
func spent(d store.CreditDay) int64 { return max(d.Charged-d.Refunded, 0) }

func handleOverview(s *Dashboard) http.Handler {
	type data struct {
		Balance          store.Balance
		Grants           []store.Grant
		Chart            spendChart
		Queued, Running  int64
		Succeeded        int64
		Failed, Canceled int64
		Failures         []failureCount
		Start            []startStep
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := dashUser(r)
		ctx := r.Context()
		var d data
		var err error
		if d.Balance, err = s.db.CreditBalance(ctx, u.OrgName); err != nil {
			s.dashError(w, r, err)
			return
		}
		if d.Grants, err = s.db.ListGrants(ctx, u.OrgID); err != nil {
			s.dashError(w, r, err)
			return
		}
		days, err := s.db.DailyCredits(ctx, u.OrgID, chartDays, s.db.Now())
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		d.Chart = newSpendChart(days)
		for _, c := range []struct {
			status string
			n      *int64
		}{{store.StatusQueued, &d.Queued}, {store.StatusRunning, &d.Running}, {store.StatusSucceeded, &d.Succeeded},
			{store.StatusFailed, &d.Failed}, {store.StatusCanceled, &d.Canceled}} {
			if *c.n, err = s.db.CountTasks(ctx, u.OrgID, c.status); err != nil {
				s.dashError(w, r, err)
				return
			}
		}
		failed, _, err := s.db.FindTasks(ctx, u.OrgID, store.TaskFilter{Status: store.StatusFailed, Limit: recentFailures})
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		d.Failures = countFailures(failed)
		if d.Start, err = s.gettingStarted(ctx, u, d.Balance.Balance); err != nil {
			s.dashError(w, r, err)
			return
		}
		s.render(w, r, http.StatusOK, "overview", view{Title: "Overview", Section: "overview", Notice: notice(r), Data: d})
	})
}

// countFailures groups failed tasks, newest first, by error code: the codes seen most
// often first, each with its latest message.
func countFailures(tasks []*store.Task) []failureCount {
	byCode := map[string]*failureCount{}
	var out []*failureCount
	for _, t := range tasks {
		code, msg := "unknown", ""
		if t.Error != nil {
			code, msg = t.Error.Code, t.Error.Message
		}
		f, ok := byCode[code]
		if !ok {
			f = &failureCount{Code: code, Message: msg, TaskID: t.ID, Last: t.CreatedAt}
			if t.FinishedAt != nil {
				f.Last = *t.FinishedAt
			}
			byCode[code] = f
			out = append(out, f)
		}
		f.Count++
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Count > out[j].Count })
	res := make([]failureCount, len(out))
	for i, f := range out {
		res[i] = *f
	}
	return res
}
