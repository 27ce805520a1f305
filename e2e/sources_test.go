package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
)

// The environment is read by these tests, so they do not run in parallel.

func TestServeSourcesConfig(t *testing.T) {
	t.Setenv("ENRICHLAYER_API_KEY", "")
	t.Setenv("PDL_API_KEY", "")
	t.Setenv("APOLLO_API_KEY", "")
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"enrichlayer without a key", []string{"--sources", "dataset,enrichlayer"}, []string{"ENRICHLAYER_API_KEY"}},
		{"pdl without a key", []string{"--sources", "pdl"}, []string{"PDL_API_KEY"}},
		{"apollo without a key", []string{"--sources", "dataset,apollo"}, []string{"APOLLO_API_KEY"}},
		{"a source named twice", []string{"--sources", "dataset,web,dataset"}, []string{"--sources", `"dataset"`}},
		{"unknown source lists the known", []string{"--sources", "web,crm"}, []string{`"crm"`, "enrichlayer", "pdl", "apollo"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"serve", "--db", newDBPath(t), "--addr", "127.0.0.1:0"}, tt.args...)
			msg := runServeExpectError(t, args...)
			for _, w := range tt.want {
				contains(t, msg, w)
			}
		})
	}

	t.Run("bad vendor flags", func(t *testing.T) {
		t.Setenv("ENRICHLAYER_API_KEY", "k")
		t.Setenv("PDL_API_KEY", "k")
		t.Setenv("APOLLO_API_KEY", "k")
		for _, c := range []struct{ args, want []string }{
			{[]string{"--sources", "enrichlayer", "--enrichlayer-rate", "fast"}, []string{"--enrichlayer-rate"}},
			{[]string{"--sources", "pdl", "--pdl-concurrency", "0"}, []string{"--pdl-concurrency"}},
			{[]string{"--sources", "pdl", "--pdl-url", "ftp://pdl.example"}, []string{"--pdl-url"}},
			{[]string{"--sources", "apollo", "--apollo-rate", "fast"}, []string{"--apollo-rate"}},
			{[]string{"--sources", "apollo", "--apollo-concurrency", "0"}, []string{"--apollo-concurrency"}},
			{[]string{"--sources", "apollo", "--apollo-url", "ftp://apollo.example"}, []string{"--apollo-url"}},
		} {
			msg := runServeExpectError(t, append([]string{"serve", "--db", newDBPath(t), "--addr", "127.0.0.1:0"}, c.args...)...)
			for _, w := range c.want {
				contains(t, msg, w)
			}
		}
	})

	t.Run("ordered list from the environment", func(t *testing.T) {
		t.Setenv("ENRICHD_SOURCES", "dataset,web,pdl") // pdl has no key: the list was read in full
		contains(t, runServeExpectError(t, "serve", "--db", newDBPath(t), "--addr", "127.0.0.1:0"), "PDL_API_KEY")
	})
}

// A serve with a vendor source answers from it and shows its calls on /v1/status; the
// key is sent upstream and appears nowhere in the log.
func TestServeWithEnrichLayer(t *testing.T) {
	is := is.New(t)
	const vendorKey = "el-serve-key-77aa01"
	var sentKey atomic.Value
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sentKey.Store(r.Header.Get("Authorization"))
		w.Write([]byte(`{"name": "Globex", "company_size_on_linkedin": 42}`))
	}))
	defer vendor.Close()
	t.Setenv("ENRICHLAYER_API_KEY", vendorKey)
	t.Setenv("ENRICHD_ENRICHLAYER_URL", vendor.URL)

	db := newDB(t)
	key := strings.TrimSpace(mustCLI(t, "keys", "create", "--org", "acme", "--db", db))
	mustCLI(t, "credits", "grant", "--org", "acme", "--amount", "10", "--db", db)
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--db", db, "--addr", "127.0.0.1:0", "--sources", "dataset,web,enrichlayer"}, &stdout, &stderr)
	}()
	defer func() {
		cancel()
		<-done
	}()
	base := waitListening(t, &stderr, done)
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()

	_, resp, _ := call(t, client, http.MethodPost, base+"/v1/companies/enrich", key, `{"networkUrl":"https://www.linkedin.com/company/globex"}`)
	resp = waitSettled(t, client, base, key, resp)
	is.Equal(resp.Task.Status, "succeeded")
	is.True(strings.Contains(string(resp.Data), `"name":"Globex"`))
	is.Equal(sentKey.Load(), "Bearer "+vendorKey)

	status, _, raw := call(t, client, http.MethodGet, base+"/v1/status", key, "")
	is.Equal(status, http.StatusOK)
	var st struct {
		Sources []struct {
			Name  string `json:"name"`
			Calls *int64 `json:"calls"`
		} `json:"sources"`
	}
	is.NoErr(json.Unmarshal([]byte(raw), &st))
	is.Equal(len(st.Sources), 3)
	is.Equal(st.Sources[0].Name, "dataset")
	is.Equal(st.Sources[1].Name, "web")
	is.Equal(st.Sources[2].Name, "enrichlayer")
	is.Equal(*st.Sources[1].Calls, int64(0)) // a network URL is not the web's to answer
	is.Equal(*st.Sources[2].Calls, int64(1))
	contains(t, stderr.String(), `"sources":"dataset,web,enrichlayer"`)
	is.True(!strings.Contains(stderr.String(), vendorKey)) // the key is never logged
}

