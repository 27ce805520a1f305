package e2e

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/matryer/is"
)

// setupToken finds the set-password link in a command's output, checks it is built
// on base, and returns its token.
func setupToken(t *testing.T, out, base string) string {
	t.Helper()
	for _, l := range lines(out) {
		if !strings.Contains(l, "/dashboard/setup?") {
			continue
		}
		u, err := url.Parse(l)
		if err != nil {
			t.Fatalf("link %q: %v", l, err)
		}
		if !strings.HasPrefix(l, base+"/dashboard/setup?token=") {
			t.Fatalf("link %q is not on %s", l, base)
		}
		return u.Query().Get("token")
	}
	t.Fatalf("no set-password link in %q", out)
	return ""
}

func TestUsersCreatePrintsALinkThatSetsThePassword(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	db := newDB(t)
	mustCLI(t, "orgs", "create", "acme", "--db", db)

	out := mustCLI(t, "users", "create", "--org", "acme", "--email", "Jane@Acme.com", "--role", "admin", "--db", db)
	contains(t, out, "jane@acme.com (admin)")
	contains(t, out, "valid 24 h")
	contains(t, out, "single use")
	token := setupToken(t, out, "http://127.0.0.1:8080") // serve's default address

	st := openStore(t, db)
	u, err := st.LinkUser(t.Context(), token)
	is.NoErr(err)
	is.Equal(u.Email, "jane@acme.com")
	is.Equal(u.Role, store.RoleAdmin)
	is.Equal(u.OrgName, "acme")
	_, err = st.SetPassword(t.Context(), token, "$argon2id$x")
	is.NoErr(err)
	_, err = st.LinkUser(t.Context(), token)
	is.Equal(enrich.KindOf(err), enrich.KindNotFound) // used

	out = mustCLI(t, "users", "create", "--org", "acme", "--email", "bob@acme.com", "--public-url", "https://enrichd.example.com/", "--db", db)
	contains(t, out, "bob@acme.com (viewer)") // the default role
	token = setupToken(t, out, "https://enrichd.example.com")
	_, err = st.LinkUser(t.Context(), token)
	is.NoErr(err)
}

func TestUsersCreateRefusals(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	mustCLI(t, "orgs", "create", "acme", "--db", db)
	mustCLI(t, "users", "create", "--org", "acme", "--email", "jane@acme.com", "--db", db)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--org", "nope", "--email", "bob@acme.com"}, `no organization named "nope"`},
		{[]string{"--org", "acme", "--email", "JANE@acme.com"}, "already exists"},
		{[]string{"--org", "acme", "--email", "bob"}, "not a plain email address"},
		{[]string{"--org", "acme", "--email", "b\xffob@acme.com"}, "email is not valid UTF-8"},
		{[]string{"--org", "acme", "--email", "bo\x85b@acme.com"}, "email is not valid UTF-8"},
		{[]string{"--org", "acme", "--email", "bo\u0085b@acme.com"}, "email holds a control character"},
		{[]string{"--org", "acme", "--email", "bob@acme.com", "--role", "owner"}, `role "owner" must be admin or viewer`},
		{[]string{"--org", "acme", "--email", "bob@acme.com", "--public-url", "ftp://x"}, "--public-url"},
		{[]string{"--org", "acme", "--email", "bob@acme.com", "--public-url", "enrichd.example.com"}, "--public-url"},
		{[]string{"--org", "acme"}, `"email" not set`},
	} {
		msg := failCLI(t, append(append([]string{"users", "create"}, c.args...), "--db", db)...)
		contains(t, msg, c.want)
	}
	rows := tableRows(t, mustCLI(t, "users", "list", "--db", db))
	if len(rows) != 1 {
		t.Fatalf("users after the refusals: %q", rows)
	}
}

// TestUsersPublicURLFromTheEnvironment uses t.Setenv, so it does not run in parallel.
func TestUsersPublicURLFromTheEnvironment(t *testing.T) {
	db := newDB(t)
	mustCLI(t, "orgs", "create", "acme", "--db", db)
	t.Setenv("ENRICHD_PUBLIC_URL", "https://dash.example.com/enrichd/")
	out := mustCLI(t, "users", "create", "--org", "acme", "--email", "jane@acme.com", "--db", db)
	setupToken(t, out, "https://dash.example.com/enrichd")
	out = mustCLI(t, "users", "reset-password", "--email", "jane@acme.com", "--public-url", "http://10.0.0.5:8080", "--db", db)
	setupToken(t, out, "http://10.0.0.5:8080") // the flag wins
}

