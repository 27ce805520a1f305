package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"
)

// TestEncodeTaskIsEncode: the task answers written without reflection are the bytes
// encode writes for the same values.
func TestEncodeTaskIsEncode(t *testing.T) {
	at := time.Date(2026, 11, 23, 15, 28, 46, 947_000_000, time.UTC)
	key := "crm-<42>"
	task := &store.Task{ID: "0197a0c2-0000-7000-8000-000000000001", ObjectType: "company", Operation: "enrich", Status: "succeeded",
		Input: json.RawMessage(`{"domain":"r\u0026d.com"}`), Target: "r&d.com", CreditsCharged: 1, IdempotencyKey: &key,
		CreatedAt: at, QueuedAt: &at, FinishedAt: &at, ExpiresAt: at.Add(10 * time.Minute)}
	n := 2
	type full struct {
		Task  *store.Task       `json:"task"`
		Data  json.RawMessage   `json:"data,omitempty"`
		Error *enrich.TaskError `json:"error,omitempty"`
	}
	for _, c := range []struct {
		data    json.RawMessage
		taskErr *enrich.TaskError
	}{
		{nil, nil},
		{json.RawMessage(`{"name":"R\u0026D","about":"\u003cb\u003e"}`), nil},
		{nil, &enrich.TaskError{Code: "ambiguous", Message: "two <people>", Candidates: &n, HintsAccepted: []string{"full_name"}}},
	} {
		want, got := httptest.NewRecorder(), httptest.NewRecorder()
		encode(want, http.StatusAccepted, full{Task: task, Data: c.data, Error: c.taskErr})
		encodeTask(got, http.StatusAccepted, task, c.data, c.taskErr)
		if got.Body.String() != want.Body.String() || got.Code != want.Code || got.Header().Get("Content-Type") != want.Header().Get("Content-Type") {
			t.Fatalf("got %d %s\nwant %d %s", got.Code, got.Body, want.Code, want.Body)
		}
	}
	for _, tasks := range [][]*store.Task{nil, {task}, {task, task}} {
		want, got := httptest.NewRecorder(), httptest.NewRecorder()
		list := tasks
		if list == nil {
			list = []*store.Task{}
		}
		encode(want, http.StatusOK, struct {
			Data  []*store.Task `json:"data"`
			Total int64         `json:"total"`
		}{list, 7})
		encodeTaskList(got, tasks, 7)
		if got.Body.String() != want.Body.String() {
			t.Fatalf("got %s\nwant %s", got.Body, want.Body)
		}
	}
}
