package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/server/servertest"
	"enrichd/store"

	"github.com/matryer/is"
)

func TestCompanyIsQueuedFetchedThenServedFromTheStore(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))

	r := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "HTTPS://WWW.Acme.COM/about"})
	is.Equal(r.Status, http.StatusAccepted)
	is.Equal(r.Header.Get("Retry-After"), "2")
	is.Equal(r.Str("task.status"), "queued")
	is.Equal(r.Str("task.target"), "acme.com")
	is.Equal(r.Str("task.object_type"), "company")
	is.Equal(r.Str("task.operation"), "enrich")
	is.Equal(r.Get("task.credits_charged"), 1.0)
	is.Equal(r.Get("task.input"), map[string]any{"domain": "HTTPS://WWW.Acme.COM/about"})
	is.True(!r.Has("data"))  // the enqueue response never carries data
	is.True(!r.Has("error")) // nor an error when nothing failed
	is.True(r.Has("task.loop_id") && r.Has("task.idempotency_key") && r.Has("task.started_at"))
	id := r.Str("task.id")

	queued := e.Do("GET", "/v1/tasks/"+id, nil)
	is.Equal(queued.Status, 200)
	is.Equal(queued.Header.Get("Retry-After"), "2")
	is.True(!queued.Has("data"))

	e.StartWorkers()
	done := e.WaitSettled(id)
	is.Equal(done.Str("task.status"), "succeeded")
	is.Equal(done.Header.Get("Retry-After"), "")
	is.Equal(done.Str("data.name"), "Acme")
	is.Equal(done.Str("data.enrichment_status"), "enriched")
	is.Equal(done.Str("data.domain"), "acme.com")
	is.True(done.Has("data.slogan")) // unknown fields are null, not missing
	is.True(!done.Has("data.redirect"))
	is.True(!done.Has("error"))
	is.True(done.Str("task.started_at") != "" && done.Str("task.finished_at") != "")

	// Fresh in the store: the next request settles inside the request, charged again,
	// without asking the network, and so does the company's network URL.
	calls := e.Net.Calls.Load()
	again := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"})
	is.Equal(again.Status, http.StatusOK)
	is.Equal(again.Str("task.status"), "succeeded")
	is.True(!again.Has("data"))
	byURL := e.Do("POST", "/v1/companies/enrich", map[string]string{"networkUrl": "https://linkedin.com/company/ACME/about/?x=1"})
	is.Equal(byURL.Status, http.StatusOK)
	is.Equal(byURL.Str("task.target"), "https://www.linkedin.com/company/acme")
	is.Equal(e.Net.Calls.Load(), calls)
	is.Equal(e.Do("GET", "/v1/tasks/"+again.Str("task.id"), nil).Str("data.name"), "Acme")
	is.Equal(e.Balance("acme").Balance, int64(97))
}

func TestAnAliasDomainAnswersWithRedirect(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.ImportJSONL(`{"type":"company","name":"Acme","domain":"acme.com","network_url":"https://www.linkedin.com/company/acme","domains":["acme.io"]}`)
	e.StartWorkers()

	r := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "www.acme.io"})
	is.Equal(r.Status, http.StatusAccepted)
	done := e.WaitSettled(r.Str("task.id"))
	is.Equal(done.Str("data.domain"), "acme.com")
	is.Equal(done.Get("data.redirect"), map[string]any{"from": "acme.io", "to": "acme.com", "confirmed": false})

	// Served from the store, through the alias, the redirect is kept.
	hit := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.io"})
	is.Equal(hit.Status, http.StatusOK)
	is.Equal(e.Do("GET", "/v1/tasks/"+hit.Str("task.id"), nil).Get("data.redirect.to"), "acme.com")
	// The canonical domain has no redirect.
	canon := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"})
	is.Equal(canon.Status, http.StatusOK)
	is.True(!e.Do("GET", "/v1/tasks/"+canon.Str("task.id"), nil).Has("data.redirect"))
}

