package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRawClientReadsWhatTheServerWrites: bodies by length and by chunks, an empty
// 204, the headers the bench reads, a connection the server closes, and the request
// as the server sees it.
func TestRawClientReadsWhatTheServerWrites(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/echo":
			w.Header().Set("Idempotent-Replayed", "true")
			io.WriteString(w, r.Method+" "+r.Header.Get("Authorization")+" "+r.Header.Get("Idempotency-Key")+" "+
				r.Header.Get("Content-Type")+" "+string(body))
		case "/big": // past net/http's buffer: chunked
			io.WriteString(w, `{"task":{"id":"t-1"},"pad":"`+strings.Repeat("x", 10000)+`"}`)
		case "/none":
			w.WriteHeader(http.StatusNoContent)
		case "/close":
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusTeapot)
		}
	}))
	defer srv.Close()
	rc := newRawClient(strings.TrimPrefix(srv.URL, "http://"))
	defer rc.closeIdle()
	ctx := context.Background()

	a, err := rc.do(ctx, "k1", "POST", "/echo", `{"domain":"acme.com"}`, "idem-1")
	if err != nil || a.status != 200 || !a.replayed || string(a.body) != `POST Bearer k1 idem-1 application/json {"domain":"acme.com"}` {
		t.Fatalf("%+v %v", a, err)
	}
	a, err = rc.do(ctx, "k1", "GET", "/big", "", "")
	if err != nil || a.status != 200 || a.taskID != "t-1" || len(a.body) != 10000+len(`{"task":{"id":"t-1"},"pad":""}`) || a.replayed {
		t.Fatalf("%d %q %d %v", a.status, a.taskID, len(a.body), err)
	}
	a, err = rc.do(ctx, "k1", "GET", "/none", "", "")
	if err != nil || a.status != 204 || len(a.body) != 0 {
		t.Fatalf("%+v %v", a, err)
	}
	srv.CloseClientConnections() // the kept connection dies while idle
	a, err = rc.do(ctx, "k1", "GET", "/none", "", "")
	if err != nil || a.status != 204 {
		t.Fatalf("after the server closed the idle connection: %+v %v", a, err)
	}
	a, err = rc.do(ctx, "k1", "GET", "/close", "", "")
	if err != nil || a.status != 418 || len(rc.idle) != 0 {
		t.Fatalf("%+v %v, %d idle", a, err, len(rc.idle))
	}
}
