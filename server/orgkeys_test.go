package server_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/enrich/source"
	"enrichd/secret"
	"enrichd/server"
	"enrichd/server/servertest"
	"enrichd/store"

	"github.com/matryer/is"
)

// TestAnOrganizationsOwnKey goes through the real handler and workers: an
// organization's own PDL key is sent for its tasks and the installation's for
// another's; what its key fetched is served from the store to it alone, while what
// the installation's key fetched is served to both; a key the vendor refuses is
// marked failing, and the organization's tasks then skip pdl, or use the
// installation's key once it allows the fallback; the key is in no log line, no
// response and not in the database in clear.
func TestAnOrganizationsOwnKey(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	const installKey, ownKey = "pdl-install-key-00aa11bb", "pdl-acme-own-key-7c6d5e4f"
	vendor := servertest.NewByKeyPDL(t, installKey, ownKey)
	box, _, err := secret.LoadOrCreate(filepath.Join(t.TempDir(), "secret-key"))
	is.NoErr(err)
	e := servertest.NewEnv(t, func(c *server.Config) {
		pdl, err := source.NewPDL(source.VendorConfig{APIKey: installKey, BaseURL: vendor.URL, Rate: 1000, Burst: 1000, Backoff: time.Millisecond, Logger: c.Logger})
		if err != nil {
			t.Fatal(err)
		}
		c.Sources = []enrich.Source{pdl}
		c.Secrets = box
		c.OrgKeyRefresh = 20 * time.Millisecond
	})
	betaKey, betaID := e.NewOrg("beta", 100)
	asBeta := []string{"Authorization", "Bearer " + betaKey}
	sealed, err := box.Seal([]byte(ownKey), server.SourceKeyLabel(e.OrgID, "pdl"))
	is.NoErr(err)
	is.NoErr(e.DB.SetSourceKey(ctx, e.OrgID, "pdl", sealed, box.ID(), secret.Last4(ownKey), false))
	e.StartWorkers()
	var responses bytes.Buffer
	enrichAs := func(domain string, headers ...string) (*servertest.Response, *store.Task) {
		t.Helper()
		r := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": domain}, headers...)
		responses.Write(r.Raw)
		if r.Status == 202 {
			r = e.WaitSettled(r.Str("task.id"), headers...)
			responses.Write(r.Raw)
		}
		org := e.OrgID
		if len(headers) > 0 {
			org = betaID
		}
		task, err := e.DB.GetTask(ctx, org, r.Str("task.id"))
		is.NoErr(err)
		return r, task
	}
	lastKey := func() string {
		sent := vendor.Requests()
		return sent[len(sent)-1]
	}
	// pdlAs is pdl's part of GET /v1/sources for the key's organization; the body is
	// among the responses the key is looked for in.
	pdlAs := func(headers ...string) map[string]any {
		t.Helper()
		r := e.Do("GET", "/v1/sources", nil, headers...)
		is.Equal(r.Status, 200)
		responses.Write(r.Raw)
		for _, src := range r.Get("sources").([]any) {
			if m := src.(map[string]any); m["name"] == "pdl" {
				return m
			}
		}
		t.Fatal("GET /v1/sources lists no pdl")
		return nil
	}

	// acme's task goes out with acme's key; beta's, for the same company, is not
	// served acme's record: it asks the vendor, with the installation's key.
	r, task := enrichAs("own.example")
	is.Equal(r.Str("task.status"), "succeeded")
	is.Equal(lastKey(), "own.example "+ownKey)
	is.True(strings.Contains(string(task.Sources), `"name":"pdl","outcome":"hit"`))
	// Its credit is acme's, made with its own key; beta has spent nothing.
	mine := pdlAs()
	is.Equal(mine["vendor_credits"], 1.0)
	is.Equal(mine["own_key_vendor_credits"], 1.0)
	theirs := pdlAs(asBeta...)
	is.Equal(theirs["vendor_credits"], 0.0)
	is.Equal(theirs["own_key_vendor_credits"], 0.0)
	calls := len(vendor.Requests())
	r = e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "own.example"})
	is.Equal(r.Status, 200) // acme's repeat: from the store, asking nothing
	is.Equal(len(vendor.Requests()), calls)
	r, _ = enrichAs("own.example", asBeta...)
	is.Equal(r.Str("task.status"), "succeeded")
	is.Equal(lastKey(), "own.example "+installKey)

	// Fetched with the installation's key, a record is everyone's.
	r, _ = enrichAs("shared.example", asBeta...)
	is.Equal(r.Str("task.status"), "succeeded")
	is.Equal(lastKey(), "shared.example "+installKey)
	calls = len(vendor.Requests())
	is.Equal(e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "shared.example"}).Status, 200)
	is.Equal(e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "shared.example"}, asBeta...).Status, 200)
	is.Equal(len(vendor.Requests()), calls)
	theirs = pdlAs(asBeta...)
	is.Equal(theirs["vendor_credits"], 2.0) // beta's two, with the installation's key
	is.Equal(theirs["own_key_vendor_credits"], 0.0)
	is.Equal(pdlAs()["own_key_vendor_credits"], 1.0) // acme's own key: nothing of beta's

	// The installation's budget binds the installation's key alone: spent, it stops
	// beta's tasks, refunded, while acme's own key spends acme's own vendor account.
	is.NoErr(e.DB.SetSourceBudget(ctx, "", "pdl", 2))
	beforeBeta := e.Balance("beta")
	calls = len(vendor.Requests())
	r, task = enrichAs("over-budget.example", asBeta...)
	is.Equal(r.Str("task.status"), "failed")
	is.Equal(r.Str("error.code"), "provider_unavailable")
	is.True(strings.Contains(r.Str("error.message"), "monthly budget of vendor credits of pdl is spent"))
	is.True(strings.Contains(string(task.Sources), `{"name":"pdl","outcome":"skipped","reason":"budget"`))
	is.Equal(len(vendor.Requests()), calls)                 // not asked
	is.Equal(e.Balance("beta").Balance, beforeBeta.Balance) // refunded
	r, task = enrichAs("own-budget.example")
	is.Equal(r.Str("task.status"), "succeeded")
	is.Equal(lastKey(), "own-budget.example "+ownKey)
	mine = pdlAs()
	is.Equal(mine["own_key_vendor_credits"], 2.0)
	is.Equal(mine["budget"].(map[string]any)["installation"], 2.0)
	is.Equal(mine["budget"].(map[string]any)["remaining"], nil) // no cap binds acme's own key
	is.Equal(pdlAs(asBeta...)["budget"].(map[string]any)["remaining"], 0.0)
	is.NoErr(e.DB.SetSourceBudget(ctx, "", "pdl", 0))

	// The vendor refuses acme's key: the task that meets it fails, refunded, and the
	// key is marked failing; acme's next task skips pdl without asking it.
	vendor.SetGood(ownKey, false)
	before := e.Balance("acme")
	r, _ = enrichAs("refused.example")
	is.Equal(r.Str("task.status"), "failed")
	is.Equal(r.Str("error.code"), "provider_unavailable")
	is.Equal(e.Balance("acme").Balance, before.Balance) // refunded
	waitUntil(t, func() bool {
		k, err := e.DB.OrgSourceKey(ctx, e.OrgID, "pdl")
		return err == nil && k.Failing()
	})
	time.Sleep(30 * time.Millisecond) // past OrgKeyRefresh: what other replicas see
	calls = len(vendor.Requests())
	r, task = enrichAs("skipped.example")
	is.Equal(r.Str("task.status"), "failed")
	is.Equal(r.Str("error.code"), "provider_unavailable")
	is.True(strings.Contains(string(task.Sources), `{"name":"pdl","outcome":"skipped","reason":"key_failing"`))
	is.Equal(len(vendor.Requests()), calls) // not asked
	r, _ = enrichAs("beta-still.example", asBeta...)
	is.Equal(r.Str("task.status"), "succeeded") // beta is not touched by acme's key

	// GET /v1/sources says so: acme's own key, by its last 4, failing; beta's the
	// installation's.
	keyOf := func(headers ...string) map[string]any {
		t.Helper()
		return pdlAs(headers...)["key"].(map[string]any)
	}
	k := keyOf()
	is.Equal(k["owner"], "organization")
	is.Equal(k["last4"], "…5e4f")
	is.Equal(k["failing"], true)
	is.Equal(k["fallback"], false)
	is.Equal(keyOf(asBeta...)["owner"], "installation")

	// With the fallback allowed, acme's tasks use the installation's key.
	ok, err := e.DB.SetSourceKeyFallback(ctx, e.OrgID, "pdl", true)
	is.NoErr(err)
	is.True(ok)
	time.Sleep(30 * time.Millisecond)
	r, task = enrichAs("fallback.example")
	is.Equal(r.Str("task.status"), "succeeded")
	is.Equal(lastKey(), "fallback.example "+installKey)
	is.True(strings.Contains(string(task.Sources), `"name":"pdl","outcome":"hit"`))
	// What the fallback fetched is shared.
	is.Equal(e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "fallback.example"}, asBeta...).Status, 200)

	// The key never shows: not in a log line, a response, nor the database in clear.
	is.True(!strings.Contains(e.Logs.String(), ownKey))
	is.True(!strings.Contains(e.Logs.String(), installKey))
	is.True(!strings.Contains(responses.String(), ownKey))
	stored, err := e.DB.OrgSourceKey(ctx, e.OrgID, "pdl")
	is.NoErr(err)
	is.Equal(stored.Last4, "…5e4f")
	is.True(strings.Contains(stored.FailingReason, "refused the organization's own key (401)"))
	if servertest.OnPostgres() {
		// Every column of every table, as text (a bytea as its hex), holds neither
		// the key nor its hex.
		cols, err := e.DB.Reader().Query(ctx, `SELECT table_name, column_name FROM information_schema.columns
			WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position`)
		is.NoErr(err)
		var columns [][2]string
		for cols.Next() {
			var c [2]string
			is.NoErr(cols.Scan(&c[0], &c[1]))
			columns = append(columns, c)
		}
		is.NoErr(cols.Err())
		cols.Close()
		is.True(len(columns) > 50) // the whole schema, not a few columns
		hexKey := hex.EncodeToString([]byte(ownKey))
		for _, c := range columns {
			var n int
			q := fmt.Sprintf(`SELECT count(*) FROM %q WHERE strpos(CAST(%q AS TEXT), ?) > 0 OR strpos(CAST(%q AS TEXT), ?) > 0`, c[0], c[1], c[1])
			is.NoErr(e.DB.Reader().QueryRow(ctx, q, ownKey, hexKey).Scan(&n))
			if n != 0 {
				t.Fatalf("the key is in the clear in %s.%s", c[0], c[1])
			}
		}
		return
	}
	path := e.Path
	e.Close()
	raw, err := os.ReadFile(path)
	is.NoErr(err) // the database file is there to be looked in
	is.True(len(raw) > 0)
	is.True(!bytes.Contains(raw, []byte(ownKey)))
	if wal, err := os.ReadFile(path + "-wal"); err == nil { // checkpointed away on close, as a rule
		is.True(!bytes.Contains(wal, []byte(ownKey)))
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(servertest.SettleWithin)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
