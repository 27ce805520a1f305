package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable prints the report as a table a person reads.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "enrichd bench, %s, %d CPUs, %s, concurrency %d, %s a scenario (one machine's figures)\n\n",
		r.Date.Format("2006-01-02 15:04 UTC"), r.CPUs, r.GoVersion, r.Concurrency, r.Duration)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\trate\t\tp50\tp99\tceiling\t\tratio\terrors\t")
	for _, res := range r.Results {
		ceiling, unit, ratio := "-", "", "-"
		if res.Ceiling > 0 {
			ceiling, unit, ratio = thousands(res.Ceiling), res.CeilingUnit, percent(res.Ratio)
		}
		rate := thousands(res.Rate)
		if res.Unit == "s" {
			rate = fmt.Sprintf("%.2f", res.Rate)
		}
		p50, p99 := "-", "-"
		if res.P50ms > 0 || res.P99ms > 0 { // storage measures no latency
			p50, p99 = fmt.Sprintf("%.1f ms", res.P50ms), fmt.Sprintf("%.1f ms", res.P99ms)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", res.Scenario, rate, res.Unit, p50, p99, ceiling, unit, ratio, res.Errors)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, res := range r.Results {
		if res.Note != "" {
			fmt.Fprintf(w, "%s: %s\n", res.Scenario, res.Note)
		}
	}
	if err := writePeers(w, r.Results); err != nil {
		return err
	}
	for _, res := range r.Results {
		if res.EmailQuality != nil {
			writeEmailQuality(w, res.EmailQuality)
		}
		if res.Waterfall != nil {
			writeWaterfall(w, res.Waterfall)
		}
		if res.Tail != nil {
			writeTail(w, res.Tail)
		}
	}
	return nil
}

func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// percent shows a ratio in percent, small ones (a share of the mix beside a whole
// ceiling) with a decimal so they do not read as nothing.
func percent(r float64) string {
	if r < 0.1 {
		return fmt.Sprintf("%.1f%%", 100*r)
	}
	return fmt.Sprintf("%.0f%%", 100*r)
}

// writePeers prints the peer scenario's rows side by side, each round's figures, and
// enrichd's rate over each peer's.
func writePeers(w io.Writer, results []Result) error {
	var rows []Result
	for _, res := range results {
		if res.Peer != nil {
			rows = append(rows, res)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\npeer: the same requests, load generator and clients against three servers in turn, %d rounds\n", len(rows[0].Peer.Rounds))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "request\tserver\treq/s\tp50\tp99\teach round: req/s, p99\tenrichd / server")
	enrichd := map[string]*Peer{} // by request
	for _, res := range rows {
		if res.Peer.Server == "enrichd" {
			enrichd[res.Peer.Request] = res.Peer
		}
	}
	for _, res := range rows {
		var each []string
		for _, r := range res.Peer.Rounds {
			each = append(each, fmt.Sprintf("%s, %.1f ms", thousands(r.Rate), r.P99ms))
		}
		vs := "-"
		if e := enrichd[res.Peer.Request]; e != nil {
			switch res.Peer.Server {
			case "naive":
				vs = fmt.Sprintf("%.2f×", e.EnrichdPerNaive)
			case "bare":
				vs = percent(e.EnrichdPerBare)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f ms\t%.1f ms\t%s\t%s\n", res.Peer.Request, res.Peer.Server, thousands(res.Rate),
			res.P50ms, res.P99ms, strings.Join(each, "; "), vs)
	}
	return tw.Flush()
}