func TestUsersList(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	db := newDB(t)
	mustCLI(t, "orgs", "create", "acme", "--db", db)
	mustCLI(t, "orgs", "create", "beta", "--db", db)
	is.Equal(len(tableRows(t, mustCLI(t, "users", "list", "--db", db))), 0)
	is.Equal(strings.TrimSpace(mustCLI(t, "users", "list", "--json", "--db", db)), "[]")

	out := mustCLI(t, "users", "create", "--org", "acme", "--email", "jane@acme.com", "--role", "admin", "--db", db)
	janeLink := setupToken(t, out, "http://127.0.0.1:8080")
	mustCLI(t, "users", "create", "--org", "acme", "--email", "bob@acme.com", "--db", db)
	mustCLI(t, "users", "create", "--org", "beta", "--email", "amy@beta.io", "--db", db)
	st := openStore(t, db)
	jane, err := st.SetPassword(t.Context(), janeLink, "$argon2id$x")
	is.NoErr(err)
	_, err = st.CreateSession(t.Context(), store.BySystem, jane.ID, time.Hour)
	is.NoErr(err)
	mustCLI(t, "users", "disable", "--email", "amy@beta.io", "--db", db)

	rows := tableRows(t, mustCLI(t, "users", "list", "--db", db))
	is.Equal(len(rows), 3)
	cells := func(row string) []string { return strings.Split(row, "\t") }
	is.Equal(cells(rows[0])[:4], []string{"bob@acme.com", "acme", "viewer", "no password yet"}) // by organization, then email
	is.Equal(cells(rows[0])[5], "never")
	is.Equal(cells(rows[1])[:4], []string{"jane@acme.com", "acme", "admin", "active"})
	is.True(cells(rows[1])[5] != "never") // jane has signed in
	is.Equal(cells(rows[2])[:3], []string{"amy@beta.io", "beta", "viewer"})
	is.True(strings.HasPrefix(cells(rows[2])[3], "disabled 20"))

	rows = tableRows(t, mustCLI(t, "users", "list", "--org", "beta", "--db", db))
	is.Equal(len(rows), 1)
	is.True(strings.HasPrefix(rows[0], "amy@beta.io\t"))
	contains(t, failCLI(t, "users", "list", "--org", "nope", "--db", db), `no organization named "nope"`)

	var listed []store.User
	is.NoErr(json.Unmarshal([]byte(mustCLI(t, "users", "list", "--org", "acme", "--json", "--db", db)), &listed))
	is.Equal(len(listed), 2)
	is.Equal(listed[1].Email, "jane@acme.com")
	is.Equal(listed[1].OrgName, "acme")
	is.Equal(listed[1].Role, "admin")
	is.True(listed[1].PasswordSet && listed[1].LastLoginAt != nil && listed[1].DisabledAt == nil)
	is.True(!listed[0].PasswordSet && listed[0].LastLoginAt == nil)
	var raw []map[string]any // the names the JSON uses
	is.NoErr(json.Unmarshal([]byte(mustCLI(t, "users", "list", "--org", "beta", "--json", "--db", db)), &raw))
	is.Equal(raw[0]["email"], "amy@beta.io")
	is.Equal(raw[0]["org_name"], "beta")
	is.Equal(raw[0]["password_set"], false)
	is.True(raw[0]["disabled_at"] != nil)
	_, hasHash := raw[0]["password_hash"]
	is.True(!hasHash)
}

func TestUsersDisable(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	db := newDB(t)
	mustCLI(t, "orgs", "create", "acme", "--db", db)
	out := mustCLI(t, "users", "create", "--org", "acme", "--email", "jane@acme.com", "--db", db)
	st := openStore(t, db)
	jane, err := st.SetPassword(t.Context(), setupToken(t, out, "http://127.0.0.1:8080"), "$argon2id$x")
	is.NoErr(err)
	session, err := st.CreateSession(t.Context(), store.BySystem, jane.ID, time.Hour)
	is.NoErr(err)

	contains(t, mustCLI(t, "users", "disable", "--email", "Jane@acme.com", "--db", db), "disabled jane@acme.com")
	_, err = st.SessionUser(t.Context(), session, time.Hour)
	is.Equal(enrich.KindOf(err), enrich.KindUnauthorized) // signed out at once
	_, _, err = st.UserForLogin(t.Context(), "jane@acme.com")
	is.Equal(enrich.KindOf(err), enrich.KindUnauthorized) // and cannot sign in again
	contains(t, failCLI(t, "users", "reset-password", "--email", "jane@acme.com", "--db", db), "is disabled")
	contains(t, failCLI(t, "users", "disable", "--email", "nobody@acme.com", "--db", db), `no user with email "nobody@acme.com"`)
}

func TestUsersResetPasswordVoidsTheOldLink(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	db := newDB(t)
	mustCLI(t, "orgs", "create", "acme", "--db", db)
	out := mustCLI(t, "users", "create", "--org", "acme", "--email", "jane@acme.com", "--db", db)
	old := setupToken(t, out, "http://127.0.0.1:8080")

	out = mustCLI(t, "users", "reset-password", "--email", "jane@acme.com", "--db", db)
	contains(t, out, "valid 24 h")
	fresh := setupToken(t, out, "http://127.0.0.1:8080")
	is.True(fresh != old)
	st := openStore(t, db)
	_, err := st.LinkUser(t.Context(), old)
	is.Equal(enrich.KindOf(err), enrich.KindNotFound)
	u, err := st.LinkUser(t.Context(), fresh)
	is.NoErr(err)
	is.Equal(u.Email, "jane@acme.com")
	contains(t, failCLI(t, "users", "reset-password", "--email", "nobody@acme.com", "--db", db), `no user with email "nobody@acme.com"`)
}

// The users commands work on an existing deployment only: a mistyped --db is an
// error naming it, and no database is left behind.
func TestUsersCommandsNeedAnExistingDatabase(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"users", "create", "--org", "acme", "--email", "jane@acme.com"},
		{"users", "list"},
		{"users", "disable", "--email", "jane@acme.com"},
		{"users", "reset-password", "--email", "jane@acme.com"},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "typo.db")
			contains(t, failCLI(t, append(args, "--db", db)...), "no database at "+db)
			if _, err := os.Stat(db); !os.IsNotExist(err) {
				t.Errorf("%s: a database was created", db)
			}
		})
	}
}
