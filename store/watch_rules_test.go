package store_test

import (
	"encoding/json"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/matryer/is"
)

func TestWatchSettled(t *testing.T) {
	const (
		atAcme          = `{"full_name":"Jane","positions":[{"company_name":"Acme","company_network_url":"https://net/company/acme","title":"Engineer","is_current":true}]}`
		promoted        = `{"full_name":"Jane","positions":[{"company_name":"Acme","company_network_url":"https://net/company/acme","title":"Lead","is_current":true}]}`
		atGlobex        = `{"full_name":"Jane","positions":[{"company_name":"Globex","company_network_url":"https://net/company/globex","title":"CTO","is_current":true}]}`
		renamed         = `{"full_name":"Jane Smith","positions":[{"company_name":"Acme","company_network_url":"https://net/company/acme","title":"Engineer","is_current":true}]}`
		withBoardSeat   = `{"full_name":"Jane","positions":[{"company_name":"Acme","company_network_url":"https://net/company/acme","title":"Engineer","is_current":true},{"company_name":"Board Co","company_network_url":"https://net/company/board","title":"Advisor","start_date":"2026-05","is_current":true}]}`
		renamedAtGlobex = `{"full_name":"Jane Smith","positions":[{"company_name":"Globex","company_network_url":"https://net/company/globex","title":"CTO","is_current":true}]}`
	)
	succeeded := func(data string) *store.Task {
		return &store.Task{ID: "t1", ObjectType: enrich.ObjectPerson, Status: store.StatusSucceeded, Input: json.RawMessage(`{}`),
			Data: json.RawMessage(data)}
	}
	failed := func(code string) *store.Task {
		return &store.Task{ID: "t1", ObjectType: enrich.ObjectPerson, Status: store.StatusFailed, Input: json.RawMessage(`{}`),
			Error: &enrich.TaskError{Code: code, Message: "x"}}
	}
	paused := store.PausedNotFound
	cases := []struct {
		name            string
		baseline        string
		streak          int
		fields          []string
		notifyUnchanged bool
		task            *store.Task
		fetched         bool

		wantBaseline string // "" keeps the old one
		wantStreak   int
		wantPaused   *string
		wantEvents   []string
	}{
		{name: "the first run sets the baseline and sends nothing", task: succeeded(atAcme), fetched: true,
			wantBaseline: atAcme},
		{name: "the first run resets a streak", streak: 1, task: succeeded(atAcme), fetched: true,
			wantBaseline: atAcme},
		{name: "unchanged: the baseline is renewed, nothing sent", baseline: atAcme, task: succeeded(atAcme), fetched: true,
			wantBaseline: atAcme},
		{name: "unchanged with notify_unchanged: record.unchanged", baseline: atAcme, notifyUnchanged: true,
			task: succeeded(atAcme), fetched: true, wantBaseline: atAcme, wantEvents: []string{store.EventRecordUnchanged}},
		{name: "a new employer: person.job_changed", baseline: atAcme, task: succeeded(atGlobex), fetched: true,
			wantBaseline: atGlobex, wantEvents: []string{store.EventJobChanged}},
		{name: "a new title at the same employer: record.changed", baseline: atAcme, task: succeeded(promoted), fetched: true,
			wantBaseline: promoted, wantEvents: []string{store.EventRecordChanged}},
		{name: "a change outside the watched fields: nothing sent", baseline: atAcme, fields: []string{"positions"},
			task: succeeded(renamed), fetched: true, wantBaseline: renamed},
		{name: "a new employer outside the watched fields: nothing sent", baseline: atAcme, fields: []string{"full_name"},
			task: succeeded(atGlobex), fetched: true, wantBaseline: atGlobex},
		{name: "a further role while keeping the job: record.changed", baseline: atAcme, task: succeeded(withBoardSeat), fetched: true,
			wantBaseline: withBoardSeat, wantEvents: []string{store.EventRecordChanged}},
		{name: "a new employer with positions unwatched is no job change", baseline: atAcme, fields: []string{"full_name"},
			task: succeeded(renamedAtGlobex), fetched: true, wantBaseline: renamedAtGlobex, wantEvents: []string{store.EventRecordChanged}},
		{name: "a stored record served when the source failed changes nothing", baseline: atAcme, streak: 1,
			task: succeeded(atGlobex), fetched: false, wantStreak: 1},
		{name: "a first not_found counts", baseline: atAcme, task: failed(enrich.CodeNotFound), wantStreak: 1},
		{name: "a second not_found in a row pauses", baseline: atAcme, streak: 1, task: failed(enrich.CodeNotFound),
			wantStreak: 2, wantPaused: &paused},
		{name: "another failure changes nothing", baseline: atAcme, streak: 1, task: failed(enrich.CodeProviderUnavailable),
			wantStreak: 1},
		{name: "a canceled task changes nothing", baseline: atAcme, streak: 1,
			task: &store.Task{ID: "t1", Status: store.StatusCanceled}, wantStreak: 1},
		{name: "a baseline that cannot be read is replaced, nothing sent", baseline: `[1,2]`, task: succeeded(atGlobex),
			fetched: true, wantBaseline: atGlobex},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			w := &store.Watch{ID: "w1", ObjectType: enrich.ObjectPerson, Input: json.RawMessage(`{}`), Fields: c.fields,
				NotifyUnchanged: c.notifyUnchanged, Enabled: true, NotFoundStreak: c.streak}
			if c.baseline != "" {
				w.Baseline = json.RawMessage(c.baseline)
			}
			u := store.WatchSettled(w, c.task, c.fetched)
			is.Equal(string(u.Baseline), c.wantBaseline)
			is.Equal(u.NotFoundStreak, c.wantStreak)
			is.Equal(u.PausedReason, c.wantPaused)
			events := []string{}
			for _, e := range u.Events {
				events = append(events, e.Event)
				var head struct{ Event string }
				is.NoErr(json.Unmarshal(e.Payload, &head))
				is.Equal(head.Event, e.Event)
			}
			if c.wantEvents == nil {
				c.wantEvents = []string{}
			}
			is.Equal(events, c.wantEvents)
		})
	}
}

