package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/enrich/source"
	"enrichd/secret"
	"enrichd/server"
	"enrichd/store"

	"github.com/matryer/is"
)

// byKeyPDL is People Data Labs' company enrichment, in its published shape, for any
// website, to the keys it takes; any other key gets its 401. It records the key of
// every request.
type byKeyPDL struct {
	*httptest.Server
	mu   sync.Mutex
	good map[string]bool
	sent []string // "website key"
}

func newByKeyPDL(t *testing.T, good ...string) *byKeyPDL {
	f := &byKeyPDL{good: map[string]bool{}}
	for _, k := range good {
		f.good[k] = true
	}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, site := r.Header.Get("X-Api-Key"), r.URL.Query().Get("website")
		f.mu.Lock()
		f.sent = append(f.sent, site+" "+key)
		ok := f.good[key]
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(map[string]any{"status": 401, "error": map[string]any{"type": "authentication_error", "message": "Invalid API key"}})
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"status": 200, "likelihood": 8, "name": site, "display_name": "Company " + site,
			"website": site, "employee_count": 120})
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *byKeyPDL) setGood(key string, ok bool) {
	f.mu.Lock()
	f.good[key] = ok
	f.mu.Unlock()
}

func (f *byKeyPDL) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.sent...)
}

// TestAnOrganizationsOwnKey goes through the real handler and workers: an
// organization's own PDL key is sent for its tasks and the installation's for
// another's; what its key fetched is served from the store to it alone, while what
// the installation's key fetched is served to both; a key the vendor refuses is
// marked failing, and the organization's tasks then skip pdl, or use the
// installation's key once it allows the fallback; the key is in no log line, no
// response and not in the database in clear.
func TestAnOrganizationsOwnKey(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	const installKey, ownKey = "pdl-install-key-00aa11bb", "pdl-acme-own-key-7c6d5e4f"
	vendor := newByKeyPDL(t, installKey, ownKey)
	box, _, err := secret.LoadOrCreate(filepath.Join(t.TempDir(), "secret-key"))
	is.NoErr(err)
	e := newEnv(t, func(c *server.Config) {
		pdl, err := source.NewPDL(source.VendorConfig{APIKey: installKey, BaseURL: vendor.URL, Rate: 1000, Burst: 1000, Backoff: time.Millisecond, Logger: c.Logger})
		if err != nil {
			t.Fatal(err)
		}
		c.Sources = []enrich.Source{pdl}
		c.Secrets = box
		c.OrgKeyRefresh = 20 * time.Millisecond
	})
	betaKey, betaID := e.newOrg("beta", 100)
	asBeta := []string{"Authorization", "Bearer " + betaKey}
	sealed, err := box.Seal([]byte(ownKey), server.SourceKeyLabel(e.orgID, "pdl"))
	is.NoErr(err)
	is.NoErr(e.db.SetSourceKey(ctx, e.orgID, "pdl", sealed, box.ID(), secret.Last4(ownKey), false))
	e.startWorkers()
	var responses bytes.Buffer
	enrichAs := func(domain string, headers ...string) (*response, *store.Task) {
		t.Helper()
		r := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": domain}, headers...)
		responses.Write(r.raw)
		if r.status == 202 {
			r = e.waitSettled(r.str("task.id"), headers...)
			responses.Write(r.raw)
		}
		org := e.orgID
		if len(headers) > 0 {
			org = betaID
		}
		task, err := e.db.GetTask(ctx, org, r.str("task.id"))
		is.NoErr(err)
		return r, task
	}
	lastKey := func() string {
		sent := vendor.requests()
		return sent[len(sent)-1]
	}

	// acme's task goes out with acme's key; beta's, for the same company, is not
	// served acme's record: it asks the vendor, with the installation's key.
	r, task := enrichAs("own.example")
	is.Equal(r.str("task.status"), "succeeded")
	is.Equal(lastKey(), "own.example "+ownKey)
	is.True(strings.Contains(string(task.Sources), `"name":"pdl","outcome":"hit"`))
	calls := len(vendor.requests())
	r = e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "own.example"})
	is.Equal(r.status, 200) // acme's repeat: from the store, asking nothing
	is.Equal(len(vendor.requests()), calls)
	r, _ = enrichAs("own.example", asBeta...)
	is.Equal(r.str("task.status"), "succeeded")
	is.Equal(lastKey(), "own.example "+installKey)

	// Fetched with the installation's key, a record is everyone's.
	r, _ = enrichAs("shared.example", asBeta...)
	is.Equal(r.str("task.status"), "succeeded")
	is.Equal(lastKey(), "shared.example "+installKey)
	calls = len(vendor.requests())
	is.Equal(e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "shared.example"}).status, 200)
	is.Equal(e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "shared.example"}, asBeta...).status, 200)
	is.Equal(len(vendor.requests()), calls)

	// The vendor refuses acme's key: the task that meets it fails, refunded, and the
	// key is marked failing; acme's next task skips pdl without asking it.
	vendor.setGood(ownKey, false)
	before := e.balance("acme")
	r, _ = enrichAs("refused.example")
	is.Equal(r.str("task.status"), "failed")
	is.Equal(r.str("error.code"), "provider_unavailable")
	is.Equal(e.balance("acme").Balance, before.Balance) // refunded
	waitUntil(t, func() bool {
		k, err := e.db.OrgSourceKey(ctx, e.orgID, "pdl")
		return err == nil && k.Failing()
	})
	time.Sleep(30 * time.Millisecond) // past OrgKeyRefresh: what other replicas see
	calls = len(vendor.requests())
	r, task = enrichAs("skipped.example")
	is.Equal(r.str("task.status"), "failed")
	is.Equal(r.str("error.code"), "provider_unavailable")
	is.True(strings.Contains(string(task.Sources), `{"name":"pdl","outcome":"skipped","reason":"key_failing"`))
	is.Equal(len(vendor.requests()), calls) // not asked
	r, _ = enrichAs("beta-still.example", asBeta...)
	is.Equal(r.str("task.status"), "succeeded") // beta is not touched by acme's key

	// GET /v1/sources says so: acme's own key, by its last 4, failing; beta's the
	// installation's.
	keyOf := func(headers ...string) map[string]any {
		t.Helper()
		for _, src := range e.do("GET", "/v1/sources", nil, headers...).get("sources").([]any) {
			if m := src.(map[string]any); m["name"] == "pdl" {
				return m["key"].(map[string]any)
			}
		}
		t.Fatal("GET /v1/sources lists no pdl")
		return nil
	}
	k := keyOf()
	is.Equal(k["owner"], "organization")
	is.Equal(k["last4"], "…5e4f")
	is.Equal(k["failing"], true)
	is.Equal(k["fallback"], false)
	is.Equal(keyOf(asBeta...)["owner"], "installation")

	// With the fallback allowed, acme's tasks use the installation's key.
	ok, err := e.db.SetSourceKeyFallback(ctx, e.orgID, "pdl", true)
	is.NoErr(err)
	is.True(ok)
	time.Sleep(30 * time.Millisecond)
	r, task = enrichAs("fallback.example")
	is.Equal(r.str("task.status"), "succeeded")
	is.Equal(lastKey(), "fallback.example "+installKey)
	is.True(strings.Contains(string(task.Sources), `"name":"pdl","outcome":"hit"`))
	// What the fallback fetched is shared.
	is.Equal(e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "fallback.example"}, asBeta...).status, 200)

	// The key never shows: not in a log line, a response, nor the database in clear.
	is.True(!strings.Contains(e.logs.String(), ownKey))
	is.True(!strings.Contains(e.logs.String(), installKey))
	is.True(!strings.Contains(responses.String(), ownKey))
	var n int
	is.NoErr(e.db.Reader().QueryRow(ctx, `SELECT count(*) FROM org_source_keys WHERE sealed LIKE ? OR last4 LIKE ? OR failing_reason LIKE ?`,
		"%"+ownKey+"%", "%"+ownKey+"%", "%"+ownKey+"%").Scan(&n))
	is.Equal(n, 0)
	stored, err := e.db.OrgSourceKey(ctx, e.orgID, "pdl")
	is.NoErr(err)
	is.Equal(stored.Last4, "…5e4f")
	is.True(strings.Contains(stored.FailingReason, "refused the organization's own key (401)"))
	if !onPostgres() {
		path := e.path
		e.close()
		for _, f := range []string{path, path + "-wal"} {
			raw, err := os.ReadFile(f)
			if err == nil {
				is.True(!bytes.Contains(raw, []byte(ownKey))) // the database file
			}
		}
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
