package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
)

// One company written two ways in a file is one value: normalized as the server
// normalizes it, sent once and charged once.
func TestEnrichCSVOneCompanyWrittenTwoWaysIsChargedOnce(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	db, key := companiesDB(t, "acme.com", "globex.com")
	base := startEnrichServe(t, db)
	in := writeCSV(t, "domain", "Acme.com", "https://www.acme.com/", " ACME.COM/about ", "globex.com")
	out := filepath.Join(t.TempDir(), "out.csv")
	stdout := mustCLI(t, "enrich", "--csv", in, "--out", out, "--column", "domain", "--url", base, "--key", key)
	contains(t, stdout, "4 rows: 4 succeeded, 0 failed")
	contains(t, stdout, "credits spent: 2\n")
	_, rows := readOut(t, out)
	is.Equal(len(rows), 4)
	for _, r := range rows[:3] {
		is.Equal(r["enrichd_status"], "succeeded")
		is.Equal(r["enrichd_domain"], "acme.com")
		is.Equal(r["enrichd_task_id"], rows[0]["enrichd_task_id"]) // one task for the three spellings
	}
	is.True(rows[3]["enrichd_task_id"] != rows[0]["enrichd_task_id"])
	charged, _ := charges(t, db)
	is.Equal(charged, 2) // acme once, globex once
	is.Equal(balance(t, db, "acme"), "98")
}

// A run that ends while tasks are in flight counts in "credits spent" only the rows
// that settled; the charges of tasks still running are reported apart, as held.
func TestEnrichCSVSummaryCountsOnlySettledRows(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	db, key := companiesDB(t, "acme.com")
	// The sim source answers after a minute: every task stays in flight.
	ctx, stopServe := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--db", db, "--addr", "127.0.0.1:0", "--sources", "sim", "--sim-latency", "1m",
			"--shutdown-grace", "100ms", "--workers", "4"}, &stdout, &stderr)
	}()
	t.Cleanup(func() {
		stopServe()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("serve did not stop within 30s")
		}
	})
	base := waitListening(t, &stderr, done)
	in := writeCSV(t, "domain", "one.com", "two.com", "three.com")
	out := filepath.Join(t.TempDir(), "out.csv")

	// The run is stopped once the client knows all three tasks: serve's request log
	// shows it polling each one. (A charge is committed before its 202 reaches the
	// client, so the charges alone could cut a request off before its task is known.)
	runCtx, cancel := context.WithCancel(t.Context())
	defer cancel()
	polled := regexp.MustCompile(`"method":"GET"[^\n]*"path":"/v1/tasks/([^"]+)"`)
	go func() {
		for runCtx.Err() == nil {
			ids := map[string]bool{}
			for _, m := range polled.FindAllStringSubmatch(stderr.String(), -1) {
				ids[m[1]] = true
			}
			if len(ids) == 3 {
				cancel()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	var summary strings.Builder
	err := run(runCtx, []string{"enrich", "--csv", in, "--out", out, "--column", "domain", "--url", base, "--key", key, "--concurrency", "4"}, &summary, &strings.Builder{})
	is.True(err != nil) // an interrupted run fails
	contains(t, summary.String(), "3 rows: 0 succeeded, 0 failed, 3 not done")
	contains(t, summary.String(), "credits spent: 0\n")
	contains(t, summary.String(), "3 tasks still in flight hold 3 credits more, refunded if they fail")
	_, rows := readOut(t, out)
	is.Equal(len(rows), 3)
	for _, r := range rows {
		is.Equal(r["enrichd_status"], "interrupted")
		is.True(r["enrichd_task_id"] != "") // the task in flight is named
	}
	charged, refunded := charges(t, db)
	is.Equal(charged, 3) // the three tasks hold their credits while in flight
	is.Equal(refunded, 0)
}

// A --column (or --header) the file does not have is refused before any request.
func TestEnrichCSVMissingColumnSendsNothing(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Error(w, "unexpected", http.StatusTeapot)
	}))
	defer srv.Close()
	in := writeCSV(t, "website,name", "acme.com,Acme")
	out := filepath.Join(t.TempDir(), "out.csv")
	msg := failCLI(t, "enrich", "--csv", in, "--out", out, "--column", "domain", "--url", srv.URL, "--key", "enr_x")
	contains(t, msg, `has no column "domain" (its columns: website, name); name the column holding the values with --header`)
	msg = failCLI(t, "enrich", "--csv", in, "--out", out, "--column", "domain", "--header", "url", "--url", srv.URL, "--key", "enr_x")
	contains(t, msg, `has no column "url"`)
	is.Equal(requests.Load(), int64(0)) // nothing was sent
}
