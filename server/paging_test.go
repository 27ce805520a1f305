package server_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"enrichd/server/servertest"

	"github.com/matryer/is"
)

func TestDeepPagesAreCapped(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	loop, _ := e.CreateLoop("companies", "https://hooks.example/c", "company")
	for i := range 3 {
		is.New(t).Equal(e.Do("POST", "/v1/companies/enrich", fmt.Sprintf(`{"domain":"c%d.com"}`, i)).Status, http.StatusAccepted)
		e.Clock.Add(time.Millisecond)
	}
	for _, list := range []string{"/v1/tasks", "/v1/loops/" + loop + "/deliveries"} {
		t.Run(list, func(t *testing.T) {
			is := is.New(t)
			// Up to 10,000 rows skipped: answered, if empty.
			for _, q := range []string{"page=400", "page=100&pageSize=100", "page=10000&pageSize=1", "page=0&pageSize=100"} {
				r := e.Do("GET", list+"?"+q, nil)
				is.Equal(r.Status, http.StatusOK)
			}
			for _, q := range []string{"page=401", "page=101&pageSize=100", "page=10001&pageSize=1", "page=5000&pageSize=3", "page=1000000000"} {
				r := e.Do("GET", list+"?"+q, nil)
				refused(t, r, "10000")
			}
		})
	}
	is := is.New(t)
	r := e.Do("GET", "/v1/tasks?page=401", nil)
	is.Equal(r.Str("error"), "page × pageSize must be at most 10000 (the rows a page may skip), not 401 × 25 = 10025; a list reaches back 10000 rows")
	is.Equal(e.Do("GET", "/v1/tasks?page=1&pageSize=2", nil).Get("total"), 3.0)
}
