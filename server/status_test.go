package server_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"enrichd/enrich"
	"enrichd/enrich/source"
	"enrichd/server"
	"enrichd/server/servertest"
)

// The status endpoint shows the running server's upstream counters, read through the
// real handler after real tasks went through a vendor adapter.
func TestStatusShowsSourceCounters(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var down atomic.Bool
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"description": "Enrichment failed, please retry."}`))
			return
		}
		w.Write([]byte(`{"name": "Acme Corporation", "website": "https://acme.com", "company_size": [51, 200]}`))
	}))
	defer vendor.Close()
	const key = "status-test-key-0c9d"
	vendorLogs := &bytes.Buffer{}
	el, err := source.NewEnrichLayer(source.VendorConfig{
		APIKey: key, BaseURL: vendor.URL, Attempts: 2, Backoff: time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(vendorLogs, nil)),
	})
	is.NoErr(err)
	e := servertest.NewEnv(t, func(c *server.Config) { c.Sources = []enrich.Source{el} })
	e.StartWorkers()

	r := e.Do("POST", "/v1/companies/enrich", map[string]string{"networkUrl": "https://www.linkedin.com/company/acme"})
	done := e.WaitSettled(r.Str("task.id"))
	is.Equal(done.Str("task.status"), "succeeded")
	is.Equal(done.Str("data.name"), "Acme Corporation")
	is.Equal(done.Str("data.employee_range"), "51-200")

	st := e.Do("GET", "/v1/status", nil)
	is.Equal(st.Status, http.StatusOK)
	sources := st.Get("sources").([]any)
	is.Equal(len(sources), 3) // in the order they are asked
	is.Equal(sources[0], map[string]any{"name": "fake-network", "calls": nil, "errors": nil, "last_error": nil, "last_error_at": nil})
	is.Equal(sources[1].(map[string]any)["name"], "dataset")
	elStats := sources[2].(map[string]any)
	is.Equal(elStats["name"], "enrichlayer")
	is.Equal(elStats["calls"], 1.0)
	is.Equal(elStats["errors"], 0.0)
	is.Equal(elStats["last_error"], nil)

	down.Store(true)
	r = e.Do("POST", "/v1/companies/enrich", map[string]string{"networkUrl": "https://www.linkedin.com/company/globex"})
	failed := e.WaitSettled(r.Str("task.id"))
	is.Equal(failed.Str("task.status"), "failed")
	is.Equal(failed.Str("error.code"), "provider_unavailable")

	elStats = e.Do("GET", "/v1/status", nil).Get("sources").([]any)[2].(map[string]any)
	is.Equal(elStats["calls"], 3.0)  // one, then two attempts
	is.Equal(elStats["errors"], 2.0) // both failed
	is.True(strings.Contains(elStats["last_error"].(string), "503"))
	is.True(elStats["last_error_at"] != nil)
	is.True(!strings.Contains(e.Logs.String(), key) && !strings.Contains(vendorLogs.String(), key))
}

func TestStatusNeedsAKey(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	r := e.Do("GET", "/v1/status", nil, "Authorization", "")
	is.Equal(r.Status, http.StatusUnauthorized)
	r = e.Do("POST", "/v1/status", nil)
	is.Equal(r.Status, http.StatusMethodNotAllowed)
}
