package e2e

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
)

// startEnrichServe runs `enrichd serve` on the database file until the test ends and
// returns its base URL.
func startEnrichServe(t *testing.T, db string) string {
	t.Helper()
	base, _ := serveEnrich(t, db)
	return base
}

// serveEnrich is startEnrichServe that can also be stopped early. stop returns once
// serve has drained: every request it accepted has been answered, so whatever such a
// request wrote to the database is there, even when its client gave up waiting for the
// answer. It returns an error when serve did not drain (its grace ran out, or it did
// not stop), when the database may still change.
func serveEnrich(t *testing.T, db string) (base string, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--db", db, "--addr", "127.0.0.1:0", "--log-format", "json", "--workers", "2"}, &stdout, &stderr)
	}()
	stop = sync.OnceValue(func() error {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			return errors.New("serve did not stop within 30s")
		}
		if strings.Contains(stderr.String(), "shutdown grace ran out") {
			return fmt.Errorf("serve cut requests still in flight instead of draining them:\n%s", stderr.String())
		}
		return nil
	})
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	return waitListening(t, &stderr, done), stop
}

// companiesDB is a database whose dataset knows the companies named by domain and
// whose org acme holds 100 credits; it returns the path and a key of acme.
func companiesDB(t *testing.T, domains ...string) (db, key string) {
	t.Helper()
	db = newDB(t)
	var lines []string
	for _, d := range domains {
		name := strings.ToUpper(d[:1]) + strings.Split(d, ".")[0][1:]
		lines = append(lines, fmt.Sprintf(`{"type":"company","name":%q,"domain":%q,"employee_count":42}`, name, d))
	}
	lines = append(lines, goodPerson)
	mustCLI(t, "import", writeFile(t, strings.Join(lines, "\n")+"\n"), "--db", db)
	key = strings.TrimSpace(mustCLI(t, "keys", "create", "--org", "acme", "--db", db))
	mustCLI(t, "credits", "grant", "--org", "acme", "--amount", "100", "--db", db)
	return db, key
}

