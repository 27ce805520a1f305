package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// A command that only reads or changes an existing deployment, given a --db that does
// not exist, fails naming the path and leaves no database behind: a mistyped path must
// not read as an empty deployment.
func TestReadCommandsNeedAnExistingDatabase(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"orgs", "list"},
		{"keys", "list", "--org", "acme"},
		{"keys", "revoke", "--org", "acme", "enr_x"},
		{"credits", "balance", "--org", "acme"},
		{"credits", "ledger", "--org", "acme"},
		{"credits", "grant", "--org", "acme", "--amount", "5"},
		{"tasks", "list", "--org", "acme"},
		{"loops", "list", "--org", "acme"},
		{"loops", "get", "--org", "acme", "hooks"},
		{"loops", "create", "--org", "acme", "--name", "n", "--url", "https://example.com/h"},
		{"loops", "delete", "--org", "acme", "hooks"},
		{"loops", "rotate", "--org", "acme", "hooks"},
		{"loops", "enable-destination", "--org", "acme", "hooks"},
		{"deliveries", "list", "--org", "acme", "--loop", "hooks"},
		{"deliveries", "retry", "--org", "acme", "dlv_x"},
		{"sources", "fill", "--org", "acme"},
		{"sources", "fill", "--org", "acme", "--company", "name"},
		{"backup", "--to", filepath.Join(t.TempDir(), "b.db")},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			is := is.New(t)
			db := filepath.Join(t.TempDir(), "typo.db")
			msg := failCLI(t, append(args, "--db", db)...)
			contains(t, msg, "no database at "+db)
			_, err := os.Stat(db)
			is.True(os.IsNotExist(err)) // no database was created
		})
	}
}

// The commands that set a deployment up create the database.
func TestSetupCommandsCreateTheDatabase(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	db := newDBPath(t)
	mustCLI(t, "orgs", "create", "acme", "--db", db)
	_, err := os.Stat(db)
	is.NoErr(err) // orgs create made the database

	db = newDBPath(t)
	mustCLI(t, "keys", "create", "--org", "acme", "--db", db)
	is.Equal(strings.Count(mustCLI(t, "orgs", "list", "--db", db), "acme"), 1) // keys create made database and org

	db = newDBPath(t)
	in := filepath.Join(t.TempDir(), "in.jsonl")
	is.NoErr(os.WriteFile(in, []byte(`{"type":"company","domain":"acme.com","name":"Acme"}`+"\n"), 0o600))
	mustCLI(t, "import", in, "--db", db)
	_, err = os.Stat(db)
	is.NoErr(err) // import made the database
}

// A setup command refused for a bad input or flag creates no database: a typo must not
// leave an empty file that later reads as a deployment.
func TestSetupCommandsRefusedLeaveNoDatabase(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing.jsonl")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"import of a missing file", []string{"import", missing}, "missing.jsonl"},
		{"keys create without creating the org", []string{"keys", "create", "--org", "acme", "--no-create-org"}, "no database at "},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			db := filepath.Join(t.TempDir(), "typo.db")
			contains(t, failCLI(t, append(c.args, "--db", db)...), c.want)
			_, err := os.Stat(db)
			is.True(os.IsNotExist(err)) // no database was created
		})
	}
}

// Errors that reach the user carry no package prefix; main adds the one "enrichd: ".
func TestErrorsCarryNoPackagePrefix(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	bin := enrichdBinary(t)
	db := newDB(t)
	mustCLI(t, "orgs", "create", "acme", "--db", db)
	missingDir := filepath.Join(t.TempDir(), "gone")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"backup", "--db", db, "--to", filepath.Join(missingDir, "b.db")}, "cannot write a backup in " + missingDir + ": no such file or directory"},
		{[]string{"backup", "--db", db, "--to", db, "--force"}, "cannot back up to " + db + ": it is the database itself (or its journal); back up to another file"},
		{[]string{"orgs", "create", "acme", "--db", filepath.Join(missingDir, "x.db")}, "cannot create the database " + filepath.Join(missingDir, "x.db") + ": no such file or directory"},
	} {
		line := failBinary(t, bin, c.args...)
		is.Equal(line, "enrichd: "+c.want)
	}
}

