package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	_ "enrichd/store/sqlite" // the default engine
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/secret"
	"enrichd/store"
	"enrichd/store/storetest"

	"github.com/matryer/is"
)

// runCLI runs the real program with args, as a user would, and returns what it wrote.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = run(t.Context(), args, &out, &errOut)
	return out.String(), errOut.String(), err
}

// mustCLI runs args and fails the test when the command fails.
func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := runCLI(t, args...)
	if err != nil {
		t.Fatalf("enrichd %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// failCLI runs args, which must fail, and returns the error's text.
func failCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, _, err := runCLI(t, args...)
	if err == nil {
		t.Fatalf("enrichd %s: succeeded, want an error; stdout: %q", strings.Join(args, " "), out)
	}
	return err.Error()
}

// newDBPath is where a test's database will be: no file is there yet, as on a first
// start. A test that needs a database, not its making, takes newDB.
func newDBPath(t *testing.T) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "enrichd.db")
}

// newDB is the path of an empty database of the current schema, a copy of one this
// test binary migrated once: migrating a new file for each test was a tenth of the
// package's CPU. The copy holds no secret key's id: the first command or serve on it
// makes its key file beside it, as on a new database.
func newDB(t *testing.T) string {
	t.Helper()
	tmpl := &migratedTemplate
	tmpl.once.Do(func() {
		tmpl.path = filepath.Join(built.dir, "template.db")
		db, err := store.Open(context.Background(), tmpl.path, schema)
		if err == nil {
			// Closing checkpoints the write-ahead log: the file alone is the database.
			err = db.Close()
		}
		tmpl.err = err
	})
	if tmpl.err != nil {
		t.Fatalf("the migrated template database: %v", tmpl.err)
	}
	raw, err := os.ReadFile(tmpl.path)
	if err != nil {
		t.Fatal(err)
	}
	path := newDBPath(t)
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// engineDB is a database for the test on engine: newDB's on "sqlite", a new database
// of the tests' PostgreSQL cluster on "postgres".
func engineDB(t *testing.T, engine string) string {
	t.Helper()
	if engine == "postgres" {
		return storetest.PostgresURL(t)
	}
	return newDB(t)
}

var migratedTemplate struct {
	once sync.Once
	path string
	err  error
}

// lines splits output into its non-empty lines.
func lines(s string) []string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// tableRows is the rows of a list command's table, without its header row, which it
// checks is there: upper-case column names.
func tableRows(t *testing.T, out string) []string {
	t.Helper()
	ls := lines(out)
	if len(ls) == 0 || ls[0] != strings.ToUpper(ls[0]) {
		t.Fatalf("no header row in %q", out)
	}
	return ls[1:]
}

func contains(t *testing.T, got, want string) {
	t.Helper()
	if !strings.Contains(got, want) {
		t.Errorf("%q does not contain %q", got, want)
	}
}

// openStore opens the database file with the same schema and secret key file (the
// one beside it) the CLI uses.
func openStore(t *testing.T, path string) *store.DB {
	t.Helper()
	box, _, err := secret.LoadOrCreate(path + ".secret-key")
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(t.Context(), path, schema, store.WithSubjectKey(box.SubjectKey()))
	if err != nil {
		t.Fatalf("store.Open(%s): %v", path, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestOrgs(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	db := newDB(t)

	out := mustCLI(t, "orgs", "create", "acme", "--db", db)
	contains(t, out, "created organization acme")

	list := tableRows(t, mustCLI(t, "orgs", "list", "--db", db))
	is.Equal(len(list), 1)                        // one organization
	is.True(strings.HasPrefix(list[0], "acme\t")) // orgs list names acme

	msg := failCLI(t, "orgs", "create", "acme", "--db", db)
	contains(t, msg, "acme")
	contains(t, msg, "already exists")

	msg = failCLI(t, "orgs", "create", "bad name", "--db", db)
	contains(t, msg, `"bad name"`)
	contains(t, msg, "organization name")

	failCLI(t, "orgs", "create", "--db", db) // a name is required

	list = tableRows(t, mustCLI(t, "orgs", "list", "--db", db))
	is.Equal(len(list), 1) // the failed creations added nothing
}

var keyPattern = regexp.MustCompile(`^enr_[A-Za-z0-9_-]{43}\n$`)

func TestKeys(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	db := newDB(t)

	// keys create prints the key alone, and creates the missing organization.
	out, errOut, err := runCLI(t, "keys", "create", "--org", "acme", "--name", "ci", "--db", db)
	is.NoErr(err)
	if !keyPattern.MatchString(out) {
		t.Fatalf("keys create stdout = %q, want the key alone on one line", out)
	}
	is.Equal(errOut, "") // nothing on stderr either
	key := strings.TrimSpace(out)
	prefix := key[:12]

	orgs := mustCLI(t, "orgs", "list", "--db", db)
	is.True(strings.HasPrefix(tableRows(t, orgs)[0], "acme\t")) // keys create made the organization

	// --no-create-org refuses an unknown organization and creates nothing.
	msg := failCLI(t, "keys", "create", "--org", "ghost", "--no-create-org", "--db", db)
	contains(t, msg, "ghost")
	orgs = mustCLI(t, "orgs", "list", "--db", db)
	is.True(!strings.Contains(orgs, "ghost")) // no organization ghost was created

	// --no-create-org with an existing organization works.
	second := strings.TrimSpace(mustCLI(t, "keys", "create", "--org", "acme", "--no-create-org", "--db", db))
	is.True(strings.HasPrefix(second, "enr_")) // second key
	is.True(second != key)                     // keys are distinct

	failCLI(t, "keys", "create", "--db", db) // --org is required
	msg = failCLI(t, "keys", "create", "--org", "bad name", "--db", db)
	contains(t, msg, "organization name")

	list := mustCLI(t, "keys", "list", "--org", "acme", "--db", db)
	is.Equal(len(tableRows(t, list)), 2) // two keys
	contains(t, list, prefix)
	contains(t, list, second[:12])
	for _, k := range []string{key, second} {
		if strings.Contains(list, k) || strings.Contains(list, k[12:]) {
			t.Fatalf("keys list shows a whole key or its secret part:\n%s", list)
		}
	}
	is.True(!strings.Contains(list, "revoked")) // both active

	// Revoke by prefix as keys list shows it (with the trailing ellipsis).
	out = mustCLI(t, "keys", "revoke", "--org", "acme", prefix+"…", "--db", db)
	is.Equal(out, "revoked\n")
	for _, l := range tableRows(t, mustCLI(t, "keys", "list", "--org", "acme", "--db", db)) {
		switch {
		case strings.HasPrefix(l, prefix):
			contains(t, l, "\trevoked ")
		case strings.HasPrefix(l, second[:12]):
			contains(t, l, "\tactive")
		default:
			t.Errorf("unexpected keys list line %q", l)
		}
	}

	// The store agrees: the revoked key no longer authenticates, the other does.
	sdb := openStore(t, db)
	_, err = sdb.Authenticate(t.Context(), key)
	is.Equal(enrich.KindOf(err), enrich.KindUnauthorized) // revoked key refused
	_, err = sdb.Authenticate(t.Context(), second)
	is.NoErr(err) // active key accepted

	msg = failCLI(t, "keys", "revoke", "--org", "acme", "enr_nothere1", "--db", db)
	contains(t, msg, "enr_nothere1")

	// Another organization cannot revoke acme's key.
	mustCLI(t, "orgs", "create", "other", "--db", db)
	failCLI(t, "keys", "revoke", "--org", "other", second[:12], "--db", db)
	_, err = sdb.Authenticate(t.Context(), second)
	is.NoErr(err) // still active

	failCLI(t, "keys", "list", "--org", "ghost", "--db", db)
}

// ledgerRow is one parsed line of `credits ledger`.
type ledgerRow struct {
	kind   string
	amount string
}

func ledger(t *testing.T, db, org string) []ledgerRow {
	t.Helper()
	var rows []ledgerRow
	for _, l := range tableRows(t, mustCLI(t, "credits", "ledger", "--org", org, "--db", db)) {
		f := strings.Split(l, "\t")
		if len(f) < 4 {
			t.Fatalf("ledger line %q has too few fields", l)
		}
		rows = append(rows, ledgerRow{kind: f[2], amount: f[3]})
	}
	return rows
}

func balance(t *testing.T, db, org string) string {
	t.Helper()
	out := mustCLI(t, "credits", "balance", "--org", org, "--db", db)
	return strings.SplitN(out, "\n", 2)[0]
}

func TestCredits(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	db := newDB(t)
	mustCLI(t, "orgs", "create", "acme", "--db", db)

	out := mustCLI(t, "credits", "grant", "--org", "acme", "--amount", "100", "--db", db)
	contains(t, out, "balance 100")

	out, errOut, err := runCLI(t, "credits", "balance", "--org", "acme", "--db", db)
	is.NoErr(err)
	is.Equal(out, "100\n")              // the balance alone on stdout
	contains(t, errOut, "granted 100 ") // the breakdown on stderr

	for _, amount := range [][]string{{"--amount", "0"}, {"--amount=-5"}, {"--amount", "-5"}, {"--amount", "ten"}} {
		args := append([]string{"credits", "grant", "--org", "acme", "--db", db}, amount...)
		failCLI(t, args...)
	}
	failCLI(t, "credits", "grant", "--org", "acme", "--db", db)                   // --amount is required
	failCLI(t, "credits", "grant", "--org", "ghost", "--amount", "5", "--db", db) // unknown org
	is.Equal(balance(t, db, "acme"), "100")                                       // failed grants changed nothing

	// An expiry in the past is refused, naming the flag; nothing is written.
	for _, past := range []string{"2000-01-01", time.Now().UTC().Format(time.DateOnly), time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)} {
		msg := failCLI(t, "credits", "grant", "--org", "acme", "--amount", "50", "--expires", past, "--db", db)
		contains(t, msg, "--expires "+past+" is in the past")
	}
	is.Equal(balance(t, db, "acme"), "100")
	rows := ledger(t, db, "acme")
	want := []ledgerRow{{"grant", "100"}}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Errorf("ledger = %v, want %v", rows, want)
	}

	msg := failCLI(t, "credits", "grant", "--org", "acme", "--amount", "5", "--expires", "next week", "--db", db)
	contains(t, msg, "--expires")
	contains(t, msg, "next week")
	failCLI(t, "credits", "grant", "--org", "acme", "--amount", "5", "--expires", "2030-13-45", "--db", db)
	is.Equal(len(ledger(t, db, "acme")), 1) // bad --expires wrote nothing

	// A future expiry (RFC 3339) counts.
	mustCLI(t, "credits", "grant", "--org", "acme", "--amount", "7", "--expires", "2999-01-31T00:00:00Z", "--db", db)
	is.Equal(balance(t, db, "acme"), "107")

	failCLI(t, "credits", "balance", "--org", "ghost", "--db", db)
	failCLI(t, "credits", "ledger", "--org", "ghost", "--db", db)
}

const (
	goodCompany = `{"type":"company","name":"Acme","domain":"acme.com","domains":["acme.io"]}`
	goodPerson  = `{"type":"person","network_url":"https://linkedin.com/in/Jane-Doe","full_name":"Jane Doe",` +
		`"positions":[{"title":"CEO","company_name":"Acme","company":{"name":"Acme","domain":"acme.com"},"is_current":true}],` +
		`"emails":["jane@acme.com"]}`
	janeURL = "https://www.linkedin.com/in/jane-doe"
)

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "data.jsonl")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestImport(t *testing.T) {
	t.Parallel()
	bad := map[string]string{
		"unknown field":          `{"type":"company","name":"Bad","domain":"bad.com","colour":"red"}`,
		"person without url":     `{"type":"person","full_name":"No URL"}`,
		"unknown type":           `{"type":"robot","name":"R2"}`,
		"not json":               `{"type":`,
		"company without domain": `{"type":"company","name":"Nowhere"}`,
	}
	for name, line3 := range bad {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			db := newDB(t)
			ctx := t.Context()

			file := writeFile(t, goodCompany+"\n"+goodPerson+"\n"+line3+"\n")
			msg := failCLI(t, "import", file, "--db", db)
			contains(t, msg, "line 3")
			contains(t, msg, "nothing was imported")

			// Nothing from lines 1 and 2 is in the dataset.
			sdb := openStore(t, db)
			_, err := sdb.Dataset().CompanyByDomain(ctx, nil, "acme.com")
			is.True(errors.Is(err, enrich.ErrNotFound)) // line 1's company was not imported
			_, err = sdb.Dataset().PersonByURL(ctx, nil, janeURL)
			is.True(errors.Is(err, enrich.ErrNotFound)) // line 2's person was not imported

			out := mustCLI(t, "import", writeFile(t, goodCompany+"\n"+goodPerson+"\n"), "--db", db)
			is.Equal(out, "imported 1 companies and 1 people\n")

			c, err := sdb.Dataset().CompanyByDomain(ctx, nil, "acme.com")
			is.NoErr(err)
			is.Equal(c.Name, "Acme")
			c, err = sdb.Dataset().CompanyByDomain(ctx, nil, "acme.io") // the alias domain
			is.NoErr(err)
			is.Equal(c.Name, "Acme")
			is.True(c.Domain != nil && *c.Domain == "acme.com") // alias leads to the canonical domain
			is.True(c.Redirect != nil && c.Redirect.From == "acme.io" && c.Redirect.To == "acme.com")
			p, err := sdb.Dataset().PersonByURL(ctx, nil, janeURL) // normalized from the file's URL
			is.NoErr(err)
			is.True(p.FullName != nil && *p.FullName == "Jane Doe")
			is.Equal(len(p.Positions), 1)
			is.True(p.Positions[0].Title != nil && *p.Positions[0].Title == "CEO")
		})
	}

	t.Run("blank lines and counts", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		db := newDB(t)
		// Blank lines still count toward line numbers.
		msg := failCLI(t, "import", writeFile(t, goodCompany+"\n\n"+bad["unknown type"]+"\n"), "--db", db)
		contains(t, msg, "line 3")
		other := `{"type":"company","name":"Other","network_url":"https://www.linkedin.com/company/other"}`
		out := mustCLI(t, "import", writeFile(t, goodCompany+"\n\n"+other+"\n"+goodPerson), "--db", db)
		is.Equal(out, "imported 2 companies and 1 people\n")
	})

	t.Run("missing file", func(t *testing.T) {
		t.Parallel()
		failCLI(t, "import", filepath.Join(t.TempDir(), "nope.jsonl"), "--db", newDBPath(t))
	})
}