func writeCSV(t *testing.T, rows ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "in.csv")
	if err := os.WriteFile(path, []byte(strings.Join(rows, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// readOut reads an output CSV into maps keyed by column name, in row order.
func readOut(t *testing.T, path string) (head []string, rows []map[string]string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	head = recs[0]
	for _, rec := range recs[1:] {
		m := map[string]string{}
		for i, h := range head {
			m[h] = rec[i]
		}
		rows = append(rows, m)
	}
	return head, rows
}

// charges counts the ledger's charge and refund rows of org acme.
func charges(t *testing.T, db string) (charged, refunded int) {
	t.Helper()
	for _, r := range ledger(t, db, "acme") {
		switch r.kind {
		case "charge":
			charged++
		case "refund":
			refunded++
		}
	}
	return charged, refunded
}

// Not parallel: it sets ENRICHD_KEY, as a user would, to show the key comes from it.
func TestEnrichCSV(t *testing.T) {
	is := is.New(t)
	db, key := companiesDB(t, "acme.com", "beta.io")
	base := startEnrichServe(t, db)
	t.Setenv("ENRICHD_KEY", key)

	in := writeCSV(t,
		"name,domain",
		"Acme,acme.com",
		`"Beta, Inc.",https://www.beta.io/about`,
		"Acme again,ACME.com",
		"Nobody,nowhere.example",
		"Loopback,127.0.0.1",
		"Blank,",
	)
	out := filepath.Join(t.TempDir(), "out.csv")
	args := []string{"enrich", "--csv", in, "--out", out, "--column", "domain", "--url", base}
	stdout, stderr, err := runCLI(t, args...)
	is.NoErr(err) // failed rows are written, not a failure of the run

	head, rows := readOut(t, out)
	is.Equal(head[:2], []string{"name", "domain"}) // the input columns first
	is.Equal(len(rows), 6)
	want := []struct{ name, status, code, enrichedName string }{
		{"Acme", "succeeded", "", "Acme"},
		{"Beta, Inc.", "succeeded", "", "Beta"},
		{"Acme again", "succeeded", "", "Acme"},
		{"Nobody", "failed", "not_found", ""},
		{"Loopback", "failed", "invalid_input", ""},
		{"Blank", "failed", "invalid_input", ""},
	}
	for i, w := range want {
		r := rows[i]
		is.Equal(r["name"], w.name) // input order kept
		is.Equal(r["enrichd_status"], w.status)
		is.Equal(r["enrichd_error_code"], w.code)
		is.Equal(r["enrichd_name"], w.enrichedName)
		if w.code != "" {
			is.True(r["enrichd_error_message"] != "") // a failed row says why
		}
	}
	is.Equal(rows[0]["enrichd_domain"], "acme.com")
	is.Equal(rows[0]["enrichd_employee_count"], "42")
	is.Equal(rows[0]["enrichd_task_id"], rows[2]["enrichd_task_id"]) // identical values share one task
	contains(t, stdout, "6 rows: 3 succeeded, 3 failed (invalid_input 2, not_found 1)")
	contains(t, stdout, "credits spent: 2")
	contains(t, stderr, "enriched 6/6 rows")

	charged, refunded := charges(t, db)
	is.Equal(charged, 3)  // acme, beta and the miss; the duplicate row shares acme's task
	is.Equal(refunded, 1) // the miss
	is.Equal(balance(t, db, "acme"), "98")

	// Run again: every row comes back from the server as a replay, nothing is paid.
	stdout, _, err = runCLI(t, args...)
	is.NoErr(err)
	contains(t, stdout, "credits spent: 0")
	_, again := readOut(t, out)
	is.Equal(again[0]["enrichd_task_id"], rows[0]["enrichd_task_id"])
	charged, _ = charges(t, db)
	is.Equal(charged, 3)
	is.Equal(balance(t, db, "acme"), "98")

	// People by profile URL.
	people := writeCSV(t, "who,profile", "Jane,https://linkedin.com/in/Jane-Doe", "Ghost,https://www.linkedin.com/in/nobody-here")
	pout := filepath.Join(t.TempDir(), "people.csv")
	stdout, _, err = runCLI(t, "enrich", "--csv", people, "--out", pout, "--column", "networkUrl", "--header", "profile", "--url", base)
	is.NoErr(err)
	_, prow := readOut(t, pout)
	is.Equal(prow[0]["enrichd_status"], "succeeded")
	is.Equal(prow[0]["enrichd_full_name"], "Jane Doe")
	is.Equal(prow[0]["enrichd_current_title"], "CEO")
	is.Equal(prow[0]["enrichd_current_company"], "Acme")
	is.Equal(prow[1]["enrichd_error_code"], "not_found")
	contains(t, stdout, "credits spent: 1")
}

// cancelAfter is a stderr that cancels the run once a progress line says n rows are
// done.
type cancelAfter struct {
	mu     sync.Mutex
	b      strings.Builder
	line   string
	cancel context.CancelFunc
}

func (c *cancelAfter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.b.Write(p)
	if strings.Contains(c.b.String(), c.line) {
		c.cancel()
	}
	return len(p), nil
}

func TestEnrichCSVResumesAfterInterruptionWithoutPayingTwice(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	domains := []string{"a1.com", "a2.com", "a3.com", "a4.com", "a5.com", "a6.com", "a7.com", "a8.com"}
	db, key := companiesDB(t, domains...)
	base, stop := serveEnrich(t, db)
	in := writeCSV(t, append([]string{"domain"}, domains...)...)
	out := filepath.Join(t.TempDir(), "out.csv")
	args := func(base string) []string {
		return []string{"enrich", "--csv", in, "--out", out, "--column", "domain", "--url", base, "--key", key, "--concurrency", "2"}
	}

	// Killed once three rows are done.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stderr := &cancelAfter{line: "enriched 3/8 rows", cancel: cancel}
	var stdout strings.Builder
	err := run(ctx, args(base), &stdout, stderr)
	is.True(err != nil) // an interrupted run fails
	contains(t, err.Error(), "run the same command again")

	_, rows := readOut(t, out)
	done := 0
	firstTask := map[string]string{} // domain -> task, for rows the first run finished
	for _, r := range rows {
		switch r["enrichd_status"] {
		case "succeeded":
			done++
			firstTask[r["domain"]] = r["enrichd_task_id"]
		case "interrupted":
		default:
			t.Errorf("row %v: want succeeded or interrupted", r)
		}
	}
	is.True(done >= 3 && done < 8) // stopped halfway

	// A request the kill abandoned may still be charged by the server after the CLI
	// has returned, and its row is interrupted with no task id: the CLI never heard
	// back. Stopping serve waits for such requests, so the ledger read next holds
	// every charge the first run caused. serve comes back on the same database for
	// the rerun.
	is.NoErr(stop())
	chargedFirst, _ := charges(t, db)
	is.True(chargedFirst >= done) // rows in flight at the kill were charged too
	base, _ = serveEnrich(t, db)

	// The rerun finishes the file and charges only rows never sent before; what the
	// first run paid for comes back as replays, whether or not the first run heard
	// the answer.
	out2, _, err := runCLI(t, args(base)...)
	is.NoErr(err)
	contains(t, out2, "8 rows: 8 succeeded, 0 failed")
	contains(t, out2, fmt.Sprintf("credits spent: %d (%d results were paid for by an earlier run", 8-chargedFirst, chargedFirst))
	_, rows = readOut(t, out)
	for _, r := range rows {
		is.Equal(r["enrichd_status"], "succeeded")
		if id, ok := firstTask[r["domain"]]; ok {
			is.Equal(r["enrichd_task_id"], id) // a row done before is its first task, replayed
		}
	}
	charged, refunded := charges(t, db)
	is.Equal(charged, 8) // each company paid once over both runs
	is.Equal(refunded, 0)
	is.Equal(balance(t, db, "acme"), "92")
}

func TestEnrichCSVFlags(t *testing.T) {
	t.Parallel()
	db, key := companiesDB(t, "acme.com")
	base := startEnrichServe(t, db)
	in := writeCSV(t, "company", "acme.com")
	out := filepath.Join(t.TempDir(), "out.csv")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--out", out, "--column", "domain", "--key", key}, "--csv"},
		{[]string{"--csv", in, "--column", "domain", "--key", key}, "--out"},
		{[]string{"--csv", in, "--out", out, "--key", key}, "--column"},
		{[]string{"--csv", in, "--out", out, "--column", "website", "--key", key}, "--column must be domain, networkUrl or email"},
		{[]string{"--csv", in, "--out", out, "--column", "domain", "--key", key, "--concurrency", "0"}, "--concurrency"},
		{[]string{"--csv", in, "--out", out, "--column", "domain"}, "ENRICHD_KEY"},
		{[]string{"--csv", in, "--out", in, "--column", "domain", "--key", key}, "must not be the --csv file"},
		{[]string{"--csv", in, "--out", out, "--column", "domain", "--key", key, "--url", "localhost:8080"}, "--url"},
		{[]string{"--csv", filepath.Join(t.TempDir(), "missing.csv"), "--out", out, "--column", "domain", "--key", key}, "missing.csv"},
		{[]string{"--csv", in, "--out", out, "--column", "domain", "--key", key, "--url", base}, `no column "domain" (its columns: company); name the column holding the values with --header`},
		{[]string{"--csv", in, "--out", out, "--column", "domain", "--header", "company", "--key", "enr_wrong", "--url", base}, "API key"},
	} {
		t.Run(c.want, func(t *testing.T) {
			if key := os.Getenv("ENRICHD_KEY"); key != "" {
				t.Skip("ENRICHD_KEY is set in the environment")
			}
			msg := failCLI(t, append([]string{"enrich"}, c.args...)...)
			contains(t, msg, c.want)
		})
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused run wrote %s", out)
	}
	// The right header works.
	mustCLI(t, "enrich", "--csv", in, "--out", out, "--column", "domain", "--header", "company", "--key", key, "--url", base)
	_, rows := readOut(t, out)
	if rows[0]["enrichd_status"] != "succeeded" {
		t.Errorf("row = %v, want succeeded", rows[0])
	}
}

// The output CSV defuses a cell a spreadsheet would run as a formula, as a batch's
// downloaded results do; a number stays a number.
func TestEnrichCSVDefusesFormulas(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	db, key := companiesDB(t, "acme.com")
	base := startEnrichServe(t, db)
	in := writeCSV(t, "owner,score,domain", "@SUM(1+1),-3,acme.com", "=cmd|' /C calc'!A0,+7,acme.com")
	out := filepath.Join(t.TempDir(), "out.csv")
	mustCLI(t, "enrich", "--csv", in, "--out", out, "--column", "domain", "--url", base, "--key", key)
	_, rows := readOut(t, out)
	is.Equal(len(rows), 2)
	is.Equal(rows[0]["owner"], "'@SUM(1+1)")
	is.Equal(rows[0]["score"], "-3")
	is.Equal(rows[1]["owner"], "'=cmd|' /C calc'!A0")
	is.Equal(rows[1]["score"], "+7")
	is.Equal(rows[1]["enrichd_status"], "succeeded")
}
