package e2e

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"enrichd/store"

	"github.com/matryer/is"
)

// TestSimSampleInTheDocs: the people docs/sources.md lists for a demo batch are what
// `enrichd sim sample --count 5` prints.
func TestSimSampleInTheDocs(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "sources.md"))
	if err != nil {
		t.Fatal(err)
	}
	const intro = "`enrichd sim sample --count 5`:\n\n  ```csv\n"
	_, rest, ok := strings.Cut(string(doc), intro)
	if !ok {
		t.Fatalf("docs/sources.md shows no output of `enrichd sim sample --count 5` (%q)", intro)
	}
	block, _, _ := strings.Cut(rest, "  ```")
	shown := strings.ReplaceAll(block, "\n  ", "\n")
	shown = strings.TrimPrefix(shown, "  ")
	if got := mustCLI(t, "sim", "sample", "--count", "5"); got != shown {
		t.Errorf("docs/sources.md shows\n%s\nenrichd sim sample --count 5 prints\n%s", shown, got)
	}
	contains(t, failCLI(t, "sim", "sample", "--count", "0"), "--count must be from 1 to 100")
	contains(t, failCLI(t, "sim", "sample", "--count", "101"), "--count must be from 1 to 100")
}

// TestSimSampleFindsPeople uploads what `enrichd sim sample` prints as a batch to a
// serve on the sim source: every row's person is found, and is the one named beside
// the address.
func TestSimSampleFindsPeople(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	db := newDB(t)
	key := strings.TrimSpace(mustCLI(t, "keys", "create", "--org", "acme", "--db", db))
	mustCLI(t, "credits", "grant", "--org", "acme", "--amount", "100", "--db", db)
	base, stop := serveWith(t, db, "--sources", "sim")
	defer stop()
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	do := func(method, path, contentType, body string, into any) []byte {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
		is.NoErr(err)
		req.Header.Set("Authorization", "Bearer "+key)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		res, err := client.Do(req)
		is.NoErr(err)
		defer res.Body.Close()
		raw, err := io.ReadAll(res.Body)
		is.NoErr(err)
		if res.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, raw)
		}
		if into != nil {
			is.NoErr(json.Unmarshal(raw, into))
		}
		return raw
	}

	sample := mustCLI(t, "sim", "sample")
	is.Equal(strings.Count(sample, "\n"), 11) // the header and 10 people
	var b struct{ Data store.Batch }
	do(http.MethodPost, "/v1/batches?name=sim.csv", "text/csv", sample, &b)
	for deadline := time.Now().Add(time.Minute); b.Data.Status != store.BatchDone; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the batch did not finish in a minute: %+v", b.Data.Counts)
		}
		do(http.MethodGet, "/v1/batches/"+b.Data.ID, "", "", &b)
	}
	is.Equal(b.Data.Counts, store.BatchCounts{Succeeded: 10})

	recs, err := csv.NewReader(bytes.NewReader(do(http.MethodGet, "/v1/batches/"+b.Data.ID+"/results", "", "", nil))).ReadAll()
	is.NoErr(err)
	is.Equal(len(recs), 11)
	col := func(name string) int {
		i := slices.Index(recs[0], name)
		if i < 0 {
			t.Fatalf("the results have no %s column: %v", name, recs[0])
		}
		return i
	}
	email, simName, status, fullName := col("email"), col("sim_name"), col("enrichd_status"), col("enrichd_full_name")
	for _, rec := range recs[1:] {
		if rec[status] != "succeeded" || rec[fullName] != rec[simName] {
			t.Errorf("%s: %s as %q, want %q", rec[email], rec[status], rec[fullName], rec[simName])
		}
	}
}
