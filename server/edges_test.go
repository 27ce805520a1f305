package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"enrichd/server"
	"enrichd/server/servertest"

	"github.com/matryer/is"
)

// rawRequest writes req on a new connection to addr and reads the first response,
// whose body is JSON.
func rawRequest(t *testing.T, addr, req string) (*http.Response, map[string]any) {
	t.Helper()
	res, raw := rawRequestText(t, addr, req)
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Errorf("%d %q: the body is not JSON: %v", res.StatusCode, raw, err)
	}
	return res, body
}

// rawRequestText is rawRequest for a body of any type.
func rawRequestText(t *testing.T, addr, req string) (*http.Response, []byte) {
	t.Helper()
	c := dial(t, addr)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res, raw
}

// A client that sends Expect: 100-continue with a declared length over the limit is
// refused before it is told to send the body, instead of being told to send 100 MB
// that would be refused after the read timeout.
func TestExpectContinueOverTheLimitIsRefusedUnread(t *testing.T) {
	// Not in parallel: what it checks is bounded in time, which other tests running
	// at once would stretch.
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	companyLoop, _ := e.CreateLoop("companies", "https://hooks.example/c", "company")
	addr := strings.TrimPrefix(e.HTTP.URL, "http://")
	head := func(path string, length int) string {
		return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
			"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n", path, e.Key, length)
	}
	for _, c := range []struct {
		path   string
		length int
		limit  string
	}{
		{"/v1/companies/enrich", 104857600, "64 KiB"},
		{"/v1/companies/enrich", 64<<10 + 1, "64 KiB"},
		{"/v1/people/enrich", 104857600, "64 KiB"},
		{"/v1/loops", 104857600, "64 KiB"},
		{"/v1/loops/" + companyLoop + "/run", 104857600, "64 KiB"},
		{"/v1/watches", 104857600, "64 KiB"},
		{"/v1/watches/import", 1<<20 + 1, "1024 KiB"},
	} {
		t.Run(fmt.Sprintf("%s %d", c.path, c.length), func(t *testing.T) {
			is := is.New(t)
			start := time.Now()
			res, body := rawRequest(t, addr, head(c.path, c.length))
			is.Equal(res.StatusCode, http.StatusBadRequest) // the first answer: no 100 Continue
			is.Equal(body["code"], "invalid_input")
			is.True(strings.Contains(body["error"].(string), "larger than "+c.limit))
			is.True(res.Close)                         // the body never sent is not waited for
			is.True(time.Since(start) < 5*time.Second) // far from the read timeout
		})
	}
	e.NothingCharged()

	// Within the limit, the client is told to go on, and served.
	is := is.New(t)
	c := dial(t, addr)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	body := `{"domain":"acme.com"}`
	io.WriteString(c, head("/v1/companies/enrich", len(body)))
	r := bufio.NewReader(c)
	res, err := http.ReadResponse(r, nil)
	is.NoErr(err)
	is.Equal(res.StatusCode, http.StatusContinue)
	io.WriteString(c, body)
	res, err = http.ReadResponse(r, nil)
	is.NoErr(err)
	is.Equal(res.StatusCode, http.StatusAccepted)
}

// The dashboard's forms hold their limit the same way.
func TestExpectContinueOverTheFormLimitIsRefusedUnread(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	res, page := rawRequestText(t, strings.TrimPrefix(e.HTTP.URL, "http://"), "POST /dashboard/login HTTP/1.1\r\nHost: x\r\n"+
		"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 104857600\r\nExpect: 100-continue\r\n\r\n")
	is.Equal(res.StatusCode, http.StatusBadRequest) // the first answer: no 100 Continue
	is.True(strings.Contains(string(page), "the form is larger than 64 KiB"))
	is.True(res.Close)
}

