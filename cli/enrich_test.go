package cli

import (
	"strings"
	"testing"

	"github.com/matryer/is"
)

func TestEnrichProgress(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var plain strings.Builder
	p := newProgress(&plain, 250) // not a terminal: a line every 2 rows and the last
	for i := range 250 {
		p.done(1, i%10 != 0)
	}
	p.finish()
	out := lines(plain.String())
	is.Equal(len(out), 125)
	is.Equal(out[len(out)-1], "enriched 250/250 rows (25 failed)")

	var bar strings.Builder
	p = newProgress(&bar, 4)
	p.tty = true // as on a terminal: one line redrawn in place
	p.done(2, true)
	p.done(2, false)
	p.finish()
	is.Equal(bar.String(), "\r[###############...............] 2/4 rows, 0 failed "+
		"\r[##############################] 4/4 rows, 2 failed \n")
}

// lines splits output into its non-empty lines.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}