func TestPersonByNetworkURL(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.ImportJSONL(`{"type":"person","network_url":"https://www.linkedin.com/in/jane-doe","full_name":"Jane Doe","first_name":"Jane","last_name":"Doe",` +
		`"positions":[{"title":"CTO","company_name":"Acme","company_network_url":"https://www.linkedin.com/company/acme","start_date":"2020-01-01","start_date_precision":"year","is_current":true}],"emails":["jane@acme.com"]}`)
	e.StartWorkers()
	r := e.Do("POST", "/v1/people/enrich", map[string]string{"networkUrl": "https://de.linkedin.com/in/Jane-Doe/"})
	is.Equal(r.Status, http.StatusAccepted)
	is.Equal(r.Str("task.object_type"), "person")
	is.Equal(r.Str("task.target"), "https://www.linkedin.com/in/jane-doe")
	done := e.WaitSettled(r.Str("task.id"))
	is.Equal(done.Str("task.status"), "succeeded")
	is.Equal(done.Str("data.full_name"), "Jane Doe")
	is.Equal(done.Str("data.enrichment_status"), "enriched")
	is.True(done.Str("data.last_enriched_at") != "")
	positions := done.Get("data.positions").([]any)
	is.Equal(len(positions), 1)
	pos := positions[0].(map[string]any)
	is.Equal(pos["start_date"], "2020-01-01")
	is.Equal(pos["start_date_precision"], "year")
	is.Equal(pos["end_date"], nil)
	is.Equal(pos["is_current"], true)
	is.True(!done.Has("data.email_match"))
}

func TestAMissFailsAndIsRefunded(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.StartWorkers()
	r := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "nobody.example"})
	is.Equal(r.Status, http.StatusAccepted)
	done := e.WaitSettled(r.Str("task.id"))
	is.Equal(done.Str("task.status"), "failed")
	is.Equal(done.Str("error.code"), "not_found")
	is.True(done.Str("error.message") != "")
	is.True(!done.Has("data"))
	is.Equal(done.Get("task.credits_charged"), 1.0)
	b := e.Balance("acme")
	is.Equal(b.Balance, int64(100))
	is.Equal(b.Charged, int64(1))
	is.Equal(b.Refund, int64(1))
}

func TestSourceDownFailsAsProviderUnavailable(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.Net.SetDown(true)
	e.StartWorkers()
	r := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"})
	done := e.WaitSettled(r.Str("task.id"))
	is.Equal(done.Str("task.status"), "failed")
	is.Equal(done.Str("error.code"), "provider_unavailable")
	is.Equal(e.Balance("acme").Balance, int64(100))
}

func TestAStaleRecordIsRefetched(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	url := "https://www.linkedin.com/in/jane-doe"
	e.Net.AddPerson(&enrich.Person{NetworkURL: &url, FullName: enrich.Ptr("Jane Doe"), Positions: []enrich.Position{}})
	e.StartWorkers()
	first := e.WaitSettled(e.Do("POST", "/v1/people/enrich", map[string]string{"networkUrl": url}).Str("task.id"))
	firstEnriched := first.Str("data.last_enriched_at")

	e.Clock.Add(31 * 24 * time.Hour)
	e.Net.AddPerson(&enrich.Person{NetworkURL: &url, FullName: enrich.Ptr("Jane Smith"), Positions: []enrich.Position{}})
	r := e.Do("POST", "/v1/people/enrich", map[string]string{"networkUrl": url})
	is.Equal(r.Status, http.StatusAccepted) // older than 30 days: fetched again
	done := e.WaitSettled(r.Str("task.id"))
	is.Equal(done.Str("data.full_name"), "Jane Smith")
	is.True(done.Str("data.last_enriched_at") > firstEnriched)

	// Refreshed: fresh again.
	is.Equal(e.Do("POST", "/v1/people/enrich", map[string]string{"networkUrl": url}).Status, http.StatusOK)
}

