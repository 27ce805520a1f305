package dashboard

import (
	"net/http"
	"strconv"
	"time"

	"enrichd/server"
	"enrichd/store"
)

// sourceCard is one source on the Sources page: GET /v1/sources' figures for the
// signed-in organization, and a chart of its vendor credits per day of the month.
type sourceCard struct {
	server.SourceReport
	Position int
	Asks     int64  // hits, misses, errors, and those unknown or under way
	USDText  string // the month in USD, "$1.20", where a credit's price is set
	Chart    spendChart
}

// newCreditsChart lays out a source's vendor credits per day, from the month's first
// day to today, as the overview's chart of credits spent.
func newCreditsChart(days []server.SourceDay, month, today time.Time) spendChart {
	by := map[string]int64{}
	for _, d := range days {
		by[d.Day] = d.Credits
	}
	c := spendChart{Width: 720, Height: 152, Top: 28, Bottom: 24} // the top leaves room for the unit
	var n int
	for d := month; !d.After(today); d = d.AddDate(0, 0, 1) {
		n++
	}
	if n == 0 {
		return c
	}
	for d := month; !d.After(today); d = d.AddDate(0, 0, 1) {
		c.Max = max(c.Max, by[d.Format(time.DateOnly)])
		c.Total += by[d.Format(time.DateOnly)]
	}
	left := 36.0
	slot := (c.Width - left) / float64(n)
	plot := c.Height - c.Top - c.Bottom
	i := 0
	for d := month; !d.After(today); d = d.AddDate(0, 0, 1) {
		v := by[d.Format(time.DateOnly)]
		h := 0.0
		if c.Max > 0 {
			h = plot * float64(v) / float64(c.Max)
		}
		if v > 0 {
			h = max(h, 1)
		}
		x := left + float64(i)*slot
		c.Bars = append(c.Bars, chartBar{X: x + 1, Y: c.Top + plot - h, W: max(slot-2, 1), H: h,
			Title: d.Format("Mon Jan 2") + ": " + strconv.FormatInt(v, 10) + " vendor credits"})
		if (n-1-i)%7 == 0 {
			c.Ticks = append(c.Ticks, chartTick{X: min(x+slot/2, c.Width-tickHalfWidth), Label: d.Format("Jan 2")})
		}
		i++
	}
	return c
}

// sourcesPage is the Sources page: each source in the order it is asked, with this
// month's calls, hit rate and vendor credits and a chart per day, its budgets and
// what is left, and whose key it uses; then the fill lists the waterfall works to,
// which an admin changes there; then the organization's own vendor keys.
type sourcesPage struct {
	Month   string
	Sources []sourceCard
	Lists   []fillListView
	Keys    sourceKeysData
}

// renderSources writes the Sources page, with keys saying which key form to open
// again with its problem, if any.
func (s *Dashboard) renderSources(w http.ResponseWriter, r *http.Request, status int, notice string, keys sourceKeysData) {
	u := dashUser(r)
	rep, err := s.srv.Sources(r.Context(), u.OrgID)
	if err != nil {
		s.dashError(w, r, err)
		return
	}
	now := s.db.Now().UTC()
	month, today := store.MonthStart(now), store.DayStart(now)
	d := sourcesPage{Month: month.Format("January 2006"), Keys: keys}
	for i, src := range rep.Sources {
		card := sourceCard{SourceReport: src, Position: i + 1,
			Asks: src.Hits + src.Misses + src.Errors + src.Unknown + src.Pending, Chart: newCreditsChart(src.Days, month, today)}
		if src.USD != nil {
			card.USDText = "$" + strconv.FormatFloat(*src.USD, 'f', 2, 64)
		}
		d.Sources = append(d.Sources, card)
	}
	if d.Lists, err = s.fillLists(r); err != nil {
		s.dashError(w, r, err)
		return
	}
	if err := s.sourceKeys(r, &d.Keys); err != nil {
		s.dashError(w, r, err)
		return
	}
	s.render(w, r, status, "sources", view{Title: "Sources", Section: "sources", Notice: notice, Data: d})
}

func handleSourcesPage(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.renderSources(w, r, http.StatusOK, notice(r), sourceKeysData{})
	})
}

// handleOldSourcesSettings sends Settings → Sources' address, where the fill lists and
// the keys were before they joined the Sources page, there.
func handleOldSourcesSettings() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		to := "/dashboard/sources"
		if r.URL.RawQuery != "" {
			to += "?" + r.URL.RawQuery
		}
		http.Redirect(w, r, to, http.StatusMovedPermanently)
	})
}
