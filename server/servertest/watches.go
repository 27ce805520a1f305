package servertest

import (
	"net/http"
	"time"
)

// CreateWatch creates a watch and returns its body.
func (e *Env) CreateWatch(body map[string]any, headers ...string) *Response {
	e.T.Helper()
	r := e.Do("POST", "/v1/watches", body, headers...)
	if r.Status != http.StatusCreated {
		e.T.Fatalf("create watch: %d %s", r.Status, r.Raw)
	}
	return r
}

// WatchTotal is how many watches the env's organization has.
func (e *Env) WatchTotal() float64 {
	e.T.Helper()
	r := e.Do("GET", "/v1/watches", nil)
	if r.Status != http.StatusOK {
		e.T.Fatalf("list watches: %d %s", r.Status, r.Raw)
	}
	return r.Get("total").(float64)
}

func (f *FakeNetwork) RemovePerson(url string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.people, url)
}

// WaitWatch polls a watch until ok says it is as wanted.
func (e *Env) WaitWatch(id string, ok func(r *Response) bool, headers ...string) *Response {
	e.T.Helper()
	deadline := time.Now().Add(SettleWithin)
	for {
		r := e.Do("GET", "/v1/watches/"+id, nil, headers...)
		if r.Status != 200 {
			e.T.Fatalf("GET watch %s: %d %s", id, r.Status, r.Raw)
		}
		if ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			e.T.Fatalf("watch %s did not get there: %s", id, r.Raw)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// NextCheck moves the clock past a watch's next run and waits for the task the
// scheduler makes of it to settle.
func (e *Env) NextCheck(id string, headers ...string) *Response {
	e.T.Helper()
	w := e.Do("GET", "/v1/watches/"+id, nil, headers...)
	next, err := time.Parse(time.RFC3339Nano, w.Str("data.next_run_at"))
	if err != nil {
		e.T.Fatalf("watch %s has no next run: %s", id, w.Raw)
	}
	prev := w.Str("data.last_task_id")
	e.Clock.Add(next.Sub(e.Clock.Now()) + time.Second)
	w = e.WaitWatch(id, func(r *Response) bool { return r.Str("data.last_task_id") != prev }, headers...)
	return e.WaitSettled(w.Str("data.last_task_id"), headers...)
}
