package e2e

import (
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
)

// TestPrivacyReport runs privacy report, on each engine, after traffic through serve:
// it reads the sources and retention as serve would from the same flags and ENRICHD_*
// variables, says who receives what each source sends, and counts what the database
// holds. A refused flag opens no database.
func TestPrivacyReport(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			db := engineDB(t, engine)
			privacyReport(t, db)
		})
	}

	missing := newDBPath(t)
	contains(t, failCLI(t, "privacy", "report", "--sources", "dataset,nope", "--db", missing), `unknown source "nope"`)
	contains(t, failCLI(t, "privacy", "report", "--retain-records", "three years", "--db", missing), "--retain-records")
	contains(t, failCLI(t, "privacy", "report", "--db", missing), "no database at") // and none was made
}

// reportShown is what privacy report --json prints.
type reportShown struct {
	Database string
	Sources  []struct {
		Name, Recipient, URL string
		Sends                []string
		KeyEnv               string `json:"key_env"`
		KeySet               *bool  `json:"key_set"`
		OwnKeys              int64  `json:"organizations_with_own_key"`
	}
	Retention []struct {
		What, Setting, Kept, Note string
		Seconds                   *int64
	}
	Held map[string]int64
}

func privacyReport(t *testing.T, db string) {
	is := is.New(t)
	key := strings.TrimSpace(mustCLI(t, "keys", "create", "--org", "acme", "--db", db))
	mustCLI(t, "credits", "grant", "--org", "acme", "--amount", "100", "--db", db)
	mustCLI(t, "loops", "create", "--org", "acme", "--name", "CRM", "--object-type", "company", "--url", "http://127.0.0.1:9/hook",
		"--allow-private-webhooks", "--db", db)

	// Traffic: a company stored, an ambiguous address, the two people it gathered and
	// its company (asked once, and kept as any company is), a batch of two companies.
	// serve and the commands that write about people share a key file (on SQLite the
	// one beside the database would do; on PostgreSQL there is none unless given).
	keyFile := filepath.Join(t.TempDir(), "enrichd.secret-key")
	base, stop := serveWith(t, db, "--sources", "sim", "--secret-key-file", keyFile)
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	settle := func(path, body string) apiResponse {
		t.Helper()
		status, r, raw := call(t, client, http.MethodPost, base+path, key, body)
		if status != http.StatusOK && status != http.StatusAccepted {
			t.Fatalf("POST %s: %d %s", path, status, raw)
		}
		return waitSettled(t, client, base, key, r)
	}
	is.Equal(settle("/v1/companies/enrich", `{"domain":"globex.com"}`).Task.Status, "succeeded")
	var failure struct{ Code string }
	is.NoErr(json.Unmarshal(settle("/v1/people/enrich", `{"email":"edsger@acme.com"}`).Error, &failure))
	is.Equal(failure.Code, "ambiguous")
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/v1/batches?name=list.csv", strings.NewReader("domain\ninitech.com\numbrella.com\n"))
	is.NoErr(err)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "text/csv")
	res, err := client.Do(req)
	is.NoErr(err)
	res.Body.Close()
	is.Equal(res.StatusCode, http.StatusAccepted)
	for deadline := time.Now().Add(patience); ; {
		_, _, raw := call(t, client, http.MethodGet, base+"/v1/tasks?status=succeeded", key, "")
		var list struct{ Total int }
		is.NoErr(json.Unmarshal([]byte(raw), &list))
		if list.Total == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the batch's tasks did not succeed: %d of 3", list.Total)
		}
		time.Sleep(10 * time.Millisecond)
	}
	client.CloseIdleConnections()
	stop()
	// With serve stopped, a test event stays pending, and a watch is not checked yet.
	mustCLI(t, "loops", "test", "--org", "acme", "crm", "--db", db)
	mustCLI(t, "watches", "create", "--org", "acme", "--loop", "crm", "--domain", "globex.com", "--db", db, "--secret-key-file", keyFile)

	// The report, configured as serve would be: by the environment, and by flags that win.
	t.Setenv("ENRICHD_SOURCES", "dataset,web,pdl")
	t.Setenv("ENRICHD_RETAIN_CANDIDATES", "3d")
	t.Setenv("ENRICHD_RETAIN_RECORDS", "100d")
	t.Setenv("PDL_API_KEY", "pdl-installation-key")
	args := []string{"privacy", "report", "--db", db, "--retain-records", "400d", "--pdl-url", "https://pdl.example.test"}
	var r reportShown
	out := mustCLI(t, append(args, "--json")...)
	is.NoErr(json.Unmarshal([]byte(out), &r))
	if u, err := url.Parse(db); err == nil && u.User != nil {
		if password, ok := u.User.Password(); ok {
			is.True(!strings.Contains(out, password)) // the database's URL without its password
		}
	}

	var names []string
	for _, s := range r.Sources {
		names = append(names, s.Name)
	}
	is.Equal(names, []string{"dataset", "web", "pdl"})
	is.Equal(r.Sources[0].Recipient, "") // nothing leaves
	is.Equal(r.Sources[1].Recipient, "each company's own website")
	is.Equal(r.Sources[1].Sends, []string{"domain"})
	pdl := r.Sources[2]
	is.Equal([]string{pdl.Recipient, pdl.URL, pdl.KeyEnv}, []string{"People Data Labs", "https://pdl.example.test", "PDL_API_KEY"})
	is.Equal(pdl.Sends, []string{"domain", "company_url", "person_url", "email", "names"})
	is.True(pdl.KeySet != nil && *pdl.KeySet)
	is.True(!strings.Contains(out, "pdl-installation-key")) // whether it is set, never what it is

	kept := map[string]string{}
	for _, rule := range r.Retention {
		if rule.Setting != "" {
			kept[rule.Setting] = rule.Kept
		}
	}
	is.Equal(kept, map[string]string{"--retain": "90d", "--retain-records": "400d", "--retain-candidates": "3d", "the freshness window": "30d",
		"--retain-audit": "1095d"})

	is.Equal(r.Held, map[string]int64{
		"stored_companies": 4, "stored_people": 0, "dataset_companies": 0, "dataset_people": 0,
		"tasks": 4, "email_gatherings": 1, "email_candidates": 2,
		"deliveries": 1, "pending_deliveries": 1, "batches": 1, "batch_rows": 2,
		"watches": 1, "loops": 1, "hubspot_loops": 0, "hubspot_writes": 0, "source_misses": 0, "audit_entries": 7,
	})

	// The same as text, for people.
	text := mustCLI(t, args...)
	for _, want := range []string{
		"dataset  nothing leaves this installation",
		"web      to each company's own website: company domains",
		"pdl      to People Data Labs (https://pdl.example.test): company domains; company pages; profile URLs; work email addresses; name words",
		"installation key PDL_API_KEY: set; organizations with their own key: 0",
		"--retain-records      400d",
		"--retain-candidates   3d     profiles an ambiguous email lookup gathered",
		"--retain-audit        1095d  the audit log: who enriched, exported, erased or suppressed whom",
		"stored records                  4 companies, 0 people",
		"gathered profiles               2, for 1 ambiguous address",
		"webhook deliveries              1, 1 not yet sent",
		"batches                         1, with 2 rows",
		"audit log entries               7",
	} {
		contains(t, text, want)
	}
}
