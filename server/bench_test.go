package server_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"enrichd/server/servertest"
	_ "enrichd/store/sqlite" // the default engine

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/store"
	"enrichd/store/storetest"
	"enrichd/wire"
)

// The server's own cost of a request, without a network or a load generator: the
// handler is called directly, as the listener would.

// benchServer is enrichd over a temporary database, with a key of an organization
// that holds plenty of credits, and acme.com already in the 30-day store.
func benchServer(b *testing.B) (srv *server.Server, key string) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(b.TempDir(), "enrichd.db"), storetest.Schema(b), store.WithSubjectKey(storetest.SubjectKey))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	key, _, err = db.CreateKey(ctx, store.BySystem, "acme", "bench", true)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.GrantCredits(ctx, "acme", 1<<40, nil); err != nil {
		b.Fatal(err)
	}
	net := servertest.NewFakeNetwork()
	net.AddCompany(servertest.Company("Acme", "acme.com"))
	cfg := server.DefaultConfig()
	cfg.RateIP, cfg.RateKey = server.Rate{}, server.Rate{}
	cfg.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	cfg.Sources = []enrich.Source{net}
	srv, work := wire.New(db, cfg)
	workers, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		work.RunWorkers(workers)
	}()
	b.Cleanup(func() { stop(); <-done })
	w := serve(srv, "POST", "/v1/companies/enrich", key, `{"domain":"acme.com"}`)
	id := taskIDOf(b, w)
	for {
		if w := serve(srv, "GET", "/v1/tasks/"+id, key, ""); strings.Contains(w.Body.String(), `"status":"succeeded"`) {
			return srv, key
		}
		time.Sleep(time.Millisecond)
	}
}

func serve(srv *server.Server, method, path, key, body string) *httptest.ResponseRecorder {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, req)
	return w
}

func taskIDOf(b *testing.B, w *httptest.ResponseRecorder) string {
	var resp struct {
		Task struct {
			ID string `json:"id"`
		} `json:"task"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || resp.Task.ID == "" {
		b.Fatalf("%d %s", w.Code, w.Body.String())
	}
	return resp.Task.ID
}

func BenchmarkGetTask(b *testing.B) {
	srv, key := benchServer(b)
	id := taskIDOf(b, serve(srv, "POST", "/v1/companies/enrich", key, `{"domain":"acme.com"}`))
	for b.Loop() {
		if w := serve(srv, "GET", "/v1/tasks/"+id, key, ""); w.Code != http.StatusOK {
			b.Fatal(w.Code, w.Body.String())
		}
	}
}

func BenchmarkEnqueueStoreHit(b *testing.B) {
	srv, key := benchServer(b)
	for b.Loop() {
		if w := serve(srv, "POST", "/v1/companies/enrich", key, `{"domain":"acme.com"}`); w.Code != http.StatusOK {
			b.Fatal(w.Code, w.Body.String())
		}
	}
}
