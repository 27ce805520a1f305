package watch_test

import (
	"fmt"
	"testing"
	"time"

	"enrichd/watch"

	"github.com/matryer/is"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestFirstRunIsSpreadOverTheHour(t *testing.T) {
	is := is.New(t)
	now := at("2026-03-10T12:00:00Z")
	perMinute := map[int]int{}
	for i := range 1000 {
		id := fmt.Sprintf("0197a000-0000-7000-8000-%012d", i)
		first := watch.FirstRun(id, now)
		is.True(!first.Before(now))
		is.True(first.Before(now.Add(time.Hour)))
		is.Equal(first, watch.FirstRun(id, now)) // the same id, the same offset
		perMinute[int(first.Sub(now)/time.Minute)]++
	}
	// 1,000 watches over 60 minutes: about 17 a minute; never a thundering herd.
	is.True(len(perMinute) == 60)
	for minute, n := range perMinute {
		if n > 50 {
			t.Errorf("minute %d has %d of 1000 first runs", minute, n)
		}
	}
}

func TestNextRun(t *testing.T) {
	cases := []struct {
		name      string
		prevDue   string
		everyDays int
		now       string
		want      string
	}{
		{"on time: one interval on", "2026-03-01T08:15:00Z", 30, "2026-03-01T08:15:05Z", "2026-03-31T08:15:00Z"},
		{"a late run keeps its slot", "2026-03-01T08:15:00Z", 7, "2026-03-02T20:00:00Z", "2026-03-08T08:15:00Z"},
		{"catch-up without backlog: stopped three months", "2026-01-01T08:15:00Z", 7, "2026-04-01T00:00:00Z", "2026-04-02T08:15:00Z"},
		{"catch-up landing exactly on now moves one more", "2026-01-01T00:00:00Z", 10, "2026-01-21T00:00:00Z", "2026-01-31T00:00:00Z"},
		{"across the year end", "2026-12-20T06:00:00Z", 30, "2026-12-20T06:00:01Z", "2027-01-19T06:00:00Z"},
		{"across a leap day", "2028-02-15T00:00:00Z", 30, "2028-02-15T00:00:01Z", "2028-03-16T00:00:00Z"},
		{"across February in a common year", "2027-02-15T00:00:00Z", 30, "2027-02-15T00:00:01Z", "2027-03-17T00:00:00Z"},
		{"a year's watch", "2026-05-05T05:05:05Z", 365, "2026-05-05T05:05:06Z", "2027-05-05T05:05:05Z"},
		{"every_days below 1 counts as 1", "2026-05-05T00:00:00Z", 0, "2026-05-05T00:00:01Z", "2026-05-06T00:00:00Z"},
		{"a due time in another zone is read in UTC", "2026-05-05T02:00:00+02:00", 7, "2026-05-05T00:00:01Z", "2026-05-12T00:00:00Z"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			got := watch.NextRun(at(c.prevDue), c.everyDays, at(c.now))
			is.Equal(got.Format(time.RFC3339Nano), c.want)
			is.True(got.After(at(c.now)))
		})
	}
}

func TestNextMonth(t *testing.T) {
	cases := []struct{ now, month string }{
		{"2026-03-10T12:00:00Z", "2026-04-01T00:00:00Z"},
		{"2026-12-31T23:59:59.999Z", "2027-01-01T00:00:00Z"},
		{"2028-02-29T10:00:00Z", "2028-03-01T00:00:00Z"},
		{"2026-01-31T10:00:00Z", "2026-02-01T00:00:00Z"},
		{"2026-04-30T23:30:00-02:00", "2026-06-01T00:00:00Z"}, // 01:30 UTC on May 1st
	}
	for _, c := range cases {
		t.Run(c.now, func(t *testing.T) {
			is := is.New(t)
			month := at(c.month)
			for i := range 50 {
				id := fmt.Sprintf("watch-%d", i)
				got := watch.NextMonth(id, at(c.now))
				is.True(!got.Before(month))
				is.True(got.Before(month.Add(24 * time.Hour)))
				is.Equal(got.Location(), time.UTC)
			}
		})
	}
	// Spread over the day, not stacked at midnight.
	is := is.New(t)
	hours := map[int]bool{}
	for i := range 500 {
		hours[watch.NextMonth(fmt.Sprintf("watch-%d", i), at("2026-03-10T12:00:00Z")).Hour()] = true
	}
	is.Equal(len(hours), 24)
}

func TestMonthStart(t *testing.T) {
	cases := []struct{ now, want string }{
		{"2026-03-10T12:00:00Z", "2026-03-01T00:00:00Z"},
		{"2026-03-01T00:00:00Z", "2026-03-01T00:00:00Z"},
		{"2026-02-28T23:59:59.999Z", "2026-02-01T00:00:00Z"},
		{"2028-02-29T12:00:00Z", "2028-02-01T00:00:00Z"},
		{"2027-01-01T00:30:00+01:00", "2026-12-01T00:00:00Z"}, // still December in UTC
	}
	for _, c := range cases {
		is.New(t).Equal(watch.MonthStart(at(c.now)).Format(time.RFC3339Nano), c.want)
	}
}
