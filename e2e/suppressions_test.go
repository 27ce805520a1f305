package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"enrichd/enrich"
	"enrichd/store/storetest"

	"github.com/matryer/is"
)

// TestSuppressionsFromTheCLI: the operator adds, lists and lifts an organization's
// suppressions and the installation's (--all-orgs), one at a time or from a CSV; the
// installation's hold for every organization; bad input is refused and changes
// nothing.
func TestSuppressionsFromTheCLI(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	db := newDB(t)
	mustCLI(t, "orgs", "create", "acme", "--db", db)
	mustCLI(t, "orgs", "create", "globex", "--db", db)

	var added struct {
		ID, Kind, Hint string
		AllOrgs        bool                  `json:"all_orgs"`
		AddedBy        struct{ Kind string } `json:"added_by"`
	}
	is.NoErr(json.Unmarshal([]byte(mustCLI(t, "suppressions", "add", "--org", "acme", "--email", "Jane.Doe@Acme.com", "--reason", "asked", "--db", db)), &added))
	is.Equal(added.Kind, "email")
	is.Equal(added.Hint, "J***@acme.com")
	is.Equal(added.AddedBy.Kind, "cli")
	is.True(!added.AllOrgs)
	contains(t, failCLI(t, "suppressions", "add", "--org", "acme", "--email", "jane.doe+x@acme.com", "--db", db), "already suppressed")

	var all struct{ ID string }
	is.NoErr(json.Unmarshal([]byte(mustCLI(t, "suppressions", "add", "--all-orgs", "--domain", "https://www.initech.com/", "--db", db)), &all))

	for _, bad := range [][]string{
		{"--org", "acme"}, // no subject
		{"--org", "acme", "--email", "a@acme.com", "--domain", "acme.com"},
		{"--org", "acme", "--email", "not an address"},
		{"--org", "acme", "--network-url", "https://www.linkedin.com/company/acme"},
		{"--org", "acme", "--email", "a@acme.com", "--reason", strings.Repeat("x", 501)},
		{"--email", "a@acme.com"}, // no scope
		{"--org", "acme", "--all-orgs", "--email", "a@acme.com"},
		{"--org", "nobody", "--email", "a@acme.com"},
	} {
		failCLI(t, append(append([]string{"suppressions", "add"}, bad...), "--db", db)...)
	}

	file := writeFile(t, "email,networkUrl,domain,reason,name\n,https://linkedin.com/in/John-Roe,,,John\njane.doe@acme.com,,,,Jane\n")
	var imported struct{ Added, Existing int }
	is.NoErr(json.Unmarshal([]byte(mustCLI(t, "suppressions", "add", "--org", "acme", "--csv", file, "--db", db)), &imported))
	is.Equal(imported.Added, 1)
	is.Equal(imported.Existing, 1)
	refused := failCLI(t, "suppressions", "add", "--org", "acme", "--csv", writeFile(t, "email\nok@acme.com\nbad\n"), "--db", db)
	contains(t, refused, "row 2 (line 3)")

	rows := tableRows(t, mustCLI(t, "suppressions", "list", "--org", "acme", "--db", db))
	is.Equal(len(rows), 2) // bad rows added nothing
	is.True(strings.Contains(rows[0], "profile\thttps://www.linkedin.com/in/j***\tcli"))
	is.True(strings.Contains(rows[1], "email\tJ***@acme.com\tcli"))
	is.Equal(len(tableRows(t, mustCLI(t, "suppressions", "list", "--org", "globex", "--db", db))), 0)
	installation := tableRows(t, mustCLI(t, "suppressions", "list", "--all-orgs", "--db", db))
	is.Equal(len(installation), 1)
	is.True(strings.HasPrefix(installation[0], all.ID+"\tdomain\ti***.com"))

	// The installation's entry holds for every organization; the organization's for
	// itself alone.
	st := openStore(t, db)
	for _, c := range []struct {
		org  string
		sub  enrich.Subject
		want bool
	}{
		{"acme", enrich.Subject{Kind: enrich.SubjectEmail, Value: "jane.doe@acme.com"}, true},
		{"globex", enrich.Subject{Kind: enrich.SubjectEmail, Value: "jane.doe@acme.com"}, false},
		{"globex", enrich.Subject{Kind: enrich.SubjectDomain, Value: "initech.com"}, true},
	} {
		org, err := st.FindOrg(t.Context(), c.org)
		is.NoErr(err)
		_, got, err := st.Suppressed(t.Context(), org.ID, c.sub)
		is.NoErr(err)
		is.Equal(got, c.want)
	}

	contains(t, failCLI(t, "suppressions", "remove", all.ID, "--org", "acme", "--db", db), "suppression not found")
	contains(t, failCLI(t, "suppressions", "remove", added.ID, "--org", "globex", "--db", db), "suppression not found")
	contains(t, failCLI(t, "suppressions", "remove", "nope", "--org", "acme", "--db", db), "suppression not found")
	contains(t, failCLI(t, "suppressions", "list", "--org", "acme", "--page", "-1", "--db", db), "--page must be from 0 to")
	contains(t, failCLI(t, "suppressions", "list", "--org", "acme", "--page", "100000", "--db", db), "--page must be from 0 to")
	contains(t, failCLI(t, "erasures", "--org", "acme", "--page", "100000", "--db", db), "--page must be from 0 to")
	contains(t, mustCLI(t, "suppressions", "remove", all.ID, "--all-orgs", "--db", db), "lifted the suppression of i***.com (domain)")
	contains(t, mustCLI(t, "suppressions", "remove", added.ID, "--org", "acme", "--db", db), "lifted the suppression of J***@acme.com")
	is.Equal(len(tableRows(t, mustCLI(t, "suppressions", "list", "--org", "acme", "--db", db))), 1)
}

