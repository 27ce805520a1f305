package dashboard_test

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

	"enrichd/server/servertest"

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
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	admin := e.SignIn("acme", "admin")

	created := admin.Post("/dashboard/settings/keys", url.Values{"name": {"crm"}})
	is.Equal(created.Status, http.StatusCreated)
	key := e.KeyByPrefix("acme", created.ShownSecret())
	is.Equal(admin.Post("/dashboard/settings/keys/"+key.ID+"/revoke", url.Values{}).Status, http.StatusSeeOther)
	tried := admin.Post("/dashboard/try", tryForm("company_domain", "domain", "Initech.com"))
	is.True(tried.Status < 400)

	entries := e.AuditEntries("")
	is.Equal(servertest.ActionsOf(entries), map[string]int{"key.created": 2, "user.added": 1, "user.signed_in": 1, "key.revoked": 1, "task.created": 1})
	signedIn := servertest.EntryOf(t, entries, "user.signed_in", "action", "user.signed_in")
	kind, name := servertest.ActorOf(signedIn)
	is.Equal([]any{kind, name}, []any{"user", "admin@acme.example"})
	made := servertest.EntryOf(t, entries, "key.created", "object_id", key.ID)
	kind, name = servertest.ActorOf(made)
	is.Equal([]any{kind, name}, []any{"user", "admin@acme.example"})
	is.Equal(made["request_id"], created.Header.Get("X-Request-Id"))
	kind, _ = servertest.ActorOf(servertest.EntryOf(t, entries, "key.revoked", "object_id", key.ID))
	is.Equal(kind, "user")
	try := servertest.EntryOf(t, entries, "task.created", "subject", "Initech.com")
	kind, name = servertest.ActorOf(try)
	is.Equal([]any{kind, name}, []any{"user", "admin@acme.example"})
	is.Equal(try["request_id"], tried.Header.Get("X-Request-Id"))

	p := admin.Get("/dashboard/audit")
	is.Equal(p.Status, http.StatusOK)
	is.True(p.Has(`<a href="/dashboard/audit" aria-current="page">Audit</a>`))
	for _, want := range []string{"Created an API key", "Revoked an API key", "Signed in", "Enriched", "<code>Initech.com</code>",
		"admin@acme.example", `id="audit-head"`, fmt.Sprintf("entry %d, hash", len(entries))} {
		if !p.Has(want) {
			t.Errorf("the Audit page does not show %q", want)
		}
	}
	is.True(strings.Index(p.Body, "Enriched") < strings.Index(p.Body, "Signed in")) // newest first

	filtered := admin.Get("/dashboard/audit?action=key.revoked")
	is.Equal(filtered.Status, http.StatusOK)
	is.Equal(strings.Count(filtered.Body, `class="audit-entry"`), 1)
	is.True(filtered.Has(`<option value="key.revoked" selected>`))
	about := admin.Get("/dashboard/audit?subject=" + url.QueryEscape("https://www.initech.com/"))
	is.Equal(strings.Count(about.Body, `class="audit-entry"`), 1)
	day := strings.Split(entries[0]["at"].(string), "T")[0]
	is.Equal(strings.Count(admin.Get("/dashboard/audit?from="+day+"&to="+day).Body, `class="audit-entry"`), len(entries))
	is.True(admin.Get("/dashboard/audit?to=2000-01-01").Has("No entry fits these filters"))

	for query, says := range map[string]string{
		"action=task.deleted":           "action must be one of",
		"from=yesterday":                "since",
		"from=2026-11-28&to=2026-11-01": "must be before",
		"subject=not+a+subject":         "domain",
		"page=0":                        "page must be an integer",
	} {
		r := admin.Get("/dashboard/audit?" + query)
		if r.Status != http.StatusBadRequest || !strings.Contains(html.UnescapeString(r.Body), says) {
			t.Errorf("/dashboard/audit?%s: %d, want 400 saying %q", query, r.Status, says)
		}
	}

	// A second page once there are more than fifty entries.
	ctx := context.Background()
	for i := range 50 {
		if _, err := e.DB.CreateTask(ctx, store.ByOperator, storetest.NewTask(e.OrgID, fmt.Sprintf("c%d.example", i))); err != nil {
			t.Fatal(err)
		}
	}
	first := admin.Get("/dashboard/audit")
	is.Equal(strings.Count(first.Body, `class="audit-entry"`), 50)
	is.True(first.Has(`<a href="/dashboard/audit?page=2" id="audit-next">Next page</a>`))
	second := admin.Get("/dashboard/audit?page=2")
	is.Equal(strings.Count(second.Body, `class="audit-entry"`), len(entries))
	is.True(second.Has(`<a href="/dashboard/audit">Previous page</a>`))
	is.True(!second.Has(`id="audit-next"`))

	// The download: the filter's entries as JSON Lines, oldest first.
	is.True(filtered.Has(`href="/dashboard/audit.jsonl?action=key.revoked"`))
	dl := admin.Get("/dashboard/audit.jsonl?action=key.created")
	is.Equal(dl.Status, http.StatusOK)
	is.Equal(dl.Header.Get("Content-Type"), "application/x-ndjson")
	var seqs []float64
	sc := bufio.NewScanner(strings.NewReader(dl.Body))
	for sc.Scan() {
		var en map[string]any
		is.NoErr(json.Unmarshal(sc.Bytes(), &en))
		is.Equal(en["action"], "key.created")
		seqs = append(seqs, en["seq"].(float64))
	}
	is.Equal(len(seqs), 2)
	is.True(seqs[0] < seqs[1])
	is.Equal(admin.Get("/dashboard/audit.jsonl?action=nope").Status, http.StatusBadRequest)

	// Another organization's user sees its own log alone.
	other := e.SignIn("globex", "viewer")
	theirs := other.Get("/dashboard/audit")
	is.Equal(theirs.Status, http.StatusOK)
	is.True(!theirs.Has("Initech.com") && !theirs.Has("admin@acme.example"))
	is.True(theirs.Has("viewer@globex.example"))
	is.Equal(e.NewBrowser().Get("/dashboard/audit").Status, http.StatusSeeOther) // signed out: to the sign-in page
}
