package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"enrichd/store"
	"enrichd/store/storetest"

	"github.com/matryer/is"
)

// TestDashboardAudit: what a user does in the dashboard (signing in, a key made and
// revoked, Try it) is recorded as theirs, with the request's id; the Audit page lists
// the organization's entries newest first, filters them as the API does (and refuses
// what the API refuses), pages them, and downloads them as JSON Lines; another
// organization's user sees none of them.
func TestDashboardAudit(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	admin := e.signIn("acme", "admin")

	created := admin.post("/dashboard/settings/keys", url.Values{"name": {"crm"}})
	is.Equal(created.status, http.StatusCreated)
	key := e.keyByPrefix("acme", created.shownSecret())
	is.Equal(admin.post("/dashboard/settings/keys/"+key.ID+"/revoke", url.Values{}).status, http.StatusSeeOther)
	tried := admin.post("/dashboard/try", tryForm("company_domain", "domain", "Initech.com"))
	is.True(tried.status < 400)

	entries := e.auditEntries("")
	is.Equal(actionsOf(entries), map[string]int{"key.created": 2, "user.added": 1, "user.signed_in": 1, "key.revoked": 1, "task.created": 1})
	signedIn := entryOf(t, entries, "user.signed_in", "action", "user.signed_in")
	kind, name := actorOf(signedIn)
	is.Equal([]any{kind, name}, []any{"user", "admin@acme.example"})
	made := entryOf(t, entries, "key.created", "object_id", key.ID)
	kind, name = actorOf(made)
	is.Equal([]any{kind, name}, []any{"user", "admin@acme.example"})
	is.Equal(made["request_id"], created.header.Get("X-Request-Id"))
	kind, _ = actorOf(entryOf(t, entries, "key.revoked", "object_id", key.ID))
	is.Equal(kind, "user")
	try := entryOf(t, entries, "task.created", "subject", "Initech.com")
	kind, name = actorOf(try)
	is.Equal([]any{kind, name}, []any{"user", "admin@acme.example"})
	is.Equal(try["request_id"], tried.header.Get("X-Request-Id"))

	p := admin.get("/dashboard/audit")
	is.Equal(p.status, http.StatusOK)
	is.True(p.has(`<a href="/dashboard/audit" aria-current="page">Audit</a>`))
	for _, want := range []string{"Created an API key", "Revoked an API key", "Signed in", "Enriched", "<code>Initech.com</code>",
		"admin@acme.example", `id="audit-head"`, fmt.Sprintf("entry %d, hash", len(entries))} {
		if !p.has(want) {
			t.Errorf("the Audit page does not show %q", want)
		}
	}
	is.True(strings.Index(p.body, "Enriched") < strings.Index(p.body, "Signed in")) // newest first

	filtered := admin.get("/dashboard/audit?action=key.revoked")
	is.Equal(filtered.status, http.StatusOK)
	is.Equal(strings.Count(filtered.body, `class="audit-entry"`), 1)
	is.True(filtered.has(`<option value="key.revoked" selected>`))
	about := admin.get("/dashboard/audit?subject=" + url.QueryEscape("https://www.initech.com/"))
	is.Equal(strings.Count(about.body, `class="audit-entry"`), 1)
	day := strings.Split(entries[0]["at"].(string), "T")[0]
	is.Equal(strings.Count(admin.get("/dashboard/audit?from="+day+"&to="+day).body, `class="audit-entry"`), len(entries))
	is.True(admin.get("/dashboard/audit?to=2000-01-01").has("No entry fits these filters"))

	for query, says := range map[string]string{
		"action=task.deleted":           "action must be one of",
		"from=yesterday":                "since",
		"from=2026-11-28&to=2026-11-01": "must be before",
		"subject=not+a+subject":         "domain",
		"page=0":                        "page must be an integer",
	} {
		r := admin.get("/dashboard/audit?" + query)
		if r.status != http.StatusBadRequest || !strings.Contains(html.UnescapeString(r.body), says) {
			t.Errorf("/dashboard/audit?%s: %d, want 400 saying %q", query, r.status, says)
		}
	}

	// A second page once there are more than fifty entries.
	ctx := context.Background()
	for i := range 50 {
		if _, err := e.db.CreateTask(ctx, store.ByOperator, storetest.NewTask(e.orgID, fmt.Sprintf("c%d.example", i))); err != nil {
			t.Fatal(err)
		}
	}
	first := admin.get("/dashboard/audit")
	is.Equal(strings.Count(first.body, `class="audit-entry"`), 50)
	is.True(first.has(`<a href="/dashboard/audit?page=2" id="audit-next">Next page</a>`))
	second := admin.get("/dashboard/audit?page=2")
	is.Equal(strings.Count(second.body, `class="audit-entry"`), len(entries))
	is.True(second.has(`<a href="/dashboard/audit">Previous page</a>`))
	is.True(!second.has(`id="audit-next"`))

	// The download: the filter's entries as JSON Lines, oldest first.
	is.True(filtered.has(`href="/dashboard/audit.jsonl?action=key.revoked"`))
	dl := admin.get("/dashboard/audit.jsonl?action=key.created")
	is.Equal(dl.status, http.StatusOK)
	is.Equal(dl.header.Get("Content-Type"), "application/x-ndjson")
	var seqs []float64
	sc := bufio.NewScanner(strings.NewReader(dl.body))
	for sc.Scan() {
		var en map[string]any
		is.NoErr(json.Unmarshal(sc.Bytes(), &en))
		is.Equal(en["action"], "key.created")
		seqs = append(seqs, en["seq"].(float64))
	}
	is.Equal(len(seqs), 2)
	is.True(seqs[0] < seqs[1])
	is.Equal(admin.get("/dashboard/audit.jsonl?action=nope").status, http.StatusBadRequest)

	// Another organization's user sees its own log alone.
	other := e.signIn("globex", "viewer")
	theirs := other.get("/dashboard/audit")
	is.Equal(theirs.status, http.StatusOK)
	is.True(!theirs.has("Initech.com") && !theirs.has("admin@acme.example"))
	is.True(theirs.has("viewer@globex.example"))
	is.Equal(e.newBrowser().get("/dashboard/audit").status, http.StatusSeeOther) // signed out: to the sign-in page
}
