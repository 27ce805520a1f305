package server_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"enrichd/server"
	"enrichd/server/servertest"

	"github.com/matryer/is"
)

// TestProfilesOnlyOnTheAdminListener checks that Go's profiles are served by the
// admin handler and by the API's handler never, whether or not the health endpoints
// share the API's address.
func TestProfilesOnlyOnTheAdminListener(t *testing.T) {
	t.Parallel()
	for _, separate := range []bool{false, true} {
		is := is.New(t)
		e := servertest.NewEnv(t, func(c *server.Config) { c.SeparateAdmin = separate })
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/cmdline"} {
			is.Equal(e.Do("GET", path, nil).Status, http.StatusNotFound) // not on the API
		}
		is.Equal(e.Do("POST", "/debug/pprof/symbol", nil).Status, http.StatusNotFound)

		admin := httptest.NewServer(e.Srv.AdminHandler())
		defer admin.Close()
		get := func(path string) (int, string) {
			res, err := servertest.Client.Get(admin.URL + path)
			is.NoErr(err)
			defer res.Body.Close()
			body, err := io.ReadAll(res.Body)
			is.NoErr(err)
			return res.StatusCode, string(body)
		}
		status, body := get("/debug/pprof/heap?debug=1")
		is.Equal(status, http.StatusOK)
		is.True(strings.HasPrefix(body, "heap profile: ")) // the heap profile in text form
		status, body = get("/debug/pprof/heap")
		is.Equal(status, http.StatusOK)
		is.True(len(body) > 0) // the binary form, for go tool pprof
		status, body = get("/debug/pprof/")
		is.Equal(status, http.StatusOK)
		is.True(strings.Contains(body, "goroutine")) // the index lists the named profiles
		status, body = get("/debug/pprof/cmdline")
		is.Equal(status, http.StatusOK)
		is.True(body != "")
		res, err := servertest.Client.Post(admin.URL+"/debug/pprof/symbol", "text/plain", strings.NewReader("0x0"))
		is.NoErr(err)
		res.Body.Close()
		is.Equal(res.StatusCode, http.StatusOK)
		status, _ = get("/debug/pprof/no-such-profile")
		is.Equal(status, http.StatusNotFound)

		m := servertest.Scrape(t, admin.URL)
		is.True(m[`enrichd_http_requests_total{route="pprof",status="200"}`] >= 5) // counted under one route
	}
}
