package server

import (
	"testing"
	"time"

	"github.com/matryer/is"
	"golang.org/x/time/rate"
)

// With n replicas alive each lets a key through at 1/n of its limit, so that the key's
// requests spread over them meet the limit as a whole; a bucket already in use takes
// the new share at once.
func TestLimiterEnforcesItsShareOfTheLimit(t *testing.T) {
	is := is.New(t)
	allowed := func(l *limiter, key string) int {
		n := 0
		for range 20 {
			if _, ok := l.allow(key); ok {
				n++
			}
		}
		return n
	}
	l := newLimiter(Rate{Limit: rate.Every(time.Hour), Burst: 6})
	is.Equal(allowed(l, "alone"), 6) // one replica: the whole burst

	is.Equal(l.setShare(3), 1)
	is.Equal(allowed(l, "new"), 2) // a third of the burst on each of three replicas

	l2 := newLimiter(Rate{Limit: rate.Every(time.Hour), Burst: 6})
	_, ok := l2.allow("used")
	is.True(ok)
	l2.setShare(2)
	is.Equal(allowed(l2, "used"), 3) // the bucket in use holds no more than the new burst

	is.Equal(l.setShare(0), 3) // a count below one is one
	is.Equal(allowed(l, "back"), 6)
}