// TestTheSecretKeyFileIsRequiredOnPostgres: on PostgreSQL serve, and every command
// that writes or checks data about people, refuse to run without --secret-key-file,
// naming it, and change nothing; with it they run. A database whose people were
// hashed under one key file refuses another.
func TestTheSecretKeyFileIsRequiredOnPostgres(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	db := storetest.PostgresURL(t)
	mustCLI(t, "orgs", "create", "acme", "--db", db)
	dataset := writeFile(t, `{"type":"company","name":"Acme","domain":"acme.com"}`+"\n")
	for _, args := range [][]string{
		{"suppressions", "add", "--org", "acme", "--email", "jane@acme.com"},
		{"import", dataset},
	} {
		err := failCLI(t, append(args, "--db", db)...)
		contains(t, err, "--secret-key-file is required with PostgreSQL")
	}
	contains(t, runServeExpectError(t, "serve", "--db", db, "--addr", "127.0.0.1:0"), "--secret-key-file is required with PostgreSQL")
	is.Equal(len(tableRows(t, mustCLI(t, "suppressions", "list", "--org", "acme", "--db", db))), 0)

	keyFile := filepath.Join(t.TempDir(), "enrichd.secret-key")
	mustCLI(t, "suppressions", "add", "--org", "acme", "--email", "jane@acme.com", "--db", db, "--secret-key-file", keyFile)
	mustCLI(t, "import", dataset, "--db", db, "--secret-key-file", keyFile)
	is.Equal(len(tableRows(t, mustCLI(t, "suppressions", "list", "--org", "acme", "--db", db))), 1)

	other := filepath.Join(t.TempDir(), "other.secret-key")
	err := failCLI(t, "suppressions", "add", "--org", "acme", "--email", "john@acme.com", "--db", db, "--secret-key-file", other)
	contains(t, err, "another secret key file")
	contains(t, runServeExpectError(t, "serve", "--db", db, "--addr", "127.0.0.1:0", "--secret-key-file", other), "another secret key file")
}