func TestARefreshWithTheSourceDownServesTheStoredRecord(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	url := "https://www.linkedin.com/in/jane-doe"
	e.Net.AddPerson(&enrich.Person{NetworkURL: &url, FullName: enrich.Ptr("Jane Doe"), Positions: []enrich.Position{}})
	e.StartWorkers()
	first := e.WaitSettled(e.Do("POST", "/v1/people/enrich", map[string]string{"networkUrl": url}).Str("task.id"))

	e.Clock.Add(31 * 24 * time.Hour)
	e.Net.SetDown(true)
	r := e.Do("POST", "/v1/people/enrich", map[string]string{"networkUrl": url})
	is.Equal(r.Status, http.StatusAccepted)
	done := e.WaitSettled(r.Str("task.id"))
	is.Equal(done.Str("task.status"), "succeeded")
	is.Equal(done.Str("data.full_name"), "Jane Doe")
	is.Equal(done.Str("data.last_enriched_at"), first.Str("data.last_enriched_at")) // the old record, as old as it is
	is.Equal(e.Balance("acme").Balance, int64(98))

	// Still stale: the next request queues a refresh again.
	is.Equal(e.Do("POST", "/v1/people/enrich", map[string]string{"networkUrl": url}).Status, http.StatusAccepted)
}

