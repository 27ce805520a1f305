package store

import (
	"encoding/json"
	"slices"
	"time"

	"enrichd/enrich"
	"enrichd/watch"
)

// WatchSettled is what a settled watch task t changes on its watch w, decided the same
// way on every engine; the driver applies it in the transaction that settles the task.
// fetched says the result was read from the source just now (Outcome.Fetched): a
// stored record served because the source failed is no new reading, and changes
// nothing.
//
//   - A fresh result resets the not_found streak. The first one sets the baseline and
//     sends nothing. A later one is compared with the baseline on the watched fields
//     (watch.Diff) and becomes the baseline: with changes it sends person.job_changed
//     when a person's current employer changed, else record.changed; without, it sends
//     record.unchanged only when the watch asks for it.
//   - A not_found failure adds to the streak; the second in a row pauses the watch
//     with paused_reason "not_found": its target is gone, and every run would be charged.
//   - Anything else (another failure, a cancel) changes nothing.
func WatchSettled(w *Watch, t *Task, fetched bool) WatchUpdate {
	u := WatchUpdate{NotFoundStreak: w.NotFoundStreak}
	switch {
	case t.Status == StatusSucceeded && fetched && len(t.Data) > 0:
		u.NotFoundStreak = 0
		u.Baseline = t.Data
		if len(w.Baseline) == 0 {
			return u
		}
		changes, err := watch.Diff(w.ObjectType, w.Baseline, t.Data, w.Fields)
		if err != nil {
			// A baseline that cannot be read (written by hand, or by a version that kept
			// another shape) is replaced: the next run compares with this result.
			return u
		}
		var payload []byte
		event := EventRecordUnchanged
		switch {
		case len(changes) > 0 && w.ObjectType == enrich.ObjectPerson && (len(w.Fields) == 0 || slices.Contains(w.Fields, "positions")):
			// A job change is news only to a watch of the positions it is read from.
			if from, to, moved := watch.JobChanged(w.Baseline, t.Data); moved {
				event = EventJobChanged
				payload, err = JobChangedPayload(w, t, changes, from, to)
				break
			}
			fallthrough
		case len(changes) > 0:
			event = EventRecordChanged
			payload, err = WatchEventPayload(event, w, t, changes)
		case w.NotifyUnchanged:
			payload, err = WatchEventPayload(event, w, t, changes)
		default:
			return u
		}
		if err == nil { // the watch and the task always encode: they were read from the store
			u.Events = append(u.Events, WatchEvent{Event: event, Payload: payload})
		}
	case t.Status == StatusFailed && t.Error != nil && t.Error.Code == enrich.CodeNotFound:
		u.NotFoundStreak = w.NotFoundStreak + 1
		if u.NotFoundStreak >= 2 {
			reason := PausedNotFound
			u.PausedReason = &reason
		}
	}
	return u
}

// watchEventBody is the body of record.changed and record.unchanged.
type watchEventBody struct {
	Event   string          `json:"event"`
	Watch   *Watch          `json:"watch"`
	Task    *Task           `json:"task"`
	Changes []watch.Change  `json:"changes"`
	Data    json.RawMessage `json:"data"`
}

// jobChangedBody is the body of person.job_changed: a record.changed body with the
// employer the person left (from) and the one they joined (to), either null.
type jobChangedBody struct {
	Event   string          `json:"event"`
	Watch   *Watch          `json:"watch"`
	Task    *Task           `json:"task"`
	Changes []watch.Change  `json:"changes"`
	From    *watch.Employer `json:"from"`
	To      *watch.Employer `json:"to"`
	Data    json.RawMessage `json:"data"`
}

// WatchEventPayload is the body of a watch's record.changed or record.unchanged event:
// {event, watch, task, changes, data}, data the new result.
func WatchEventPayload(event string, w *Watch, t *Task, changes []watch.Change) ([]byte, error) {
	return json.Marshal(watchEventBody{Event: event, Watch: w, Task: t, Changes: nonNil(changes), Data: dataOf(t)})
}

// JobChangedPayload is the body of a watch's person.job_changed event: {event, watch,
// task, changes, from, to, data}.
func JobChangedPayload(w *Watch, t *Task, changes []watch.Change, from, to *watch.Employer) ([]byte, error) {
	return json.Marshal(jobChangedBody{Event: EventJobChanged, Watch: w, Task: t, Changes: nonNil(changes),
		From: from, To: to, Data: dataOf(t)})
}

func nonNil(changes []watch.Change) []watch.Change {
	if changes == nil {
		return []watch.Change{}
	}
	return changes
}

func dataOf(t *Task) json.RawMessage {
	if len(t.Data) == 0 {
		return json.RawMessage("null")
	}
	return t.Data
}

