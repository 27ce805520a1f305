package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
)

func TestEnrichProgress(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var plain strings.Builder
	p := newProgress(&plain, 250) // not a terminal: a line every 2 rows and the last
	clock := p.start
	p.now = func() time.Time { return clock }
	for i := range 250 {
		clock = clock.Add(100 * time.Millisecond) // 10 rows a second
		p.done(1, i%10 != 0)
	}
	p.finish()
	out := lines(plain.String())
	is.Equal(len(out), 125)
	is.Equal(out[0], "enriched 2/250 rows (1 failed), 10.0 rows/s, about 25s left")
	is.Equal(out[len(out)-1], "enriched 250/250 rows (25 failed), 10.0 rows/s")

	var bar strings.Builder
	p = newProgress(&bar, 4)
	p.tty = true // as on a terminal: one line redrawn in place
	clock = p.start
	p.now = func() time.Time { return clock }
	p.done(0, true) // no time has passed: no rate yet
	clock = clock.Add(4 * time.Second)
	p.done(2, true)
	clock = clock.Add(time.Second)
	p.done(2, false)
	p.finish()
	is.Equal(bar.String(), "\r[..............................] 0/4 rows, 0 failed "+
		"\r[###############...............] 2/4 rows, 0 failed, 0.5 rows/s, about 4s left "+
		"\r[##############################] 4/4 rows, 2 failed, 0.8 rows/s \n")
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