// TestEnvironment uses t.Setenv and t.Chdir, so it does not run in parallel.
func TestEnvironment(t *testing.T) {
	is := is.New(t)
	cwd := t.TempDir()
	t.Chdir(cwd) // a stray default ./enrichd.db would land here
	envDB := newDB(t)
	flagDB := newDB(t)
	t.Setenv("ENRICHD_DB", envDB)

	mustCLI(t, "orgs", "create", "from-env")
	mustCLI(t, "orgs", "create", "from-flag", "--db", flagDB)

	envOrgs := mustCLI(t, "orgs", "list", "--db", envDB)
	flagOrgs := mustCLI(t, "orgs", "list", "--db", flagDB)
	contains(t, envOrgs, "from-env")
	is.True(!strings.Contains(envOrgs, "from-flag")) // the flag won over ENRICHD_DB
	contains(t, flagOrgs, "from-flag")
	is.True(!strings.Contains(flagOrgs, "from-env")) // ENRICHD_DB was used without --db

	// Reading without --db uses the env file too.
	contains(t, mustCLI(t, "orgs", "list"), "from-env")

	_, err := os.Stat(filepath.Join(cwd, "enrichd.db"))
	is.True(errors.Is(err, os.ErrNotExist)) // the default path was never used

	// Other flags come from the environment as well; a bad value names the variable.
	t.Setenv("ENRICHD_WORKERS", "many")
	msg := runServeExpectError(t, "serve", "--addr", "127.0.0.1:0")
	contains(t, msg, "ENRICHD_WORKERS")
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a running server.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runServeExpectError runs a serve that must fail at start; should it serve instead,
// it is stopped and the test fails.
func runServeExpectError(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, &stdout, &stderr) }()
	deadline := time.Now().Add(patience)
	for {
		select {
		case err := <-done:
			if err == nil {
				t.Fatalf("enrichd %s: returned nil, want an error", strings.Join(args, " "))
			}
			return err.Error()
		case <-time.After(10 * time.Millisecond):
		}
		if strings.Contains(stderr.String(), "enrichd listening") || time.Now().After(deadline) {
			cancel()
			err := <-done
			t.Fatalf("enrichd %s: started serving (returned %v after cancel), want an error; stderr:\n%s",
				strings.Join(args, " "), err, stderr.String())
		}
	}
}