// An error of the Go client, which prefixes its own "enrichd: ", is printed with one.
func TestClientErrorsPrintOnePrefix(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"error":{"code":"unauthorized","message":"invalid API key"}}`))
	}))
	defer srv.Close()
	in := filepath.Join(t.TempDir(), "in.csv")
	is.NoErr(os.WriteFile(in, []byte("domain\nacme.com\n"), 0o600))
	line := failBinary(t, enrichdBinary(t), "enrich", "--csv", in, "--out", filepath.Join(t.TempDir(), "o.csv"), "--column", "domain", "--url", srv.URL, "--key", "enr_x")
	is.True(strings.HasPrefix(line, "enrichd: cannot use the server at ")) // the CLI's sentence first
	is.Equal(strings.Count(line, "enrichd:"), 1)                           // one prefix
}

// --rate-ip given as a rate alone takes a burst of twice the rate, and serve says so.
func TestRateWithoutBurstLogsTheBurst(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--db", newDB(t), "--addr", "127.0.0.1:0", "--rate-ip", "50", "--rate-key", "10/15"}, &stdout, &stderr)
	}()
	waitListening(t, &stderr, done)
	cancel()
	is.NoErr(<-done)
	var said []map[string]any
	for _, l := range lines(stderr.String()) {
		var entry map[string]any
		if json.Unmarshal([]byte(l), &entry) == nil && strings.Contains(fmt.Sprint(entry["msg"]), "without a burst") {
			said = append(said, entry)
		}
	}
	is.Equal(len(said), 1) // one line, for --rate-ip alone
	is.Equal(said[0]["flag"], "--rate-ip")
	is.Equal(said[0]["rate"], 50.0)
	is.Equal(said[0]["burst"], 100.0)

	help := mustCLI(t, "serve", "--help")
	contains(t, help, "a rate alone has a burst of twice it (50 is 50/100)")
}

// bench --help lists no flag bench ignores (its --db is the replicas scenario's
// PostgreSQL alone: the others use temporary databases of their own), and says which
// scenario a flag applies to when not all of them use it.
func TestBenchHelpSaysWhichScenarioUsesAFlag(t *testing.T) {
	t.Parallel()
	help := map[string]string{}
	for _, l := range lines(mustCLI(t, "bench", "--help")) {
		if f, ok := strings.CutPrefix(strings.TrimPrefix(strings.TrimSpace(l), "-h, "), "--"); ok {
			name, _, _ := strings.Cut(f, " ")
			help[name] = l
		}
	}
	for flag, want := range map[string]string{
		"duration":           "fair ignores it",
		"concurrency":        "fair: clients sending",
		"growth-tasks":       "growth scenario:",
		"fair-bulk":          "fair scenario:",
		"memory-load":        "memory scenario:",
		"memory-idle":        "memory scenario:",
		"serve-arg":          "memory scenario:",
		"db":                 "replicas scenario:",
		"replicas":           "replicas scenario:",
		"email-companies":    "email-quality scenario:",
		"email-names":        "email-quality scenario:",
		"rounds":             "peer scenario:",
		"waterfall-subjects": "waterfall scenario:",
		"tail-window":        "tail scenario:",
		"scenario":           "all but peer, growth",
		"workers":            "task workers",
		"json":               "JSON",
		"cpuprofile":         "CPU profile",
		"trace":              "execution trace",
		"help":               "help",
	} {
		contains(t, help[flag], want)
		delete(help, flag)
	}
	if len(help) > 0 {
		t.Errorf("bench has flags this test does not know, say which scenarios use them: %v", help)
	}
}

// Every list command prints a header row above its rows, and with --json a JSON array
// of objects: [] when there is nothing to list.
func TestListCommandsPrintAHeaderAndJSON(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	db := newDB(t)
	mustCLI(t, "keys", "create", "--org", "acme", "--name", "ci", "--db", db)
	mustCLI(t, "orgs", "create", "empty", "--db", db)
	mustCLI(t, "credits", "grant", "--org", "acme", "--amount", "5", "--db", db)
	mustCLI(t, "loops", "create", "--org", "acme", "--name", "Hooks", "--url", "http://127.0.0.1:9/hook", "--allow-private-webhooks", "--db", db)
	mustCLI(t, "loops", "test", "--org", "acme", "hooks", "--db", db)
	sdb := openStore(t, db)
	org, err := sdb.FindOrg(t.Context(), "acme")
	is.NoErr(err)
	is.NoErr(sdb.SeedTasks(t.Context(), org.ID, 2))

	for _, c := range []struct {
		args   []string
		header string
		rows   int
		field  string // a field every JSON object has
	}{
		{[]string{"orgs", "list"}, "NAME\tID\tCREATED", 2, "name"},
		{[]string{"keys", "list", "--org", "acme"}, "PREFIX\tID\tNAME\tCREATED\tSTATE", 1, "prefix"},
		{[]string{"tasks", "list", "--org", "acme"}, "ID\tCREATED\tOBJECT_TYPE\tSTATUS\tTARGET", 2, "status"},
		{[]string{"tasks", "list", "--org", "empty"}, "ID\tCREATED\tOBJECT_TYPE\tSTATUS\tTARGET", 0, ""},
		{[]string{"loops", "list", "--org", "acme"}, "ID\tSLUG\tOBJECT_TYPE\tSTATE\tURL", 1, "slug"},
		{[]string{"loops", "list", "--org", "empty"}, "ID\tSLUG\tOBJECT_TYPE\tSTATE\tURL", 0, ""},
		{[]string{"deliveries", "list", "--org", "acme", "--loop", "hooks"}, "ID\tEVENT\tSTATUS\tATTEMPTS\tNEXT_ATTEMPT\tLAST_STATUS_CODE\tLAST_ERROR", 1, "event"},
		{[]string{"credits", "ledger", "--org", "acme"}, "ID\tCREATED\tKIND\tAMOUNT\tGRANT\tTASK", 1, "kind"},
		{[]string{"credits", "ledger", "--org", "empty"}, "ID\tCREATED\tKIND\tAMOUNT\tGRANT\tTASK", 0, ""},
		{[]string{"sources", "fill", "--org", "acme"}, "OBJECT\tFIELDS", 2, "object"},
	} {
		args := append(c.args, "--db", db)
		table := lines(mustCLI(t, args...))
		is.Equal(table[0], c.header)    // the header row first
		is.Equal(len(table)-1, c.rows)  // then one line a row
		for _, row := range table[1:] { // as many fields as the header names
			is.Equal(strings.Count(row, "\t"), strings.Count(c.header, "\t"))
		}

		out := mustCLI(t, append(args, "--json")...)
		var objs []map[string]any
		is.NoErr(json.Unmarshal([]byte(out), &objs))
		is.Equal(len(objs), c.rows)
		is.True(strings.HasPrefix(out, "[")) // an array, [] when empty
		for _, o := range objs {
			_, ok := o[c.field]
			is.True(ok) // each object carries the field
		}
		is.True(!strings.Contains(out, "whsec_")) // no signing secret is listed
	}
}
