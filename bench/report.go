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
			ceiling, unit, ratio = thousands(res.Ceiling), res.CeilingUnit, fmt.Sprintf("%.0f%%", 100*res.Ratio)
		}
		rate := thousands(res.Rate)
		if res.Unit == "s" {
			rate = fmt.Sprintf("%.2f", res.Rate)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f ms\t%.1f ms\t%s\t%s\t%s\t%d\t\n", res.Scenario, rate, res.Unit, res.P50ms, res.P99ms, ceiling, unit, ratio, res.Errors)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, res := range r.Results {
		fmt.Fprintf(w, "%s: %s\n", res.Scenario, res.Note)
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