// waitListening polls the JSON log for "enrichd listening" and returns its addr.
func waitListening(t *testing.T, stderr *syncBuffer, done <-chan error) string {
	t.Helper()
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		sc := bufio.NewScanner(strings.NewReader(stderr.String()))
		for sc.Scan() {
			var entry struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(sc.Bytes(), &entry) == nil && entry.Msg == "enrichd listening" {
				if !strings.HasPrefix(entry.Addr, "http://127.0.0.1:") {
					t.Fatalf("listening addr = %q, want http://127.0.0.1:PORT", entry.Addr)
				}
				return entry.Addr
			}
		}
		select {
		case err := <-done:
			t.Fatalf("serve returned before listening: %v\nstderr:\n%s", err, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("no \"enrichd listening\" log line within %v; stderr:\n%s", patience, stderr.String())
	return ""
}

type apiResponse struct {
	Task struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	} `json:"task"`
	Data  json.RawMessage `json:"data"`
	Error json.RawMessage `json:"error"`
	Code  string          `json:"code"`
}

func call(t *testing.T, client *http.Client, method, url, key, body string) (int, apiResponse, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out apiResponse
	if resp.StatusCode == http.StatusUnauthorized { // the one error whose body is not JSON
		return resp.StatusCode, out, string(raw)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: %d with a body that is not JSON: %q", method, url, resp.StatusCode, raw)
	}
	return resp.StatusCode, out, string(raw)
}

// waitSettled reads the task r names until it is neither queued nor running, for at
// most patience, and returns the last read.
func waitSettled(t *testing.T, client *http.Client, base, key string, r apiResponse) apiResponse {
	t.Helper()
	for deadline := time.Now().Add(patience); r.Task.Status == "queued" || r.Task.Status == "running"; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("task %s still %s after %v", r.Task.ID, r.Task.Status, patience)
		}
		status, read, raw := call(t, client, http.MethodGet, base+"/v1/tasks/"+r.Task.ID, key, "")
		if status != http.StatusOK {
			t.Fatalf("GET /v1/tasks/%s = %d %s, want 200", r.Task.ID, status, raw)
		}
		r = read
	}
	return r
}