// CheckNewWatch refuses a watch no engine may store, whatever the API checked before:
// an object type its input does not give, every_days out of bounds, too many fields,
// no Loop. Each message names the field.
func CheckNewWatch(nw NewWatch) error {
	if nw.ObjectType != enrich.ObjectCompany && nw.ObjectType != enrich.ObjectPerson {
		return enrich.Errorf(enrich.KindInvalid, "object_type must be company or person")
	}
	if nw.Input.Lookup.ObjectType() != nw.ObjectType || nw.Input.Target == "" {
		return enrich.Errorf(enrich.KindInvalid, "the input does not name a %s to watch", nw.ObjectType)
	}
	if nw.LoopID == "" {
		return enrich.Errorf(enrich.KindInvalid, "loop_id is required: the Loop is where a watch sends what changed")
	}
	if err := CheckEveryDays(nw.EveryDays); err != nil {
		return err
	}
	return CheckWatchFields(nw.ObjectType, nw.Fields)
}

// CheckWatchFields refuses a list of fields a watch cannot compare: one that is not a
// top-level field of objectType's result (watch.KnownFields), a field named twice, or
// more than MaxWatchFields.
func CheckWatchFields(objectType string, fields []string) error {
	if len(fields) > MaxWatchFields {
		return enrich.Errorf(enrich.KindInvalid, "fields names %d fields; name at most %d, or leave it out to compare every field",
			len(fields), MaxWatchFields)
	}
	known := watch.KnownFields(objectType)
	for i, f := range fields {
		if !slices.Contains(known, f) {
			return enrich.Errorf(enrich.KindInvalid, "fields: %q is not a field of a %s record; the fields are %v", clipField(f), objectType, known)
		}
		if slices.Contains(fields[:i], f) {
			return enrich.Errorf(enrich.KindInvalid, "fields names %q twice", f)
		}
	}
	return nil
}

func clipField(f string) string {
	if len(f) > 60 {
		return f[:60] + "..."
	}
	return f
}

// CheckEveryDays refuses a number of days between two checks out of
// MinWatchDays..MaxWatchDays.
func CheckEveryDays(n int) error {
	if n < MinWatchDays || n > MaxWatchDays {
		return enrich.Errorf(enrich.KindInvalid, "every_days must be an integer from %d to %d (the days between two checks), not %d",
			MinWatchDays, MaxWatchDays, n)
	}
	return nil
}

// CheckWatchPatch refuses a patch that sets every_days out of bounds or empties
// loop_id; its fields are checked against the watch's object type where it is read
// (CheckWatchFields).
func CheckWatchPatch(p WatchPatch) error {
	if p.LoopID != nil && *p.LoopID == "" {
		return enrich.Errorf(enrich.KindInvalid, "loop_id cannot be empty: a watch needs a Loop")
	}
	if p.EveryDays != nil {
		return CheckEveryDays(*p.EveryDays)
	}
	return nil
}

// CheckWatchCap refuses a negative monthly cap; 0 holds every scheduled run.
func CheckWatchCap(limit *int64) error {
	if limit != nil && *limit < 0 {
		return enrich.Errorf(enrich.KindInvalid, "the monthly cap must be 0 or more credits")
	}
	return nil
}

// WatchPage is the page and page size a filter asks for, within bounds: the first
// page of DefaultWatchPage when unset, at most MaxWatchPage a page.
func WatchPage(f WatchFilter) (page, size int) {
	page, size = max(f.Page, 0), f.PageSize
	switch {
	case size <= 0:
		size = DefaultWatchPage
	case size > MaxWatchPage:
		size = MaxWatchPage
	}
	return page, size
}

// ApplyWatchPatch changes w as p says, once the driver has checked the Loop and the
// fields p names. Enabling clears why the watch paused and its not_found streak. A
// watch that cannot run (disabled or paused) has no next run; one that can runs at
// p.NextRunAt when the caller planned it, else keeps its next run, else is due now.
func ApplyWatchPatch(w *Watch, p WatchPatch, now time.Time) {
	if p.LoopID != nil {
		w.LoopID = *p.LoopID
	}
	if p.EveryDays != nil {
		w.EveryDays = *p.EveryDays
	}
	if p.Fields != nil {
		w.Fields = *p.Fields
	}
	if p.NotifyUnchanged != nil {
		w.NotifyUnchanged = *p.NotifyUnchanged
	}
	if p.Enabled != nil {
		w.Enabled = *p.Enabled
		if w.Enabled {
			w.PausedReason, w.NotFoundStreak = nil, 0
		}
	}
	switch {
	case !w.Enabled || w.PausedReason != nil:
		w.NextRunAt = nil
	case p.NextRunAt != nil:
		next := p.NextRunAt.UTC().Truncate(time.Millisecond)
		w.NextRunAt = &next
	case w.NextRunAt == nil:
		w.NextRunAt = &now
	}
	w.UpdatedAt = now
}
