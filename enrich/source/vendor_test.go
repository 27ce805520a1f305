package source_test

import (
	"bytes"
	"context"
	"encoding/json"
	"enrichd/enrich"
	"enrichd/enrich/source"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
)

// reply is one recorded response of a vendor: a status and a fixture under testdata.
type reply struct {
	status  int
	fixture string // path under testdata; "" for an empty body
	header  map[string]string
}

// fakeVendor serves recorded responses by path, in order (the last one repeats), and
// records what it was sent. Only the vendor's edge is fake: the adapter under test
// sends real HTTP requests to it.
type fakeVendor struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	routes map[string][]reply
	got    []*http.Request
	bodies []string
	// arrived, when set, is told of each request as it arrives, with how many came.
	arrived func(n int)
}

func newFakeVendor(t *testing.T, routes map[string][]reply) *fakeVendor {
	f := &fakeVendor{t: t, routes: routes}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeVendor) serve(w http.ResponseWriter, r *http.Request) {
	body := new(bytes.Buffer)
	body.ReadFrom(r.Body)
	f.mu.Lock()
	f.got = append(f.got, r.Clone(r.Context()))
	f.bodies = append(f.bodies, body.String())
	replies := f.routes[r.URL.Path]
	var rep reply
	switch {
	case len(replies) == 0:
		rep = reply{status: http.StatusNotFound}
	case len(replies) == 1:
		rep = replies[0]
	default:
		rep, f.routes[r.URL.Path] = replies[0], replies[1:]
	}
	arrived, n := f.arrived, len(f.got)
	f.mu.Unlock()
	if arrived != nil {
		arrived(n)
	}
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rep.status)
	if rep.fixture != "" {
		data, err := os.ReadFile(filepath.Join("testdata", rep.fixture))
		if err != nil {
			f.t.Errorf("fixture: %v", err)
		}
		w.Write(data)
	}
}

// requests returns what the vendor was sent so far.
func (f *fakeVendor) requests() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*http.Request(nil), f.got...)
}

func (f *fakeVendor) count(path string) int {
	n := 0
	for _, r := range f.requests() {
		if r.URL.Path == path {
			n++
		}
	}
	return n
}

// vendorConfig points an adapter at the fake, with retries fast enough for tests.
func vendorConfig(f *fakeVendor, key string, logs *bytes.Buffer) source.VendorConfig {
	return source.VendorConfig{
		APIKey:  key,
		BaseURL: f.srv.URL,
		Rate:    1000, Burst: 1000,
		Backoff: time.Millisecond,
		Logger:  slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

// asJSON renders v for comparing results in one readable assertion.
func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// noKey asserts that the key appears in none of the texts.
func noKey(t *testing.T, key string, texts ...string) {
	t.Helper()
	is := is.New(t)
	for _, s := range texts {
		is.True(!strings.Contains(s, key)) // the API key leaked into a log line or an error
	}
}

func strp(s string) *string { return &s }

// Each request an ask sends upstream, retries included, counts in the Tally it is
// given, which is how a task learns what its lookup cost.
func TestVendorCallsCountInTheAsksTally(t *testing.T) {
	is := is.New(t)
	p, _, _ := newPDL(t, map[string][]reply{"/v5/company/enrich": {{status: 503}, {status: 200, fixture: "pdl/company_full.json"}}})
	ctx, tally := context.Background(), &enrich.Tally{}
	_, err := p.CompanyByDomain(ctx, tally, "acme.com")
	is.NoErr(err)
	is.Equal(tally.Calls(), int64(2)) // the 503 and its retry
	_, err = p.CompanyByDomain(context.Background(), nil, "acme.com")
	is.NoErr(err)
	is.Equal(tally.Calls(), int64(2)) // another ask's calls are not this one's
}
