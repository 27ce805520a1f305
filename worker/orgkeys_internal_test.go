package worker

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
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
	"enrichd/store"
	"enrichd/store/storetest"

	"github.com/matryer/is"
)

// keyedPDL is a fake People Data Labs that knows one company and takes the keys in
// good; any other key gets PDL's 401. It records the key of every request.
type keyedPDL struct {
	*httptest.Server
	mu   sync.Mutex
	good map[string]bool
	sent []string
}

func newKeyedPDL(t *testing.T, good ...string) *keyedPDL {
	f := &keyedPDL{good: map[string]bool{}}
	for _, k := range good {
		f.good[k] = true
	}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("X-Api-Key")
		f.mu.Lock()
		f.sent = append(f.sent, key)
		ok := f.good[key]
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"status": 401, "error": {"type": "authentication_error", "message": "Invalid API key"}}`))
			return
		}
		w.Write([]byte(`{"status": 200, "likelihood": 8, "name": "globex", "display_name": "Globex", "website": "globex.com"}`))
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *keyedPDL) refuse(key string) {
	f.mu.Lock()
	delete(f.good, key)
	f.mu.Unlock()
}

func (f *keyedPDL) lastKey() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sent[len(f.sent)-1]
}

// TestOrgKeysPickTheOrganizationsKey drives the pipeline's SourceKeys on each engine:
// an organization's own key goes to the vendor for its asks and the installation's
// for another's; a refused key is marked failing in the database and the
// organization's asks then skip the source, or use the installation's key where it
// allowed the fallback; and the key is in no log line nor in the database in clear.
func TestOrgKeysPickTheOrganizationsKey(t *testing.T) {
	for _, engine := range []struct {
		name  string
		fresh func(testing.TB) string
	}{
		{"sqlite", func(t testing.TB) string { return filepath.Join(t.TempDir(), "enrichd.db") }},
		{"postgres", storetest.PostgresURL},
	} {
		t.Run(engine.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			const installKey, ownKey = "install-key-0000aaaa", "own-pdl-key-9f8e7d6c"
			vendor := newKeyedPDL(t, installKey, ownKey)
			dsn := engine.fresh(t)
			db, err := store.Open(ctx, dsn, storetest.Schema(t), store.WithSubjectKey(storetest.SubjectKey))
			is.NoErr(err)
			t.Cleanup(func() { db.Close() })
			var logs syncLog
			log := slog.New(slog.NewJSONHandler(&logs, nil))
			pdl, err := source.NewPDL(source.VendorConfig{APIKey: installKey, BaseURL: vendor.URL, Rate: 1000, Burst: 1000, Logger: log})
			is.NoErr(err)
			box, _, err := secret.LoadOrCreate(filepath.Join(t.TempDir(), "secret-key"))
			is.NoErr(err)
			alpha, err := db.CreateOrg(ctx, "alpha")
			is.NoErr(err)
			beta, err := db.CreateOrg(ctx, "beta")
			is.NoErr(err)
			sealed, err := box.Seal([]byte(ownKey), store.SourceKeyLabel(alpha.ID, "pdl"))
			is.NoErr(err)
			is.NoErr(db.SetSourceKey(ctx, alpha.ID, "pdl", sealed, box.ID(), secret.Last4(ownKey), false))

			keys := newOrgKeys(db, box, log, 0)
			clock := time.Now()
			keys.now = func() time.Time { return clock }
			ask := func(org string) (own bool, skip string, err error) {
				use, own, skip := keys.For(ctx, org, pdl)
				if skip != "" {
					return own, skip, nil
				}
				_, err = use.CompanyByDomain(ctx, nil, "globex.com")
				return own, "", err
			}

			own, skip, err := ask(alpha.ID)
			is.NoErr(err)
			is.True(own)
			is.Equal(skip, "")
			is.Equal(vendor.lastKey(), ownKey) // alpha's own key
			own, _, err = ask(beta.ID)
			is.NoErr(err)
			is.True(!own)
			is.Equal(vendor.lastKey(), installKey) // beta has none: the installation's

			// The vendor refuses alpha's key: the ask fails, the key is failing, and with
			// no fallback allowed alpha's asks skip pdl from then on.
			vendor.refuse(ownKey)
			_, _, err = ask(alpha.ID)
			is.True(errors.Is(err, source.ErrKeyRefused))
			_, skip, _ = ask(alpha.ID)
			is.Equal(skip, enrich.ReasonKeyFailing)
			waitFor(t, func() bool {
				k, err := db.OrgSourceKey(ctx, alpha.ID, "pdl")
				return err == nil && k.Failing()
			})
			k, err := db.OrgSourceKey(ctx, alpha.ID, "pdl")
			is.NoErr(err)
			is.True(strings.Contains(k.FailingReason, "refused the organization's own key (401)"))
			own, _, err = ask(beta.ID)
			is.NoErr(err) // beta is not touched by it
			is.True(!own)

			// Another serve process reads the mark from the database.
			other := newOrgKeys(db, box, log, 0)
			_, _, skip = other.For(ctx, alpha.ID, pdl)
			is.Equal(skip, enrich.ReasonKeyFailing)

			// Allowed, the fallback is the installation's key, once read again.
			ok, err := db.SetSourceKeyFallback(ctx, alpha.ID, "pdl", true)
			is.NoErr(err)
			is.True(ok)
			clock = clock.Add(OrgKeyRefresh)
			own, skip, err = ask(alpha.ID)
			is.NoErr(err)
			is.True(!own)
			is.Equal(skip, "")
			is.Equal(vendor.lastKey(), installKey)

			// A key set again is a new start: used at once, not failing.
			const newKey = "own-pdl-key-new-11223344"
			vendor.mu.Lock()
			vendor.good[newKey] = true
			vendor.mu.Unlock()
			sealed, err = box.Seal([]byte(newKey), store.SourceKeyLabel(alpha.ID, "pdl"))
			is.NoErr(err)
			is.NoErr(db.SetSourceKey(ctx, alpha.ID, "pdl", sealed, box.ID(), secret.Last4(newKey), false))
			clock = clock.Add(OrgKeyRefresh)
			own, _, err = ask(alpha.ID)
			is.NoErr(err)
			is.True(own)
			is.Equal(vendor.lastKey(), newKey)

			// Under another key file (a database restored without its own) the key does
			// not open: failing here, never a crash, and said in the log.
			stranger, _, err := secret.LoadOrCreate(filepath.Join(t.TempDir(), "other-key"))
			is.NoErr(err)
			lost := newOrgKeys(db, stranger, log, 0)
			_, own, skip = lost.For(ctx, alpha.ID, pdl)
			is.True(!own)
			is.Equal(skip, enrich.ReasonKeyFailing)
			is.True(strings.Contains(logs.String(), "sealed under another secret key file"))
			_, own, skip = newOrgKeys(db, nil, log, 0).For(ctx, alpha.ID, pdl)
			is.True(!own)
			is.Equal(skip, enrich.ReasonKeyFailing)

			for _, key := range []string{ownKey, newKey} {
				is.True(!strings.Contains(logs.String(), key))
				var n int
				is.NoErr(db.Reader().QueryRow(ctx, `SELECT count(*) FROM org_source_keys WHERE sealed LIKE ? OR last4 LIKE ? OR failing_reason LIKE ?`,
					"%"+key+"%", "%"+key+"%", "%"+key+"%").Scan(&n))
				is.Equal(n, 0)
			}
			if engine.name == "sqlite" {
				is.NoErr(db.Close())
				for _, f := range []string{dsn, dsn + "-wal"} {
					if raw, err := readIfExists(f); err == nil {
						is.True(!bytes.Contains(raw, []byte(ownKey)))
						is.True(!bytes.Contains(raw, []byte(newKey)))
					}
				}
			}
		})
	}
}

type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncLog) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncLog) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func readIfExists(path string) ([]byte, error) { return os.ReadFile(path) }