func TestJobChangedPayload(t *testing.T) {
	is := is.New(t)
	created := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	watchID := "w1"
	w := &store.Watch{ID: watchID, ObjectType: enrich.ObjectPerson, Input: json.RawMessage(`{"networkUrl":"https://net/in/jane"}`),
		LoopID: "l1", EveryDays: 30, Enabled: true, CreatedAt: created, UpdatedAt: created,
		Baseline: json.RawMessage(`{"positions":[{"company_name":"Acme","title":"Engineer","is_current":true}]}`)}
	task := &store.Task{ID: "t1", ObjectType: enrich.ObjectPerson, Operation: store.TaskOperation, Status: store.StatusSucceeded,
		Input: json.RawMessage(`{"networkUrl":"https://net/in/jane"}`), WatchID: &watchID, CreatedAt: created, ExpiresAt: created,
		Data: json.RawMessage(`{"positions":[{"company_name":"Globex","title":"CTO","is_current":true}]}`)}
	u := store.WatchSettled(w, task, true)
	is.Equal(len(u.Events), 1)
	var body struct {
		Event   string
		Watch   map[string]any
		Task    map[string]any
		Changes []struct {
			Path          string
			Before, After json.RawMessage
		}
		From, To map[string]any
		Data     json.RawMessage
	}
	is.NoErr(json.Unmarshal(u.Events[0].Payload, &body))
	is.Equal(body.Event, store.EventJobChanged)
	is.Equal(body.Watch["id"], "w1")
	is.Equal(body.Watch["loop_id"], "l1")
	_, hasBaseline := body.Watch["baseline"]
	is.True(!hasBaseline) // what the watch kept is not sent again
	is.Equal(body.Task["id"], "t1")
	is.Equal(body.Task["watch_id"], "w1")
	is.Equal(body.From["company_name"], "Acme")
	is.Equal(body.From["title"], "Engineer")
	is.Equal(body.To["company_name"], "Globex")
	is.Equal(body.To["company_network_url"], nil)
	is.Equal(string(body.Data), string(task.Data))
	is.Equal(len(body.Changes), 2) // the Acme position removed, the Globex one added
	is.Equal(body.Changes[0].Path, "positions[acme]")
	is.Equal(string(body.Changes[0].After), "null")
	is.Equal(body.Changes[1].Path, "positions[globex]")
	is.Equal(string(body.Changes[1].Before), "null")
}

func TestUnchangedPayloadHasEmptyChanges(t *testing.T) {
	is := is.New(t)
	w := &store.Watch{ID: "w1", ObjectType: enrich.ObjectCompany, Input: json.RawMessage(`{}`), NotifyUnchanged: true,
		Baseline: json.RawMessage(`{"name":"Acme"}`)}
	task := &store.Task{ID: "t1", Status: store.StatusSucceeded, Input: json.RawMessage(`{}`), Data: json.RawMessage(`{"name":"Acme"}`)}
	u := store.WatchSettled(w, task, true)
	is.Equal(len(u.Events), 1)
	var body map[string]json.RawMessage
	is.NoErr(json.Unmarshal(u.Events[0].Payload, &body))
	is.Equal(string(body["event"]), `"record.unchanged"`)
	is.Equal(string(body["changes"]), `[]`)
	_, hasFrom := body["from"]
	is.True(!hasFrom)
}