// TestBadRequestsAreRefusedAndChargeNothing sends every malformed input the contract
// names and checks the status, the body, and that no task was created or charged.
func TestBadRequestsAreRefusedAndChargeNothing(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t)
	long := strings.Repeat("x", 201)
	cases := []struct {
		name    string
		path    string
		body    any
		headers []string
		want    string // in the error
	}{
		{"company: neither input", "/v1/companies/enrich", `{}`, nil, "send one of domain or networkUrl"},
		{"company: both inputs", "/v1/companies/enrich", map[string]string{"domain": "acme.com", "networkUrl": "https://www.linkedin.com/company/acme"}, nil, "not both"},
		{"company: bad domain", "/v1/companies/enrich", map[string]string{"domain": "not a domain"}, nil, "domain"},
		{"company: IP address", "/v1/companies/enrich", map[string]string{"domain": "10.0.0.1"}, nil, "IP address"},
		{"company: profile URL", "/v1/companies/enrich", map[string]string{"networkUrl": "https://www.linkedin.com/in/jane"}, nil, "company page"},
		{"company: other host", "/v1/companies/enrich", map[string]string{"networkUrl": "https://evil.example/company/acme"}, nil, "company page"},
		{"company: unknown field", "/v1/companies/enrich", `{"domain":"acme.com","name":"Acme"}`, nil, `unknown field "name"`},
		{"company: field name in other case", "/v1/companies/enrich", `{"DOMAIN":"acme.com"}`, nil, `unknown field "DOMAIN"`},
		{"company: field sent twice", "/v1/companies/enrich", `{"domain":"a.com","domain":"b.com"}`, nil, `field "domain" is sent twice`},
		{"company: field twice in two cases", "/v1/companies/enrich", `{"domain":"a.com","Domain":"b.com"}`, nil, `unknown field "Domain"`},
		{"company: wrong type", "/v1/companies/enrich", `{"domain":42}`, nil, "domain must be a string"},
		{"company: null", "/v1/companies/enrich", `{"domain":"acme.com","loop_id":null}`, nil, "loop_id must not be null"},
		{"person: null hint", "/v1/people/enrich", `{"email":"jane@acme.com","fullName":null}`, nil, "fullName must not be null"},
		{"company: invalid JSON", "/v1/companies/enrich", `{"domain":`, nil, "not valid JSON"},
		{"company: not an object", "/v1/companies/enrich", `["acme.com"]`, nil, "JSON object"},
		{"company: two objects", "/v1/companies/enrich", `{"domain":"a.com"}{"domain":"b.com"}`, nil, "single JSON object"},
		{"company: empty body", "/v1/companies/enrich", ``, nil, "empty"},
		{"company: too large", "/v1/companies/enrich", `{"domain":"` + strings.Repeat("a", 65<<10) + `.com"}`, nil, "larger than 64 KiB"},
		{"company: no content type", "/v1/companies/enrich", `{"domain":"acme.com"}`, []string{"Content-Type", ""}, "Content-Type: application/json"},
		{"company: text content type", "/v1/companies/enrich", `{"domain":"acme.com"}`, []string{"Content-Type", "text/plain"}, "Content-Type: application/json"},
		{"company: bad loop_id", "/v1/companies/enrich", map[string]string{"domain": "acme.com", "loop_id": "nope"}, nil, "loop_id"},
		{"company: unknown loop", "/v1/companies/enrich", map[string]string{"domain": "acme.com", "loop_id": "0195f3a2-6b1c-7cde-8f00-123456789abc"}, nil, "no Loop"},
		{"company: idempotency key too long", "/v1/companies/enrich", map[string]string{"domain": "acme.com"}, []string{"Idempotency-Key", strings.Repeat("k", 256)}, "Idempotency-Key"},
		{"person: neither input", "/v1/people/enrich", `{"fullName":"Jane"}`, nil, "send one of networkUrl or email"},
		{"person: both inputs", "/v1/people/enrich", map[string]string{"networkUrl": "https://www.linkedin.com/in/jane", "email": "jane@acme.com"}, nil, "not both"},
		{"person: company URL", "/v1/people/enrich", map[string]string{"networkUrl": "https://www.linkedin.com/company/acme"}, nil, "profile"},
		{"person: hint with networkUrl", "/v1/people/enrich", map[string]string{"networkUrl": "https://www.linkedin.com/in/jane", "fullName": "Jane Doe"}, nil, "tie-break"},
		{"person: empty hint with networkUrl", "/v1/people/enrich", `{"networkUrl":"https://www.linkedin.com/in/jane","fullName":""}`, nil, "tie-break"},
		{"person: field name in other case", "/v1/people/enrich", `{"NETWORKURL":"https://www.linkedin.com/in/jane"}`, nil, `unknown field "NETWORKURL"`},
		{"person: fullName too long", "/v1/people/enrich", map[string]string{"email": "jane@acme.com", "fullName": long}, nil, "fullName is longer than 200"},
		{"person: title too long", "/v1/people/enrich", map[string]string{"email": "jane@acme.com", "title": long}, nil, "title is longer than 200"},
		{"person: location too long", "/v1/people/enrich", map[string]string{"email": "jane@acme.com", "location": long}, nil, "location is longer than 200"},
		{"person: bad email", "/v1/people/enrich", map[string]string{"email": "Jane <jane@acme.com>"}, nil, "plain email address"},
		{"person: unknown field", "/v1/people/enrich", `{"networkUrl":"https://www.linkedin.com/in/jane","company":"Acme"}`, nil, `unknown field "company"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			r := e.Do("POST", c.path, c.body, c.headers...)
			is.Equal(r.Status, http.StatusBadRequest)
			is.True(strings.HasPrefix(r.Header.Get("Content-Type"), "application/json"))
			msg := r.Str("error")
			is.True(strings.Contains(msg, c.want)) // the error says what to fix
		})
	}
	is := is.New(t)
	b := e.Balance("acme")
	is.Equal(b.Charged, int64(0))
	list := e.Do("GET", "/v1/tasks", nil)
	is.Equal(list.Get("total"), 0.0)
}

func TestUnauthorizedIsPlainText(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t)
	revoked, _ := e.NewOrg("other", 10)
	if err := e.DB.RevokeKey(t.Context(), store.BySystem, "other", revoked[:12]); err != nil {
		t.Fatal(err)
	}
	for name, auth := range map[string]string{
		"missing":      "",
		"wrong scheme": "Basic " + e.Key,
		"unknown key":  "Bearer enr_" + strings.Repeat("A", 43),
		"not a key":    "Bearer hello",
		"revoked key":  "Bearer " + revoked,
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			for _, req := range []struct{ method, path string }{{"POST", "/v1/companies/enrich"}, {"GET", "/v1/tasks"}, {"GET", "/v1/tasks/0195f3a2-6b1c-7cde-8f00-123456789abc"}, {"POST", "/v1/tasks/x/cancel"}} {
				r := e.Do(req.method, req.path, map[string]string{"domain": "acme.com"}, "Authorization", auth)
				is.Equal(r.Status, http.StatusUnauthorized)
				is.Equal(string(r.Raw), "Unauthorized")
				is.True(strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain"))
			}
		})
	}
	is := is.New(t)
	is.Equal(e.Balance("other").Charged, int64(0))
	is.Equal(e.Balance("acme").Charged, int64(0))
}

func TestPaymentRequired(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	broke, _ := e.NewOrg("broke", 0)
	r := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"}, "Authorization", "Bearer "+broke)
	is.Equal(r.Status, http.StatusPaymentRequired)
	is.Equal(r.Str("code"), "insufficient_credits")
	is.Equal(r.Get("creditsRemaining"), 0.0)
	is.True(r.Str("error") != "")

	expires := e.Clock.Now().Add(time.Hour)
	if _, err := e.DB.GrantCredits(t.Context(), "broke", 5, &expires); err != nil {
		t.Fatal(err)
	}
	is.Equal(e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"}, "Authorization", "Bearer "+broke).Status, http.StatusAccepted)
	e.Clock.Add(2 * time.Hour)
	r = e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "other.com"}, "Authorization", "Bearer "+broke)
	is.Equal(r.Status, http.StatusPaymentRequired)
	is.Equal(r.Str("code"), "credits_expired")
	is.Equal(r.Get("creditsRemaining"), 0.0)
	list := e.Do("GET", "/v1/tasks", nil, "Authorization", "Bearer "+broke)
	is.Equal(list.Get("total"), 1.0) // only the task that was paid for
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	key := strings.Repeat("k", 255)
	first := e.Do("POST", "/v1/companies/enrich", `{"domain":"acme.com"}`, "Idempotency-Key", key)
	is.Equal(first.Status, http.StatusAccepted)
	is.Equal(first.Str("task.idempotency_key"), key)

	// The same body, spaced differently: the original task, 200, nothing charged.
	replay := e.Do("POST", "/v1/companies/enrich", "{ \"domain\" : \"acme.com\" }", "Idempotency-Key", key)
	is.Equal(replay.Status, http.StatusOK)
	is.Equal(replay.Str("task.id"), first.Str("task.id"))
	is.Equal(replay.Header.Get("Idempotent-Replayed"), "true")
	is.Equal(first.Header.Get("Idempotent-Replayed"), "")
	is.Equal(e.Balance("acme").Charged, int64(1))

	reused := e.Do("POST", "/v1/companies/enrich", `{"domain":"other.com"}`, "Idempotency-Key", key)
	is.Equal(reused.Status, http.StatusUnprocessableEntity)
	is.Equal(reused.Str("code"), "idempotency_key_reused")
	is.Equal(reused.Str("error"), "this Idempotency-Key was first used on POST /v1/companies/enrich with a different request body; "+
		"send that body again to get the original task back, or a new key for a new request")
	// The same key on the other endpoint is another request too, and the answer says
	// that it is the endpoint, not the body, that differs.
	other := e.Do("POST", "/v1/people/enrich", `{"networkUrl":"https://www.linkedin.com/in/x"}`, "Idempotency-Key", key)
	is.Equal(other.Status, http.StatusUnprocessableEntity)
	is.Equal(other.Str("code"), "idempotency_key_reused")
	is.Equal(other.Str("error"), "this Idempotency-Key was first used on POST /v1/companies/enrich, not on POST /v1/people/enrich; "+
		"a key names one request: send a new key for this one")
	is.Equal(e.Balance("acme").Charged, int64(1))
	is.Equal(e.Do("GET", "/v1/tasks", nil).Get("total"), 1.0)

	// Keys belong to an organization: another may use the same one.
	otherKey, _ := e.NewOrg("other", 10)
	is.Equal(e.Do("POST", "/v1/companies/enrich", `{"domain":"acme.com"}`, "Idempotency-Key", key, "Authorization", "Bearer "+otherKey).Status, http.StatusAccepted)

	// A replay after the task settled shows it as it is now.
	e.StartWorkers()
	e.WaitSettled(first.Str("task.id"))
	late := e.Do("POST", "/v1/companies/enrich", `{"domain":"acme.com"}`, "Idempotency-Key", key)
	is.Equal(late.Status, http.StatusOK)
	is.Equal(late.Str("task.status"), "failed")
	is.Equal(late.Str("error.code"), "not_found")
	is.Equal(e.Balance("acme").Charged, int64(1))
}

func TestIdempotencyUnderConcurrency(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	const n = 50
	type result struct {
		status int
		id     string
	}
	results := make(chan result, n)
	start := make(chan struct{})
	for range n {
		go func() {
			<-start
			r := e.Do("POST", "/v1/companies/enrich", `{"domain":"acme.com"}`, "Idempotency-Key", "same-key")
			results <- result{r.Status, r.Str("task.id")}
		}()
	}
	close(start)
	ids := map[string]int{}
	statuses := map[int]int{}
	for range n {
		r := <-results
		ids[r.id]++
		statuses[r.status]++
	}
	is.Equal(len(ids), 1)                      // one task
	is.Equal(statuses[http.StatusAccepted], 1) // created once
	is.Equal(statuses[http.StatusOK], n-1)     // replayed the rest
	is.Equal(e.Balance("acme").Charged, int64(1))
	is.Equal(e.Do("GET", "/v1/tasks", nil).Get("total"), 1.0)
}

func TestRateLimits(t *testing.T) {
	t.Parallel()
	t.Run("per key", func(t *testing.T) {
		is := is.New(t)
		// A token every 100 s, so that no token comes back while a loaded machine
		// takes seconds between the requests.
		e := servertest.NewEnv(t, func(c *server.Config) { c.RateKey = server.Rate{Limit: 0.01, Burst: 2} })
		is.Equal(e.Do("GET", "/v1/tasks", nil).Status, 200)
		is.Equal(e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"}).Status, http.StatusAccepted)
		r := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "other.com"})
		is.Equal(r.Status, http.StatusTooManyRequests)
		is.Equal(r.Str("code"), "rate_limited")
		wait, err := strconv.Atoi(r.Header.Get("Retry-After"))
		is.NoErr(err)
		is.True(wait > 60 && wait <= 100) // what is left of the 100 s since the first request
		is.Equal(e.Balance("acme").Charged, int64(1))
		// Another key has its own bucket.
		other, _ := e.NewOrg("other", 10)
		is.Equal(e.Do("GET", "/v1/tasks", nil, "Authorization", "Bearer "+other).Status, 200)
	})
	t.Run("per key, shared with the other replicas alive", func(t *testing.T) {
		is := is.New(t)
		e := servertest.NewEnv(t, func(c *server.Config) { c.RateKey = server.Rate{Limit: 0.001, Burst: 6} })
		// Another replica of the same database is alive (on SQLite there is none: a
		// file is served by one process, and the share is the whole).
		others, err := e.DB.Heartbeat(context.Background(), "another-replica", time.Hour)
		is.NoErr(err)
		e.StartWorkers() // this replica's first heartbeat sets its share
		want := 6 / (others + 1)
		if !servertest.OnPostgres() {
			want = 6
		}
		deadline := time.Now().Add(servertest.SettleWithin)
		for servertest.OnPostgres() && !strings.Contains(e.Logs.String(), "replicas alive changed") && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		allowed := 0
		for range 10 {
			if e.Do("GET", "/v1/tasks", nil).Status == http.StatusOK {
				allowed++
			}
		}
		is.Equal(allowed, want) // 3 of the burst of 6 on each of two replicas
	})
	t.Run("per client address", func(t *testing.T) {
		is := is.New(t)
		e := servertest.NewEnv(t, func(c *server.Config) { c.RateIP = server.Rate{Limit: 0.01, Burst: 1} })
		is.Equal(e.Do("GET", "/v1/tasks", nil).Status, 200)
		other, _ := e.NewOrg("other", 10)
		r := e.Do("GET", "/v1/tasks", nil, "Authorization", "Bearer "+other)
		is.Equal(r.Status, http.StatusTooManyRequests) // the same address, whatever the key
		is.Equal(r.Str("code"), "rate_limited")
		// A token comes back every 100 s: the wait is what is left of that since the
		// first request (the seconds a loaded machine took in between not counted).
		wait, err := strconv.Atoi(r.Header.Get("Retry-After"))
		is.NoErr(err)
		is.True(wait > 60 && wait <= 100)
		// Unauthenticated requests count too.
		is.Equal(e.Do("GET", "/v1/tasks", nil, "Authorization", "").Status, http.StatusTooManyRequests)
	})
}

func TestQueueFull(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, func(c *server.Config) { c.MaxBacklog = 2 })
	e.ImportJSONL(`{"type":"company","name":"Acme","domain":"acme.com"}`)
	for _, d := range []string{"a.com", "b.com"} {
		is.Equal(e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": d}).Status, http.StatusAccepted)
	}
	r := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "c.com"})
	is.Equal(r.Status, http.StatusTooManyRequests)
	is.Equal(r.Str("code"), "queue_full")
	is.Equal(r.Get("queuedTasks"), 2.0)
	is.True(r.Header.Get("Retry-After") != "")
	is.Equal(e.Balance("acme").Charged, int64(2))
	is.Equal(e.Do("GET", "/v1/tasks", nil).Get("total"), 2.0)

	// The backlog is per organization.
	other, _ := e.NewOrg("other", 10)
	is.Equal(e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "c.com"}, "Authorization", "Bearer "+other).Status, http.StatusAccepted)

	// Once tasks drain, requests are accepted again.
	e.StartWorkers()
	e.WaitSettled(e.Do("GET", "/v1/tasks?pageSize=1", nil).Get("data").([]any)[0].(map[string]any)["id"].(string))
	deadline := time.Now().Add(servertest.SettleWithin)
	for e.Do("GET", "/v1/tasks?status=queued", nil).Get("total") != 0.0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	is.Equal(e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "c.com"}).Status, http.StatusAccepted)
}

func TestServerErrorsCarryARequestID(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	key := e.Key
	e.DB.Close() // the database goes away under the server
	r := e.Do("GET", "/v1/tasks", nil, "Authorization", "Bearer "+key)
	is.Equal(r.Status, http.StatusInternalServerError)
	id := r.Str("requestId")
	is.True(id != "")
	is.Equal(r.Header.Get("X-Request-Id"), id)
	is.True(!strings.Contains(r.Str("error"), "sql")) // no internals in the body
	is.True(strings.Contains(e.Logs.String(), fmt.Sprintf(`"requestId":%q`, id)))
	e.DB = nil
}

func TestUnknownPathsAndMethods(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	r := e.Do("GET", "/v1/nothing", nil)
	is.Equal(r.Status, http.StatusNotFound)
	is.Equal(r.Str("code"), "not_found")
	r = e.Do("DELETE", "/v1/tasks", nil)
	is.Equal(r.Status, http.StatusMethodNotAllowed)
	is.Equal(r.Str("code"), "method_not_allowed")
	is.Equal(r.Header.Get("Allow"), "GET")
	r = e.Do("GET", "/v1/companies/enrich", nil)
	is.Equal(r.Status, http.StatusMethodNotAllowed)
}

// TestASettledTaskReadsTheSameEveryTime reads a task while it is queued, then once it
// has settled, again and again: every read of the settled task answers the same body
// (the later ones without reading the database), a read while it was queued said so,
// and another organization's key is never answered with it, before or after.
func TestASettledTaskReadsTheSameEveryTime(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	otherKey, _ := e.NewOrg("other", 10)
	id := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"}).Str("task.id")

	queued := e.Do("GET", "/v1/tasks/"+id, nil)
	is.Equal(queued.Status, 200)
	is.Equal(queued.Str("task.status"), "queued")
	is.Equal(queued.Header.Get("Retry-After"), "2")
	is.Equal(e.Do("GET", "/v1/tasks/"+id, nil, "Authorization", "Bearer "+otherKey).Status, 404)

	e.StartWorkers()
	settled := e.WaitSettled(id)
	is.Equal(settled.Str("task.status"), "succeeded")
	for range 3 {
		again := e.Do("GET", "/v1/tasks/"+id, nil)
		is.Equal(again.Status, 200)
		is.Equal(string(again.Raw), string(settled.Raw))
		is.Equal(again.Header.Get("Retry-After"), "")
		is.Equal(again.Header.Get("Content-Type"), "application/json")
		other := e.Do("GET", "/v1/tasks/"+id, nil, "Authorization", "Bearer "+otherKey)
		is.Equal(other.Status, 404)
		is.Equal(other.Str("code"), "not_found")
	}
}
