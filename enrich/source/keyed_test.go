package source_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"enrichd/enrich"
	"enrichd/enrich/source"
)

const orgKey = "org-own-key-7f3a19c2"

// An adapter built again with an organization's key sends that key, and a refusal of
// it is ErrKeyRefused, naming the organization's key rather than the environment.
func TestWithAPIKeySendsTheOrganizationsKey(t *testing.T) {
	is := is.New(t)
	p, f, logs := newPDL(t, map[string][]reply{"/v5/company/enrich": {{status: 401, fixture: "pdl/error_401.json"}}})
	var refusals []string
	own, err := p.WithAPIKey(orgKey, func(reason string) { refusals = append(refusals, reason) })
	is.NoErr(err)
	_, err = own.CompanyByDomain(context.Background(), nil, "acme.com")
	is.Equal(len(refusals), 1)
	is.True(strings.Contains(refusals[0], "(401)"))
	is.True(errors.Is(err, source.ErrKeyRefused))
	is.True(errors.Is(err, enrich.ErrUnavailable))
	is.True(strings.Contains(err.Error(), "the organization's own key"))
	is.True(!strings.Contains(err.Error(), source.PDLKeyEnv))
	_, err = p.CompanyByDomain(context.Background(), nil, "acme.com")
	is.True(errors.Is(err, source.ErrKeyRefused))
	got := f.requests()
	is.Equal(got[0].Header.Get("X-Api-Key"), orgKey)
	is.Equal(got[1].Header.Get("X-Api-Key"), pdlKey)
	is.Equal(f.count("/v5/company/enrich"), 2) // a refused key is not tried again
	is.True(!strings.Contains(logs.String(), orgKey))
	is.True(!strings.Contains(err.Error(), pdlKey))
	// The copy keeps its own meter: its failure is not the installation's source's.
	is.Equal(*own.(enrich.Metered).Stats().Errors, int64(1))
	is.Equal(*p.Stats().Errors, int64(1))
}

func TestCheckKey(t *testing.T) {
	for _, v := range []struct {
		name, path string
		build      func(source.VendorConfig) (source.KeyChecker, error)
	}{
		{"pdl", "/v5/company/enrich", func(c source.VendorConfig) (source.KeyChecker, error) { return source.NewPDL(c) }},
		{"enrichlayer", "/api/v2/credit-balance", func(c source.VendorConfig) (source.KeyChecker, error) { return source.NewEnrichLayer(c) }},
		{"apollo", "/api/v1/auth/health", func(c source.VendorConfig) (source.KeyChecker, error) { return source.NewApollo(c) }},
	} {
		t.Run(v.name, func(t *testing.T) {
			for _, c := range []struct {
				status  int
				refused bool
				down    bool
			}{{200, false, false}, {404, false, false}, {401, true, false}, {403, true, false}, {402, true, false}, {429, false, true}, {503, false, true}} {
				is := is.New(t)
				f := newFakeVendor(t, map[string][]reply{v.path: {{status: c.status}}})
				chk, err := v.build(vendorConfig(f, orgKey, &bytes.Buffer{}))
				is.NoErr(err)
				err = chk.CheckKey(context.Background())
				is.Equal(errors.Is(err, source.ErrKeyRefused), c.refused) // the status
				is.Equal(errors.Is(err, enrich.ErrUnavailable), c.down)
				is.Equal(len(f.requests()), 1) // one call, never retried
				is.Equal(f.requests()[0].URL.Path, v.path)
				if err != nil {
					is.True(!strings.Contains(err.Error(), orgKey))
				}
			}
		})
	}
}

// A vendor's message that quotes the key where it is cut to length still does not
// show any of it: the key is taken out before the message is cut.
func TestAVendorsMessageCutAtTheKeyShowsNoneOfIt(t *testing.T) {
	is := is.New(t)
	// The key starts 190 characters in: the first 10 of its 20 are before the cut at 200.
	message := strings.Repeat("x", 190) + " " + orgKey + " is not a valid key"
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		json.NewEncoder(w).Encode(map[string]any{"status": 401, "error": map[string]any{"type": "authentication_error", "message": message}})
	}))
	t.Cleanup(vendor.Close)
	logs := &bytes.Buffer{}
	p, err := source.NewPDL(source.VendorConfig{APIKey: orgKey, BaseURL: vendor.URL, Rate: 1000, Burst: 1000, Backoff: time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	is.NoErr(err)
	prefix := orgKey[:8] // "org-own-"
	err = p.CheckKey(context.Background())
	is.True(errors.Is(err, source.ErrKeyRefused))
	is.True(!strings.Contains(err.Error(), prefix))
	is.True(strings.Contains(err.Error(), "[redacted")) // cut inside what stands for the key
	var refusals []string
	own, err := p.WithAPIKey(orgKey, func(reason string) { refusals = append(refusals, reason) })
	is.NoErr(err)
	_, err = own.CompanyByDomain(context.Background(), nil, "acme.com")
	is.True(errors.Is(err, source.ErrKeyRefused))
	is.True(!strings.Contains(err.Error(), prefix))
	is.Equal(len(refusals), 1)
	is.True(!strings.Contains(refusals[0], prefix))
	is.True(!strings.Contains(logs.String(), prefix))
}