func TestServe(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	db := newDB(t)

	mustCLI(t, "import", writeFile(t, goodCompany+"\n"+goodPerson+"\n"), "--db", db)
	key := strings.TrimSpace(mustCLI(t, "keys", "create", "--org", "acme", "--db", db))
	mustCLI(t, "credits", "grant", "--org", "acme", "--amount", "100", "--db", db)

	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--db", db, "--addr", "127.0.0.1:0", "--log-format", "json", "--workers", "2"}, &stdout, &stderr)
	}()
	stopped := false
	t.Cleanup(func() { // a failed test still stops its server
		if !stopped {
			cancel()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
			}
		}
	})

	base := waitListening(t, &stderr, done)
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()

	status, resp, raw := call(t, client, http.MethodPost, base+"/v1/companies/enrich", key, `{"domain":"acme.com"}`)
	if status != http.StatusAccepted {
		t.Fatalf("POST /v1/companies/enrich = %d %s, want 202", status, raw)
	}
	is.True(resp.Task.ID != "") // the task has an id
	is.Equal(resp.Task.Status, "queued")

	final := waitSettled(t, client, base, key, resp)
	if final.Task.Status != "succeeded" {
		t.Fatalf("task settled as %s, want succeeded: %s", final.Task.Status, raw)
	}
	var company enrich.Company
	is.NoErr(json.Unmarshal(final.Data, &company))
	is.Equal(company.Name, "Acme")
	is.True(company.Domain != nil && *company.Domain == "acme.com") // data.domain

	// The CLI works on the same database while serve runs.
	mustCLI(t, "credits", "grant", "--org", "acme", "--amount", "25", "--db", db)
	is.Equal(balance(t, db, "acme"), "124") // 100 - 1 + 25

	// A key revoked through the CLI is refused by the running server, which keeps keys
	// in memory, within a second (half a second's poll; a loaded machine gets slack).
	other := strings.TrimSpace(mustCLI(t, "keys", "create", "--org", "acme", "--db", db))
	status, _, raw = call(t, client, http.MethodGet, base+"/v1/tasks", other, "")
	if status != http.StatusOK {
		t.Fatalf("GET /v1/tasks with a new key = %d %s, want 200", status, raw)
	}
	mustCLI(t, "keys", "revoke", "--org", "acme", other[:12], "--db", db)
	for deadline := time.Now().Add(patience); ; time.Sleep(50 * time.Millisecond) {
		status, _, raw = call(t, client, http.MethodGet, base+"/v1/tasks", other, "")
		if status == http.StatusUnauthorized {
			break
		}
		if status != http.StatusOK || time.Now().After(deadline) {
			t.Fatalf("GET /v1/tasks with a revoked key = %d %s, want 401", status, raw)
		}
	}

	client.CloseIdleConnections()
	cancel()
	select {
	case err := <-done:
		stopped = true
		is.NoErr(err) // serve returns nil when its context ends
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not return within 30s of cancel; stderr:\n%s", stderr.String())
	}
	contains(t, stderr.String(), `"msg":"shutting down"`)
	is.Equal(stdout.String(), "") // serve logs on stderr only
}

func TestServeBadFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"unknown source", []string{"--sources", "nope"}, []string{"--sources", `"nope"`}},
		{"unknown source after a good one", []string{"--sources", "dataset,nope"}, []string{`"nope"`}},
		{"bad rate-ip", []string{"--rate-ip", "abc"}, []string{"--rate-ip", `"abc"`}},
		{"bad rate-ip burst", []string{"--rate-ip", "10/0"}, []string{"--rate-ip"}},
		{"bad rate-key", []string{"--rate-key", "-1"}, []string{"--rate-key"}},
		// Trailing garbage and NaN are not "requests per second and an optional burst".
		{"rate-ip with trailing garbage", []string{"--rate-ip", "10x"}, []string{"--rate-ip", `"10x"`}},
		{"rate-ip burst with trailing garbage", []string{"--rate-ip", "10/5x"}, []string{"--rate-ip", `"10/5x"`}},
		{"rate-key NaN", []string{"--rate-key", "NaN"}, []string{"--rate-key", `"NaN"`}},
		{"bad log format", []string{"--log-format", "xml"}, []string{"--log-format"}},
		// Values that would make the service misbehave are refused, not replaced.
		{"no workers", []string{"--workers", "0"}, []string{"--workers"}},
		{"tiny lease", []string{"--lease", "2ns"}, []string{"--lease"}},
		{"no task lifetime", []string{"--task-ttl", "0s"}, []string{"--task-ttl"}},
		{"no backlog", []string{"--max-backlog", "0"}, []string{"--max-backlog"}},
		{"no email retrievals", []string{"--email-max-retrievals", "0"}, []string{"--email-max-retrievals"}},
		{"failure rate over 1", []string{"--sim-failure-rate", "1.5"}, []string{"--sim-failure-rate"}},
		{"negative sim latency", []string{"--sim-latency", "-1s"}, []string{"--sim-latency"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := newDBPath(t)
			args := append([]string{"serve", "--db", db, "--addr", "127.0.0.1:0"}, tt.args...)
			msg := runServeExpectError(t, args...)
			for _, w := range tt.want {
				contains(t, msg, w)
			}
			if _, err := os.Stat(db); !os.IsNotExist(err) {
				t.Errorf("a refused serve left %s behind (stat: %v)", db, err)
			}
		})
	}
}