// Requests net/http refuses before any handler sees them are answered with the API's
// JSON error, a code, and the connection closed, and counted in /metrics.
func TestRequestsNetHTTPRefusesAreAnsweredInJSON(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t)
	addr := serveLimited(t, e, server.HTTPLimits{MaxHeaderBytes: 8 << 10})
	enrich := "POST /v1/companies/enrich HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + e.Key + "\r\nContent-Type: application/json\r\n"
	body := `{"domain":"acme.com"}`
	for _, c := range []struct {
		name   string
		req    string
		status int
		code   string
		want   string // in the error
	}{
		{"headers over the limit", enrich + "X-Padding: " + strings.Repeat("p", 16<<10) + "\r\nContent-Length: 21\r\n\r\n" + body,
			http.StatusRequestHeaderFieldsTooLarge, "headers_too_large", "larger than 8 KiB"},
		{"a control character in a header", enrich + "X-Note: a\x01b\r\nContent-Length: 21\r\n\r\n" + body,
			http.StatusBadRequest, "invalid_input", "not valid HTTP/1.1"},
		{"two Content-Lengths", enrich + "Content-Length: 21\r\nContent-Length: 5\r\n\r\n" + body,
			http.StatusBadRequest, "invalid_input", "not valid HTTP/1.1"},
		{"a header name with a space", enrich + "Bad Header: x\r\nContent-Length: 21\r\n\r\n" + body,
			http.StatusBadRequest, "invalid_input", "invalid header name"},
		{"no Host", "GET /v1/tasks HTTP/1.1\r\nAuthorization: Bearer " + e.Key + "\r\n\r\n",
			http.StatusBadRequest, "invalid_input", "missing required Host header"},
		{"a malformed request line", "GARBAGE\r\n\r\n",
			http.StatusBadRequest, "invalid_input", "not valid HTTP/1.1"},
		{"an unknown transfer coding", enrich + "Transfer-Encoding: gzip\r\n\r\n" + body,
			http.StatusNotImplemented, "unsupported_transfer_encoding", "Transfer-Encoding"},
		{"an Expect other than 100-continue", enrich + "Expect: 200-ok\r\nContent-Length: 21\r\n\r\n" + body,
			http.StatusExpectationFailed, "expectation_failed", "Expect"},
		{"HTTP/2.0 in the request line", "GET /v1/tasks HTTP/2.0\r\nHost: x\r\n\r\n",
			http.StatusHTTPVersionNotSupported, "unsupported_http_version", "HTTP version"},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			res, body := rawRequest(t, addr, c.req)
			t.Logf("%s: %d %v", c.name, res.StatusCode, body)
			is.Equal(res.StatusCode, c.status)
			is.Equal(res.Header.Get("Content-Type"), "application/json")
			is.Equal(body["code"], c.code)
			msg, _ := body["error"].(string)
			if !strings.Contains(msg, c.want) {
				t.Errorf("error %q does not say %q", msg, c.want)
			}
			is.True(res.Close)
		})
	}
	e.NothingCharged()
	m := servertest.Scrape(t, e.HTTP.URL)
	is := is.New(t)
	is.Equal(m[`enrichd_http_malformed_requests_total{status="400"}`], 5.0)
	is.Equal(m[`enrichd_http_malformed_requests_total{status="431"}`], 1.0)
	is.Equal(m[`enrichd_http_malformed_requests_total{status="501"}`], 1.0)
	is.Equal(m[`enrichd_http_malformed_requests_total{status="417"}`], 1.0)
	is.Equal(m[`enrichd_http_malformed_requests_total{status="505"}`], 1.0)

	// A handler's own plain-text answer is left as it is: 401.
	res, err := servertest.Client.Get("http://" + addr + "/v1/tasks")
	is.NoErr(err)
	res.Body.Close()
	is.Equal(res.StatusCode, http.StatusUnauthorized)
	is.Equal(res.Header.Get("Content-Type"), "text/plain; charset=utf-8")
}

// A port is dropped from a website address, but what is not a port is no website:
// refused, and nothing charged.
func TestAPortThatIsNoPortIsRefused(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	companyLoop, _ := e.CreateLoop("companies", "https://hooks.example/c", "company")
	for _, domain := range []string{"acme.com:99999", "https://acme.com:99999/about", "acme.com:0", "acme.com:http", "acme.com:"} {
		t.Run(domain, func(t *testing.T) {
			refused(t, e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": domain}), "has a port that is not a number from 1 to 65535")
			refused(t, e.Do("POST", "/v1/loops/"+companyLoop+"/run", map[string]string{"domain": domain}), "has a port")
			refused(t, e.Do("POST", "/v1/watches", map[string]any{"object_type": "company", "domain": domain, "loop_id": companyLoop}), "has a port")
		})
	}
	e.NothingCharged()
	is := is.New(t)
	is.Equal(e.Do("GET", "/v1/watches", nil).Get("total"), 0.0)
	// A real port is dropped, as before.
	ok := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com:8080"})
	is.Equal(ok.Status, http.StatusAccepted)
	is.Equal(ok.Str("task.target"), "acme.com")
}
