package server

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	_ "enrichd/store/sqlite" // the default engine

	"enrichd/store"
	"enrichd/store/storetest"

	"github.com/matryer/is"
)

// No route can be made to panic from outside, so the middleware is driven here with a
// handler that does: the answer must be the contract's 500, not a dropped connection.
func TestAPanicInAHandlerAnswers500WithTheRequestID(t *testing.T) {
	is := is.New(t)
	db, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "enrichd.db"), storetest.Schema(t), store.WithSubjectKey(storetest.SubjectKey))
	is.NoErr(err)
	t.Cleanup(func() { db.Close() })
	var logs bytes.Buffer
	cfg := DefaultConfig()
	cfg.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	s := New(db, cfg)

	h := s.logRequests(s.route("boom", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		panic("a bug in a handler")
	})))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/boom", nil))
	is.Equal(rec.Code, http.StatusInternalServerError)
	var body struct {
		Error     string `json:"error"`
		RequestID string `json:"requestId"`
	}
	is.NoErr(json.Unmarshal(rec.Body.Bytes(), &body))
	is.True(body.RequestID != "")
	is.Equal(body.RequestID, rec.Header().Get("X-Request-Id"))

	var stacks, requests int
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var l map[string]any
		is.NoErr(json.Unmarshal([]byte(line), &l))
		switch l["msg"] {
		case "recovered from a panic in request":
			stacks++
			is.Equal(l["requestId"], body.RequestID)
			is.True(strings.Contains(l["stack"].(string), "recover_internal_test.go")) // where it happened
		case "request":
			requests++
			is.Equal(l["level"], "ERROR")
			is.Equal(l["status"], 500.0)
			is.Equal(l["requestId"], body.RequestID)
		}
	}
	is.Equal(stacks, 1)   // the stack is logged once
	is.Equal(requests, 1) // and the request line still closes the request

	// A handler that answered before it panicked keeps its status; the line says why.
	logs.Reset()
	h = s.logRequests(s.route("late", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		panic("after the answer")
	})))
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/late", nil))
	is.Equal(rec.Code, http.StatusAccepted)
	is.True(strings.Contains(logs.String(), `"err":"panic: after the answer"`))

	// A panic while the client has gone is still a bug of ours: a 500, not a 499.
	logs.Reset()
	h = s.logRequests(s.route("boom", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		panic("a bug in a handler")
	})))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/boom", nil).WithContext(ctx))
	is.Equal(rec.Code, http.StatusInternalServerError)
	is.True(strings.Contains(logs.String(), `"status":500`))
}