func TestLoopsBesideARunningServer(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	db := newDBPath(t)
	key := strings.TrimSpace(mustCLI(t, "keys", "create", "--org", "acme", "--db", db))

	// The database holds the Loops' signing secrets: its owner alone may read it.
	info, err := os.Stat(db)
	is.NoErr(err)
	is.Equal(info.Mode().Perm(), os.FileMode(0o600))

	var mu sync.Mutex
	var got []*http.Request
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, r)
	}))
	defer receiver.Close()
	received := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }

	// Plain http and loopback are refused unless allowed for development.
	const allowHint = "(for local testing only, add --allow-private-webhooks, and start serve with it too so that events reach the URL)"
	contains(t, failCLI(t, "loops", "create", "--org", "acme", "--name", "Hooks", "--url", receiver.URL, "--db", db),
		"--url: the URL must use https, not http "+allowHint)
	contains(t, failCLI(t, "loops", "create", "--org", "acme", "--name", "Hooks", "--url", "https://127.0.0.1/in", "--db", db), "not publicly reachable")
	contains(t, failCLI(t, "loops", "create", "--org", "acme", "--name", "Hooks", "--url", "https://127.0.0.1/in", "--db", db), allowHint)
	contains(t, failCLI(t, "loops", "create", "--org", "acme", "--name", "Hooks", "--url", "https://example.com/in", "--object-type", "job", "--db", db), "--object-type")

	out := mustCLI(t, "loops", "create", "--org", "acme", "--name", "CRM Hooks", "--url", receiver.URL, "--allow-private-webhooks", "--db", db)
	var created store.Loop
	is.NoErr(json.Unmarshal([]byte(out), &created))
	is.Equal(created.Slug, "crm-hooks")
	is.True(strings.HasPrefix(created.Destination.Secret, "whsec_"))
	is.True(!strings.Contains(mustCLI(t, "loops", "get", "--org", "acme", "crm-hooks", "--db", db), "whsec_"))
	list := tableRows(t, mustCLI(t, "loops", "list", "--org", "acme", "--db", db))
	is.Equal(len(list), 1)
	contains(t, list[0], created.ID+"\tcrm-hooks\tcompany\tenabled\t"+receiver.URL)
	contains(t, failCLI(t, "loops", "get", "--org", "acme", "nope", "--db", db), `no Loop "nope"`)

	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--db", db, "--addr", "127.0.0.1:0", "--workers", "1", "--allow-private-webhooks"}, &stdout, &stderr)
	}()
	defer func() {
		cancel()
		<-done
	}()
	base := waitListening(t, &stderr, done)
	contains(t, stderr.String(), "--allow-private-webhooks is on")
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()

	mustCLI(t, "loops", "disable", "--org", "acme", "crm-hooks", "--db", db)
	status, resp, raw := call(t, client, http.MethodPost, base+"/v1/loops/"+created.ID+"/run", key, `{"domain":"acme.com"}`)
	is.Equal(status, http.StatusConflict)
	is.Equal(resp.Code, "loop_disabled")
	mustCLI(t, "loops", "enable", "--org", "acme", created.ID, "--db", db)
	status, _, raw = call(t, client, http.MethodGet, base+"/v1/loops/"+created.ID, key, "")
	is.Equal(status, http.StatusOK)
	contains(t, raw, `"enabled":true`)

	// A test event queued by the CLI is sent by the running server.
	deliveryID := strings.TrimSpace(mustCLI(t, "loops", "test", "--org", "acme", "crm-hooks", "--db", db))
	deadline := time.Now().Add(patience)
	for received() < 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	is.Equal(received(), 1)
	mu.Lock()
	is.Equal(got[0].Header.Get("X-Service-Delivery-Id"), deliveryID)
	is.Equal(got[0].Header.Get("X-Service-Event"), "test")
	mu.Unlock()
	var row string
	for time.Now().Before(deadline) {
		if row = mustCLI(t, "deliveries", "list", "--org", "acme", "--loop", "crm-hooks", "--db", db); strings.Contains(row, "succeeded") {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	contains(t, row, deliveryID+"	test	succeeded	1	-	200")
	contains(t, failCLI(t, "deliveries", "retry", "--org", "acme", deliveryID, "--db", db),
		"the delivery already succeeded (its receiver acknowledged it); there is nothing to retry")
	contains(t, failCLI(t, "deliveries", "retry", "--org", "acme", "0195f3a2-6b1c-7cde-8f00-123456789abc", "--db", db), "delivery not found")

	mustCLI(t, "loops", "delete", "--org", "acme", "crm-hooks", "--db", db)
	is.Equal(len(tableRows(t, mustCLI(t, "loops", "list", "--org", "acme", "--db", db))), 0)
	status, _, _ = call(t, client, http.MethodGet, base+"/v1/loops/"+created.ID, key, "")
	is.Equal(status, http.StatusNotFound)
}
