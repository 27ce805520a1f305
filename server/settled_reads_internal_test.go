package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"enrichd/store"
	"enrichd/store/storetest"

	"github.com/matryer/is"
)

// countedReads counts the statements read through the reader pool.
type countedReads struct {
	store.Driver
	n *atomic.Int64
}

func (c countedReads) Reader() store.Executor { return countedExecutor{c.Driver.Reader(), c.n} }

type countedExecutor struct {
	store.Executor
	n *atomic.Int64
}

func (c countedExecutor) QueryRow(ctx context.Context, query string, args ...any) store.Row {
	c.n.Add(1)
	return c.Executor.QueryRow(ctx, query, args...)
}

// A settled task is read from the database once: the reads after it are answered from
// memory, while a task not settled yet is read each time.
func TestASettledTaskIsReadFromTheDatabaseOnce(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "enrichd.db"), storetest.Schema(t), store.WithSubjectKey(storetest.SubjectKey))
	is.NoErr(err)
	t.Cleanup(func() { db.Close() })
	key, _, err := db.CreateKey(ctx, store.BySystem, "acme", "test", true)
	is.NoErr(err)
	_, err = db.GrantCredits(ctx, "acme", 10, nil)
	is.NoErr(err)
	s := New(db, DefaultConfig())
	do := func(method, path, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec
	}
	queued := do("POST", "/v1/companies/enrich", `{"domain":"acme.com"}`)
	is.Equal(queued.Code, http.StatusAccepted)
	var task struct {
		Task struct{ ID, Status string } `json:"task"`
	}
	is.NoErr(json.Unmarshal(queued.Body.Bytes(), &task))

	var reads atomic.Int64
	db.Driver = countedReads{db.Driver, &reads}
	read := func() string {
		t.Helper()
		rec := do("GET", "/v1/tasks/"+task.Task.ID, "")
		is.Equal(rec.Code, http.StatusOK)
		return rec.Body.String()
	}
	read()
	read()
	is.Equal(reads.Load(), int64(2)) // queued: read each time

	is.Equal(do("POST", "/v1/tasks/"+task.Task.ID+"/cancel", "").Code, http.StatusOK)
	reads.Store(0)
	first := read()
	is.True(strings.Contains(first, `"status":"canceled"`))
	is.Equal(reads.Load(), int64(1))
	for range 3 {
		is.Equal(read(), first)
	}
	is.Equal(reads.Load(), int64(1)) // settled: from memory after the first read
}