// A serve with the apollo source answers a domain from Apollo's organization
// enrichment and a profile from its people match, sends the key in X-Api-Key, counts
// its calls on /v1/status, and logs the key nowhere.
func TestServeWithApollo(t *testing.T) {
	is := is.New(t)
	const vendorKey = "apollo-serve-key-31c9e4"
	var sentKeys atomic.Int64
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") == vendorKey {
			sentKeys.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1/organizations/enrich":
			if r.URL.Query().Get("domain") != "globex.com" {
				w.Write([]byte(`{}`)) // Apollo's answer to a domain it does not know
				return
			}
			w.Write([]byte(`{"organization": {"id": "5e66", "name": "Globex", "primary_domain": "globex.com", "estimated_num_employees": 42, "linkedin_url": "http://www.linkedin.com/company/globex"}}`))
		case "/api/v1/people/match":
			w.Write([]byte(`{"person": {"id": "587c", "first_name": "Hank", "last_name": "Scorpio", "name": "Hank Scorpio", "linkedin_url": "http://www.linkedin.com/in/hank-scorpio", "organization_id": "5e66",
				"organization": {"id": "5e66", "name": "Globex", "linkedin_url": "http://www.linkedin.com/company/globex"},
				"employment_history": [{"organization_id": "5e66", "organization_name": "Globex", "title": "CEO", "start_date": "2019-05-01", "end_date": null, "current": true}]}}`))
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer vendor.Close()
	t.Setenv("APOLLO_API_KEY", vendorKey)
	t.Setenv("ENRICHD_APOLLO_URL", vendor.URL)

	db := newDB(t)
	key := strings.TrimSpace(mustCLI(t, "keys", "create", "--org", "acme", "--db", db))
	mustCLI(t, "credits", "grant", "--org", "acme", "--amount", "10", "--db", db)
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--db", db, "--addr", "127.0.0.1:0", "--sources", "dataset,apollo"}, &stdout, &stderr)
	}()
	defer func() {
		cancel()
		<-done
	}()
	base := waitListening(t, &stderr, done)
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()

	settle := func(path, body string) (string, string) {
		t.Helper()
		_, resp, _ := call(t, client, http.MethodPost, base+path, key, body)
		resp = waitSettled(t, client, base, key, resp)
		return resp.Task.Status, string(resp.Data)
	}
	status, data := settle("/v1/companies/enrich", `{"domain":"globex.com"}`)
	is.Equal(status, "succeeded")
	is.True(strings.Contains(data, `"name":"Globex"`))
	is.True(strings.Contains(data, `"network_url":"https://www.linkedin.com/company/globex"`))
	status, data = settle("/v1/people/enrich", `{"networkUrl":"https://www.linkedin.com/in/hank-scorpio"}`)
	is.Equal(status, "succeeded")
	is.True(strings.Contains(data, `"full_name":"Hank Scorpio"`))
	is.True(strings.Contains(data, `"start_date_precision":"month"`))
	status, _ = settle("/v1/companies/enrich", `{"domain":"initech.com"}`)
	is.Equal(status, "failed") // Apollo knows no such domain: not_found
	status, _ = settle("/v1/companies/enrich", `{"networkUrl":"https://www.linkedin.com/company/initech"}`)
	is.Equal(status, "failed") // Apollo enriches organizations by domain only, and is not asked

	st, _, raw := call(t, client, http.MethodGet, base+"/v1/status", key, "")
	is.Equal(st, http.StatusOK)
	var got struct {
		Sources []struct {
			Name   string `json:"name"`
			Calls  *int64 `json:"calls"`
			Errors *int64 `json:"errors"`
		} `json:"sources"`
	}
	is.NoErr(json.Unmarshal([]byte(raw), &got))
	is.Equal(len(got.Sources), 2)
	is.Equal(got.Sources[1].Name, "apollo")
	is.Equal(*got.Sources[1].Calls, int64(3)) // two domains and one profile; the page was not asked
	is.Equal(*got.Sources[1].Errors, int64(0))
	is.Equal(sentKeys.Load(), int64(3))
	is.True(!strings.Contains(stderr.String(), vendorKey)) // the key is never logged
}
