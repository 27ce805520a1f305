package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"

	"github.com/matryer/is"
)

// TestErasingAndExportingFromTheCLI: the operator exports what an organization holds
// on a person (an imported record, found by the address on it), erases them for that
// organization (the record goes, they are suppressed for it alone), then across every
// organization (--all-orgs: suppressed for the installation), and lists both
// erasures; bad input is refused and changes nothing.
func TestErasingAndExportingFromTheCLI(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	db := newDB(t)
	mustCLI(t, "orgs", "create", "acme", "--db", db)
	mustCLI(t, "orgs", "create", "globex", "--db", db)
	mustCLI(t, "import", writeFile(t, `{"type":"person","network_url":"https://www.linkedin.com/in/jane-doe","full_name":"Jane Doe",`+
		`"headline":"Head of Rockets","emails":["jane@acme.com"]}`+"\n"), "--db", db)

	var x struct {
		Identifiers struct {
			Emails      []string
			NetworkURLs []string `json:"networkUrls"`
		}
		Records    []map[string]any
		Suppressed bool
	}
	is.NoErr(json.Unmarshal([]byte(mustCLI(t, "export", "--org", "acme", "--email", "Jane@Acme.com", "--db", db)), &x))
	is.Equal(x.Identifiers.NetworkURLs, []string{"https://www.linkedin.com/in/jane-doe"})
	is.Equal(len(x.Records), 1)
	is.Equal(x.Records[0]["origin"], "dataset")
	is.True(!x.Suppressed)

	for _, bad := range [][]string{
		{"--org", "acme"}, // no person
		{"--org", "acme", "--email", "jane@acme.com", "--network-url", "https://www.linkedin.com/in/jane-doe"},
		{"--org", "acme", "--email", "not an address"},
		{"--org", "acme", "--network-url", "https://www.linkedin.com/company/acme"},
		{"--email", "jane@acme.com"}, // no scope
		{"--org", "acme", "--all-orgs", "--email", "jane@acme.com"},
		{"--org", "nobody", "--email", "jane@acme.com"},
	} {
		failCLI(t, append(append([]string{"erase"}, bad...), "--db", db)...)
		failCLI(t, append(append([]string{"export"}, bad...), "--db", db)...)
	}
	is.Equal(len(tableRows(t, mustCLI(t, "erasures", "--org", "acme", "--db", db))), 0) // nothing was erased

	var er struct {
		ID, Kind, Hint string
		AllOrgs        bool                  `json:"all_orgs"`
		Removed        map[string]int64      `json:"removed"`
		CompletedAt    *string               `json:"completed_at"`
		RequestedBy    struct{ Kind string } `json:"requested_by"`
	}
	out := mustCLI(t, "erase", "--org", "acme", "--email", "jane@acme.com", "--db", db)
	is.NoErr(json.Unmarshal([]byte(out), &er))
	is.Equal(er.Hint, "j***@acme.com")
	is.Equal(er.RequestedBy.Kind, "cli")
	is.Equal(er.Removed["records"], int64(1)) // the imported record, found by the address on it
	is.True(er.CompletedAt != nil)            // no Loop to tell: completed, the file scrubbed
	is.True(!strings.Contains(out, "jane"))

	st := openStore(t, db)
	jane := enrich.Subject{Kind: enrich.SubjectProfile, Value: "https://www.linkedin.com/in/jane-doe"}
	suppressed := func(org string) bool {
		t.Helper()
		o, err := st.FindOrg(t.Context(), org)
		is.NoErr(err)
		_, got, err := st.Suppressed(t.Context(), o.ID, jane)
		is.NoErr(err)
		return got
	}
	is.True(suppressed("acme"))
	is.True(!suppressed("globex"))
	is.NoErr(json.Unmarshal([]byte(mustCLI(t, "export", "--org", "acme", "--network-url", jane.Value, "--db", db)), &x))
	is.Equal(len(x.Records), 0)
	is.True(x.Suppressed)

	is.NoErr(json.Unmarshal([]byte(mustCLI(t, "erase", "--all-orgs", "--network-url", jane.Value, "--db", db)), &er))
	is.True(er.AllOrgs)
	// The installation's suppression, seen by this process within half a second of the
	// CLI's commit (the file's data version).
	deadline := time.Now().Add(patience)
	for !suppressed("globex") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	is.True(suppressed("globex"))
	rows := tableRows(t, mustCLI(t, "erasures", "--org", "acme", "--db", db))
	is.Equal(len(rows), 1)
	is.True(strings.Contains(rows[0], "j***@acme.com\tcli"))
	is.True(strings.Contains(rows[0], "records=1"))
	installation := tableRows(t, mustCLI(t, "erasures", "--all-orgs", "--db", db))
	is.Equal(len(installation), 1)
	is.True(strings.HasPrefix(installation[0], er.ID+"\thttps://www.linkedin.com/in/j***"))
	is.Equal(len(tableRows(t, mustCLI(t, "erasures", "--org", "globex", "--db", db))), 0)
}
