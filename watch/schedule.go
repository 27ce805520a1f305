package watch

import (
	"hash/fnv"
	"time"
)

// The schedule: when a watch is due. Every time is spread by a hash of the watch's id,
// so that a thousand watches imported at once, or capped until the same new month, do
// not all fall due in the same minute; the same id always lands at the same offset.

const day = 24 * time.Hour

// spread is the id's fixed offset within window, to the millisecond.
func spread(id string, window time.Duration) time.Duration {
	h := fnv.New64a()
	h.Write([]byte(id))
	return time.Duration(h.Sum64()%uint64(window/time.Millisecond)) * time.Millisecond
}

// FirstRun is when a new (or re-enabled) watch is first due: within the hour after
// now, at its id's offset. The baseline comes soon, and an import is spread over the
// hour.
func FirstRun(id string, now time.Time) time.Time {
	return now.UTC().Truncate(time.Millisecond).Add(spread(id, time.Hour))
}

// NextRun is when a watch last due at prevDue is due next: every_days after it, moved
// forward by whole intervals while that is not after now, so a service that was
// stopped for months runs each watch once on its return, not once per missed
// interval, and keeps the watch's offset within the day. everyDays below 1 counts as 1.
func NextRun(prevDue time.Time, everyDays int, now time.Time) time.Time {
	interval := time.Duration(max(everyDays, 1)) * day
	next := prevDue.UTC().Add(interval)
	if !next.After(now) {
		next = next.Add((now.Sub(next)/interval + 1) * interval)
	}
	return next
}

// NextMonth is where a watch held by its organization's monthly cap waits: the first
// day of the next UTC month, at its id's offset within that day.
func NextMonth(id string, now time.Time) time.Time {
	return MonthStart(now).AddDate(0, 1, 0).Add(spread(id, day))
}

// MonthStart is midnight UTC on the first day of now's UTC month: where the month's
// watch spend is counted from.
func MonthStart(now time.Time) time.Time {
	y, m, _ := now.UTC().Date()
	return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
}
