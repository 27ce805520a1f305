package e2e

import (
	"database/sql"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"enrichd/store"

	"github.com/matryer/is"
	_ "modernc.org/sqlite" // database/sql "sqlite": another client of the file
)

// TestAuditVerifyFromTheCLI: what the operator does on the CLI (an export, an erasure)
// is recorded as the operator's; `enrichd audit verify` walks the chains, the erased
// person's entries blanked, and passes; a row changed with another SQLite client, then
// a row removed, make it fail naming the first bad entry.
func TestAuditVerifyFromTheCLI(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	db := newDB(t)
	mustCLI(t, "orgs", "create", "acme", "--db", db)
	mustCLI(t, "keys", "create", "--org", "globex", "--name", "crm", "--db", db)
	mustCLI(t, "import", writeFile(t, `{"type":"person","network_url":"https://www.linkedin.com/in/jane-doe","full_name":"Jane Doe",`+
		`"emails":["jane@acme.com"]}`+"\n"), "--db", db)
	mustCLI(t, "export", "--org", "acme", "--email", "jane@acme.com", "--db", db)
	var er struct{ ID string }
	is.NoErr(json.Unmarshal([]byte(mustCLI(t, "erase", "--org", "acme", "--email", "jane@acme.com", "--db", db)), &er))

	st := openStore(t, db)
	acme, err := st.FindOrg(t.Context(), "acme")
	is.NoErr(err)
	entries, _, err := st.ListAudit(t.Context(), acme.ID, store.AuditFilter{}, 0, 100)
	is.NoErr(err)
	is.Equal(entries[0].Action, store.AuditPersonErased)
	is.Equal(*entries[0].ObjectID, er.ID)
	is.Equal(entries[1].Action, store.AuditPersonExported)
	is.True(entries[1].Erased) // its subject blanked by the erasure that followed
	for _, e := range entries[:2] {
		is.Equal(e.Actor.Kind, store.ActorCLI)
	}
	globex, err := st.FindOrg(t.Context(), "globex")
	is.NoErr(err)
	theirs, _, err := st.ListAudit(t.Context(), globex.ID, store.AuditFilter{}, 0, 100)
	is.NoErr(err)
	is.Equal(len(theirs), 1)
	is.Equal(theirs[0].Action, store.AuditKeyCreated)
	is.Equal(theirs[0].Actor.Kind, store.ActorCLI)

	out := mustCLI(t, "audit", "verify", "--db", db)
	contains(t, out, "acme")
	contains(t, out, "1 subjects erased")
	is.Equal(strings.Count(out, "ok: "), 2) // acme's chain and globex's
	is.True(!strings.Contains(out, "jane"))
	var chains []struct {
		Org     string
		Entries int64
		Bad     *store.AuditProblem
	}
	is.NoErr(json.Unmarshal([]byte(mustCLI(t, "audit", "verify", "--org", "acme", "--json", "--db", db)), &chains))
	is.Equal(len(chains), 1)
	is.Equal(chains[0].Entries, int64(len(entries)))
	is.Equal(chains[0].Bad, nil)

	raw, err := sql.Open("sqlite", db)
	is.NoErr(err)
	defer raw.Close()
	exported := entries[1].Seq
	_, err = raw.Exec(`UPDATE audit_log SET actor_kind = 'system' WHERE org_id = ? AND seq = ?`, acme.ID, exported)
	is.NoErr(err)
	msg := failCLI(t, "audit", "verify", "--db", db)
	contains(t, msg, "an audit chain does not verify")
	out, _, _ = runCLI(t, "audit", "verify", "--db", db)
	contains(t, out, "acme")
	contains(t, out, "FAILED at entry "+strconv.FormatInt(exported, 10)+": entry "+strconv.FormatInt(exported, 10)+" was changed")
	contains(t, out, "globex") // the other chain still verifies
	is.Equal(strings.Count(out, "ok: "), 1)

	_, err = raw.Exec(`UPDATE audit_log SET actor_kind = 'cli' WHERE org_id = ? AND seq = ?`, acme.ID, exported)
	is.NoErr(err)
	mustCLI(t, "audit", "verify", "--db", db) // as it was
	_, err = raw.Exec(`DELETE FROM audit_log WHERE org_id = ? AND seq = ?`, acme.ID, exported)
	is.NoErr(err)
	failCLI(t, "audit", "verify", "--db", db)
	out, _, _ = runCLI(t, "audit", "verify", "--org", "acme", "--db", db)
	contains(t, out, "FAILED at entry "+strconv.FormatInt(exported, 10)+": entry "+strconv.FormatInt(exported, 10)+" is missing: it was removed")
}
