package e2e

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/matryer/is"

	"enrichd/cli"
	"enrichd/store/storetest"
)

// runCLIWithInput runs the real program with args and stdin as its standard input.
func runCLIWithInput(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := cli.NewRootCommand(cli.Program{Schema: schema, Version: version}, &out, &errOut)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetArgs(args)
	err = cmd.ExecuteContext(t.Context())
	return out.String(), errOut.String(), err
}

// keyVendor is a fake PDL that takes one key: its company enrichment answers 404 (a
// company it does not know, which is what the key check asks) to it and 401 to any
// other, as PDL does.
type keyVendor struct {
	*httptest.Server
	mu   sync.Mutex
	sent []string
}

func newKeyVendor(t *testing.T, good string) *keyVendor {
	v := &keyVendor{}
	v.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("X-Api-Key")
		v.mu.Lock()
		v.sent = append(v.sent, r.URL.Path+" "+key)
		v.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if key != good {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"status": 401, "error": {"type": "authentication_error", "message": "Invalid API key"}}`))
			return
		}
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"status": 404, "error": {"type": "not_found", "message": "No records were found matching your request"}}`))
	}))
	t.Cleanup(v.Close)
	return v
}

func (v *keyVendor) requests() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.sent...)
}

// notInFiles fails the test when secret is in any file of dir (the database, its
// write-ahead log, the key file).
func notInFiles(t *testing.T, dir, secret string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("%s holds the key in clear", e.Name())
		}
	}
}

func TestSourcesSetKey(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	const good, bad = "pdl-org-key-5e1f0c9a1234", "pdl-wrong-key-77770000"
	vendor := newKeyVendor(t, good)
	dir := t.TempDir()
	db := filepath.Join(dir, "enrichd.db")
	mustCLI(t, "orgs", "create", "acme", "--db", db)
	setKey := []string{"sources", "set-key", "--org", "acme", "pdl", "--db", db, "--pdl-url", vendor.URL}

	// A key the vendor refuses is not stored.
	out, errOut, err := runCLIWithInput(t, bad+"\n", setKey...)
	is.True(err != nil)
	contains(t, err.Error(), "pdl refused the key, so it was not stored")
	is.True(!strings.Contains(err.Error()+out+errOut, bad))
	is.Equal(len(tableRows(t, mustCLI(t, "sources", "keys", "--org", "acme", "--db", db))), 0)

	// A good one is checked with one call, stored sealed and shown by its last 4.
	out, errOut, err = runCLIWithInput(t, good+"\n", setKey...)
	is.NoErr(err)
	contains(t, out, "organization acme now uses its own key …1234")
	contains(t, out, "never: its tasks skip pdl while its key is failing")
	is.True(!strings.Contains(out+errOut, good))
	reqs := vendor.requests()
	is.Equal(reqs[len(reqs)-1], "/v5/company/enrich "+good)
	rows := tableRows(t, mustCLI(t, "sources", "keys", "--org", "acme", "--db", db))
	is.Equal(len(rows), 1)
	is.True(strings.HasPrefix(rows[0], "pdl\t…1234\tno\tok\t"))
	info, err := os.Stat(db + ".secret-key")
	is.NoErr(err)
	is.Equal(info.Mode().Perm(), os.FileMode(0o600))
	contains(t, errOut, "created the secret key file")
	notInFiles(t, dir, good)

	// Set again with the fallback allowed: the key file is the same one.
	out, errOut, err = runCLIWithInput(t, good, append(setKey, "--allow-fallback")...)
	is.NoErr(err)
	contains(t, out, "the installation's key is used for it while its own key is failing")
	is.True(!strings.Contains(errOut, "created the secret key file"))
	contains(t, mustCLI(t, "sources", "keys", "--org", "acme", "--db", db, "--json"), `"allow_fallback": true`)

	// Refusals: no key, a key with a space, a source that takes none, an unknown org.
	for _, c := range []struct{ stdin, want string }{
		{"", "no key on standard input"},
		{"  \n", "no key on standard input"},
		{"two words\n", "spaces or control characters"},
		{strings.Repeat("k", 5000), "longer than 4096 bytes"},
	} {
		_, _, err := runCLIWithInput(t, c.stdin, setKey...)
		is.True(err != nil)
		contains(t, err.Error(), c.want)
	}
	_, _, err = runCLIWithInput(t, good, "sources", "set-key", "--org", "acme", "web", "--db", db)
	contains(t, err.Error(), `"web" takes no API key`)
	_, _, err = runCLIWithInput(t, good, "sources", "set-key", "--org", "nobody", "pdl", "--db", db)
	contains(t, err.Error(), "nobody")

	// A key file others may read is refused, never used.
	is.NoErr(os.Chmod(db+".secret-key", 0o644))
	_, _, err = runCLIWithInput(t, good, setKey...)
	contains(t, err.Error(), "may be read by others")
	is.NoErr(os.Chmod(db+".secret-key", 0o600))

	contains(t, mustCLI(t, "sources", "clear-key", "--org", "acme", "pdl", "--db", db), "pdl: organization acme uses the installation's key again")
	contains(t, failCLI(t, "sources", "clear-key", "--org", "acme", "pdl", "--db", db), "organization acme has no key of its own for pdl")
	is.Equal(len(tableRows(t, mustCLI(t, "sources", "keys", "--org", "acme", "--db", db))), 0)
	notInFiles(t, dir, good)
}

// On PostgreSQL there is no file beside the database to keep the secret key in, and
// every replica must seal with the same one: set-key without --secret-key-file is
// refused before the key is read or checked, and stores nothing; with it, the file
// is created, mode 0600, and the key stored.
func TestSourceKeyFileIsRequiredOnPostgres(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	const good = "pdl-org-key-on-postgres-4c4c"
	vendor := newKeyVendor(t, good)
	db := storetest.PostgresURL(t)
	mustCLI(t, "orgs", "create", "acme", "--db", db)
	setKey := []string{"sources", "set-key", "--org", "acme", "pdl", "--db", db, "--pdl-url", vendor.URL}

	out, errOut, err := runCLIWithInput(t, good+"\n", setKey...)
	is.True(err != nil)
	contains(t, err.Error(), "--secret-key-file is required with PostgreSQL")
	is.True(!strings.Contains(err.Error()+out+errOut, good))
	is.Equal(len(vendor.requests()), 0) // not checked with the vendor either
	is.Equal(len(tableRows(t, mustCLI(t, "sources", "keys", "--org", "acme", "--db", db))), 0)

	keyFile := filepath.Join(t.TempDir(), "enrichd.secret-key")
	out, errOut, err = runCLIWithInput(t, good+"\n", append(setKey, "--secret-key-file", keyFile)...)
	is.NoErr(err)
	contains(t, out, "organization acme now uses its own key …4c4c")
	contains(t, errOut, "created the secret key file")
	info, err := os.Stat(keyFile)
	is.NoErr(err)
	is.Equal(info.Mode().Perm(), os.FileMode(0o600))
	rows := tableRows(t, mustCLI(t, "sources", "keys", "--org", "acme", "--db", db))
	is.Equal(len(rows), 1)
	is.True(strings.HasPrefix(rows[0], "pdl\t…4c4c\t"))
}
