package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/store"

	"github.com/matryer/is"
)

func TestCompanyIsQueuedFetchedThenServedFromTheStore(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.net.addCompany(company("Acme", "acme.com"))

	r := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "HTTPS://WWW.Acme.COM/about"})
	is.Equal(r.status, http.StatusAccepted)
	is.Equal(r.header.Get("Retry-After"), "2")
	is.Equal(r.str("task.status"), "queued")
	is.Equal(r.str("task.target"), "acme.com")
	is.Equal(r.str("task.object_type"), "company")
	is.Equal(r.str("task.operation"), "enrich")
	is.Equal(r.get("task.credits_charged"), 1.0)
	is.Equal(r.get("task.input"), map[string]any{"domain": "HTTPS://WWW.Acme.COM/about"})
	is.True(!r.has("data"))  // the enqueue response never carries data
	is.True(!r.has("error")) // nor an error when nothing failed
	is.True(r.has("task.loop_id") && r.has("task.idempotency_key") && r.has("task.started_at"))
	id := r.str("task.id")

	queued := e.do("GET", "/v1/tasks/"+id, nil)
	is.Equal(queued.status, 200)
	is.Equal(queued.header.Get("Retry-After"), "2")
	is.True(!queued.has("data"))

	e.startWorkers()
	done := e.waitSettled(id)
	is.Equal(done.str("task.status"), "succeeded")
	is.Equal(done.header.Get("Retry-After"), "")
	is.Equal(done.str("data.name"), "Acme")
	is.Equal(done.str("data.enrichment_status"), "enriched")
	is.Equal(done.str("data.domain"), "acme.com")
	is.True(done.has("data.slogan")) // unknown fields are null, not missing
	is.True(!done.has("data.redirect"))
	is.True(!done.has("error"))
	is.True(done.str("task.started_at") != "" && done.str("task.finished_at") != "")

	// Fresh in the store: the next request settles inside the request, charged again,
	// without asking the network, and so does the company's network URL.
	calls := e.net.calls.Load()
	again := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"})
	is.Equal(again.status, http.StatusOK)
	is.Equal(again.str("task.status"), "succeeded")
	is.True(!again.has("data"))
	byURL := e.do("POST", "/v1/companies/enrich", map[string]string{"networkUrl": "https://linkedin.com/company/ACME/about/?x=1"})
	is.Equal(byURL.status, http.StatusOK)
	is.Equal(byURL.str("task.target"), "https://www.linkedin.com/company/acme")
	is.Equal(e.net.calls.Load(), calls)
	is.Equal(e.do("GET", "/v1/tasks/"+again.str("task.id"), nil).str("data.name"), "Acme")
	is.Equal(e.balance("acme").Balance, int64(97))
}

func TestAnAliasDomainAnswersWithRedirect(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.importJSONL(`{"type":"company","name":"Acme","domain":"acme.com","network_url":"https://www.linkedin.com/company/acme","domains":["acme.io"]}`)
	e.startWorkers()

	r := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "www.acme.io"})
	is.Equal(r.status, http.StatusAccepted)
	done := e.waitSettled(r.str("task.id"))
	is.Equal(done.str("data.domain"), "acme.com")
	is.Equal(done.get("data.redirect"), map[string]any{"from": "acme.io", "to": "acme.com", "confirmed": false})

	// Served from the store, through the alias, the redirect is kept.
	hit := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.io"})
	is.Equal(hit.status, http.StatusOK)
	is.Equal(e.do("GET", "/v1/tasks/"+hit.str("task.id"), nil).get("data.redirect.to"), "acme.com")
	// The canonical domain has no redirect.
	canon := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"})
	is.Equal(canon.status, http.StatusOK)
	is.True(!e.do("GET", "/v1/tasks/"+canon.str("task.id"), nil).has("data.redirect"))
}

func TestPersonByNetworkURL(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.importJSONL(`{"type":"person","network_url":"https://www.linkedin.com/in/jane-doe","full_name":"Jane Doe","first_name":"Jane","last_name":"Doe",` +
		`"positions":[{"title":"CTO","company_name":"Acme","company_network_url":"https://www.linkedin.com/company/acme","start_date":"2020-01-01","start_date_precision":"year","is_current":true}],"emails":["jane@acme.com"]}`)
	e.startWorkers()
	r := e.do("POST", "/v1/people/enrich", map[string]string{"networkUrl": "https://de.linkedin.com/in/Jane-Doe/"})
	is.Equal(r.status, http.StatusAccepted)
	is.Equal(r.str("task.object_type"), "person")
	is.Equal(r.str("task.target"), "https://www.linkedin.com/in/jane-doe")
	done := e.waitSettled(r.str("task.id"))
	is.Equal(done.str("task.status"), "succeeded")
	is.Equal(done.str("data.full_name"), "Jane Doe")
	is.Equal(done.str("data.enrichment_status"), "enriched")
	is.True(done.str("data.last_enriched_at") != "")
	positions := done.get("data.positions").([]any)
	is.Equal(len(positions), 1)
	pos := positions[0].(map[string]any)
	is.Equal(pos["start_date"], "2020-01-01")
	is.Equal(pos["start_date_precision"], "year")
	is.Equal(pos["end_date"], nil)
	is.Equal(pos["is_current"], true)
	is.True(!done.has("data.email_match"))
}

func TestAMissFailsAndIsRefunded(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.startWorkers()
	r := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "nobody.example"})
	is.Equal(r.status, http.StatusAccepted)
	done := e.waitSettled(r.str("task.id"))
	is.Equal(done.str("task.status"), "failed")
	is.Equal(done.str("error.code"), "not_found")
	is.True(done.str("error.message") != "")
	is.True(!done.has("data"))
	is.Equal(done.get("task.credits_charged"), 1.0)
	b := e.balance("acme")
	is.Equal(b.Balance, int64(100))
	is.Equal(b.Charged, int64(1))
	is.Equal(b.Refund, int64(1))
}

func TestSourceDownFailsAsProviderUnavailable(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.net.setDown(true)
	e.startWorkers()
	r := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"})
	done := e.waitSettled(r.str("task.id"))
	is.Equal(done.str("task.status"), "failed")
	is.Equal(done.str("error.code"), "provider_unavailable")
	is.Equal(e.balance("acme").Balance, int64(100))
}

func TestAStaleRecordIsRefetched(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	url := "https://www.linkedin.com/in/jane-doe"
	e.net.addPerson(&enrich.Person{NetworkURL: &url, FullName: enrich.Ptr("Jane Doe"), Positions: []enrich.Position{}})
	e.startWorkers()
	first := e.waitSettled(e.do("POST", "/v1/people/enrich", map[string]string{"networkUrl": url}).str("task.id"))
	firstEnriched := first.str("data.last_enriched_at")

	e.clock.Add(31 * 24 * time.Hour)
	e.net.addPerson(&enrich.Person{NetworkURL: &url, FullName: enrich.Ptr("Jane Smith"), Positions: []enrich.Position{}})
	r := e.do("POST", "/v1/people/enrich", map[string]string{"networkUrl": url})
	is.Equal(r.status, http.StatusAccepted) // older than 30 days: fetched again
	done := e.waitSettled(r.str("task.id"))
	is.Equal(done.str("data.full_name"), "Jane Smith")
	is.True(done.str("data.last_enriched_at") > firstEnriched)

	// Refreshed: fresh again.
	is.Equal(e.do("POST", "/v1/people/enrich", map[string]string{"networkUrl": url}).status, http.StatusOK)
}

func TestARefreshWithTheSourceDownServesTheStoredRecord(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	url := "https://www.linkedin.com/in/jane-doe"
	e.net.addPerson(&enrich.Person{NetworkURL: &url, FullName: enrich.Ptr("Jane Doe"), Positions: []enrich.Position{}})
	e.startWorkers()
	first := e.waitSettled(e.do("POST", "/v1/people/enrich", map[string]string{"networkUrl": url}).str("task.id"))

	e.clock.Add(31 * 24 * time.Hour)
	e.net.setDown(true)
	r := e.do("POST", "/v1/people/enrich", map[string]string{"networkUrl": url})
	is.Equal(r.status, http.StatusAccepted)
	done := e.waitSettled(r.str("task.id"))
	is.Equal(done.str("task.status"), "succeeded")
	is.Equal(done.str("data.full_name"), "Jane Doe")
	is.Equal(done.str("data.last_enriched_at"), first.str("data.last_enriched_at")) // the old record, as old as it is
	is.Equal(e.balance("acme").Balance, int64(98))

	// Still stale: the next request queues a refresh again.
	is.Equal(e.do("POST", "/v1/people/enrich", map[string]string{"networkUrl": url}).status, http.StatusAccepted)
}

// TestBadRequestsAreRefusedAndChargeNothing sends every malformed input the contract
// names and checks the status, the body, and that no task was created or charged.
func TestBadRequestsAreRefusedAndChargeNothing(t *testing.T) {
	e := newEnv(t)
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
			r := e.do("POST", c.path, c.body, c.headers...)
			is.Equal(r.status, http.StatusBadRequest)
			is.True(strings.HasPrefix(r.header.Get("Content-Type"), "application/json"))
			msg := r.str("error")
			is.True(strings.Contains(msg, c.want)) // the error says what to fix
		})
	}
	is := is.New(t)
	b := e.balance("acme")
	is.Equal(b.Charged, int64(0))
	list := e.do("GET", "/v1/tasks", nil)
	is.Equal(list.get("total"), 0.0)
}

func TestUnauthorizedIsPlainText(t *testing.T) {
	e := newEnv(t)
	revoked, _ := e.newOrg("other", 10)
	if err := e.db.RevokeKey(t.Context(), store.BySystem, "other", revoked[:12]); err != nil {
		t.Fatal(err)
	}
	for name, auth := range map[string]string{
		"missing":      "",
		"wrong scheme": "Basic " + e.key,
		"unknown key":  "Bearer enr_" + strings.Repeat("A", 43),
		"not a key":    "Bearer hello",
		"revoked key":  "Bearer " + revoked,
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			for _, req := range []struct{ method, path string }{{"POST", "/v1/companies/enrich"}, {"GET", "/v1/tasks"}, {"GET", "/v1/tasks/0195f3a2-6b1c-7cde-8f00-123456789abc"}, {"POST", "/v1/tasks/x/cancel"}} {
				r := e.do(req.method, req.path, map[string]string{"domain": "acme.com"}, "Authorization", auth)
				is.Equal(r.status, http.StatusUnauthorized)
				is.Equal(string(r.raw), "Unauthorized")
				is.True(strings.HasPrefix(r.header.Get("Content-Type"), "text/plain"))
			}
		})
	}
	is := is.New(t)
	is.Equal(e.balance("other").Charged, int64(0))
	is.Equal(e.balance("acme").Charged, int64(0))
}

func TestPaymentRequired(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	broke, _ := e.newOrg("broke", 0)
	r := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"}, "Authorization", "Bearer "+broke)
	is.Equal(r.status, http.StatusPaymentRequired)
	is.Equal(r.str("code"), "insufficient_credits")
	is.Equal(r.get("creditsRemaining"), 0.0)
	is.True(r.str("error") != "")

	expires := e.clock.Now().Add(time.Hour)
	if _, err := e.db.GrantCredits(t.Context(), "broke", 5, &expires); err != nil {
		t.Fatal(err)
	}
	is.Equal(e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"}, "Authorization", "Bearer "+broke).status, http.StatusAccepted)
	e.clock.Add(2 * time.Hour)
	r = e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "other.com"}, "Authorization", "Bearer "+broke)
	is.Equal(r.status, http.StatusPaymentRequired)
	is.Equal(r.str("code"), "credits_expired")
	is.Equal(r.get("creditsRemaining"), 0.0)
	list := e.do("GET", "/v1/tasks", nil, "Authorization", "Bearer "+broke)
	is.Equal(list.get("total"), 1.0) // only the task that was paid for
}

func TestIdempotencyKey(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	key := strings.Repeat("k", 255)
	first := e.do("POST", "/v1/companies/enrich", `{"domain":"acme.com"}`, "Idempotency-Key", key)
	is.Equal(first.status, http.StatusAccepted)
	is.Equal(first.str("task.idempotency_key"), key)

	// The same body, spaced differently: the original task, 200, nothing charged.
	replay := e.do("POST", "/v1/companies/enrich", "{ \"domain\" : \"acme.com\" }", "Idempotency-Key", key)
	is.Equal(replay.status, http.StatusOK)
	is.Equal(replay.str("task.id"), first.str("task.id"))
	is.Equal(replay.header.Get("Idempotent-Replayed"), "true")
	is.Equal(first.header.Get("Idempotent-Replayed"), "")
	is.Equal(e.balance("acme").Charged, int64(1))

	reused := e.do("POST", "/v1/companies/enrich", `{"domain":"other.com"}`, "Idempotency-Key", key)
	is.Equal(reused.status, http.StatusUnprocessableEntity)
	is.Equal(reused.str("code"), "idempotency_key_reused")
	is.Equal(reused.str("error"), "this Idempotency-Key was first used on POST /v1/companies/enrich with a different request body; "+
		"send that body again to get the original task back, or a new key for a new request")
	// The same key on the other endpoint is another request too, and the answer says
	// that it is the endpoint, not the body, that differs.
	other := e.do("POST", "/v1/people/enrich", `{"networkUrl":"https://www.linkedin.com/in/x"}`, "Idempotency-Key", key)
	is.Equal(other.status, http.StatusUnprocessableEntity)
	is.Equal(other.str("code"), "idempotency_key_reused")
	is.Equal(other.str("error"), "this Idempotency-Key was first used on POST /v1/companies/enrich, not on POST /v1/people/enrich; "+
		"a key names one request: send a new key for this one")
	is.Equal(e.balance("acme").Charged, int64(1))
	is.Equal(e.do("GET", "/v1/tasks", nil).get("total"), 1.0)

	// Keys belong to an organization: another may use the same one.
	otherKey, _ := e.newOrg("other", 10)
	is.Equal(e.do("POST", "/v1/companies/enrich", `{"domain":"acme.com"}`, "Idempotency-Key", key, "Authorization", "Bearer "+otherKey).status, http.StatusAccepted)

	// A replay after the task settled shows it as it is now.
	e.startWorkers()
	e.waitSettled(first.str("task.id"))
	late := e.do("POST", "/v1/companies/enrich", `{"domain":"acme.com"}`, "Idempotency-Key", key)
	is.Equal(late.status, http.StatusOK)
	is.Equal(late.str("task.status"), "failed")
	is.Equal(late.str("error.code"), "not_found")
	is.Equal(e.balance("acme").Charged, int64(1))
}

func TestIdempotencyUnderConcurrency(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
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
			r := e.do("POST", "/v1/companies/enrich", `{"domain":"acme.com"}`, "Idempotency-Key", "same-key")
			results <- result{r.status, r.str("task.id")}
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
	is.Equal(e.balance("acme").Charged, int64(1))
	is.Equal(e.do("GET", "/v1/tasks", nil).get("total"), 1.0)
}

func TestRateLimits(t *testing.T) {
	t.Run("per key", func(t *testing.T) {
		is := is.New(t)
		e := newEnv(t, func(c *server.Config) { c.RateKey = server.Rate{Limit: 0.5, Burst: 2} })
		is.Equal(e.do("GET", "/v1/tasks", nil).status, 200)
		is.Equal(e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"}).status, http.StatusAccepted)
		r := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "other.com"})
		is.Equal(r.status, http.StatusTooManyRequests)
		is.Equal(r.str("code"), "rate_limited")
		is.True(r.header.Get("Retry-After") == "1" || r.header.Get("Retry-After") == "2")
		is.Equal(e.balance("acme").Charged, int64(1))
		// Another key has its own bucket.
		other, _ := e.newOrg("other", 10)
		is.Equal(e.do("GET", "/v1/tasks", nil, "Authorization", "Bearer "+other).status, 200)
	})
	t.Run("per key, shared with the other replicas alive", func(t *testing.T) {
		is := is.New(t)
		e := newEnv(t, func(c *server.Config) { c.RateKey = server.Rate{Limit: 0.001, Burst: 6} })
		// Another replica of the same database is alive (on SQLite there is none: a
		// file is served by one process, and the share is the whole).
		others, err := e.db.Heartbeat(context.Background(), "another-replica", time.Hour)
		is.NoErr(err)
		e.startWorkers() // this replica's first heartbeat sets its share
		want := 6 / (others + 1)
		if !onPostgres() {
			want = 6
		}
		deadline := time.Now().Add(10 * time.Second)
		for onPostgres() && !strings.Contains(e.logs.String(), "replicas alive changed") && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		allowed := 0
		for range 10 {
			if e.do("GET", "/v1/tasks", nil).status == http.StatusOK {
				allowed++
			}
		}
		is.Equal(allowed, want) // 3 of the burst of 6 on each of two replicas
	})
	t.Run("per client address", func(t *testing.T) {
		is := is.New(t)
		e := newEnv(t, func(c *server.Config) { c.RateIP = server.Rate{Limit: 0.1, Burst: 1} })
		is.Equal(e.do("GET", "/v1/tasks", nil).status, 200)
		other, _ := e.newOrg("other", 10)
		r := e.do("GET", "/v1/tasks", nil, "Authorization", "Bearer "+other)
		is.Equal(r.status, http.StatusTooManyRequests) // the same address, whatever the key
		is.Equal(r.str("code"), "rate_limited")
		is.Equal(r.header.Get("Retry-After"), "10")
		// Unauthenticated requests count too.
		is.Equal(e.do("GET", "/v1/tasks", nil, "Authorization", "").status, http.StatusTooManyRequests)
	})
}

func TestQueueFull(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, func(c *server.Config) { c.MaxBacklog = 2 })
	e.importJSONL(`{"type":"company","name":"Acme","domain":"acme.com"}`)
	for _, d := range []string{"a.com", "b.com"} {
		is.Equal(e.do("POST", "/v1/companies/enrich", map[string]string{"domain": d}).status, http.StatusAccepted)
	}
	r := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "c.com"})
	is.Equal(r.status, http.StatusTooManyRequests)
	is.Equal(r.str("code"), "queue_full")
	is.Equal(r.get("queuedTasks"), 2.0)
	is.True(r.header.Get("Retry-After") != "")
	is.Equal(e.balance("acme").Charged, int64(2))
	is.Equal(e.do("GET", "/v1/tasks", nil).get("total"), 2.0)

	// The backlog is per organization.
	other, _ := e.newOrg("other", 10)
	is.Equal(e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "c.com"}, "Authorization", "Bearer "+other).status, http.StatusAccepted)

	// Once tasks drain, requests are accepted again.
	e.startWorkers()
	e.waitSettled(e.do("GET", "/v1/tasks?pageSize=1", nil).get("data").([]any)[0].(map[string]any)["id"].(string))
	deadline := time.Now().Add(10 * time.Second)
	for e.do("GET", "/v1/tasks?status=queued", nil).get("total") != 0.0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	is.Equal(e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "c.com"}).status, http.StatusAccepted)
}

func TestServerErrorsCarryARequestID(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	key := e.key
	e.db.Close() // the database goes away under the server
	r := e.do("GET", "/v1/tasks", nil, "Authorization", "Bearer "+key)
	is.Equal(r.status, http.StatusInternalServerError)
	id := r.str("requestId")
	is.True(id != "")
	is.Equal(r.header.Get("X-Request-Id"), id)
	is.True(!strings.Contains(r.str("error"), "sql")) // no internals in the body
	is.True(strings.Contains(e.logs.String(), fmt.Sprintf(`"requestId":%q`, id)))
	e.db = nil
}

func TestUnknownPathsAndMethods(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	r := e.do("GET", "/v1/nothing", nil)
	is.Equal(r.status, http.StatusNotFound)
	is.Equal(r.str("code"), "not_found")
	r = e.do("DELETE", "/v1/tasks", nil)
	is.Equal(r.status, http.StatusMethodNotAllowed)
	is.Equal(r.str("code"), "method_not_allowed")
	is.Equal(r.header.Get("Allow"), "GET")
	r = e.do("GET", "/v1/companies/enrich", nil)
	is.Equal(r.status, http.StatusMethodNotAllowed)
}

// TestASettledTaskReadsTheSameEveryTime reads a task while it is queued, then once it
// has settled, again and again: every read of the settled task answers the same body
// (the later ones without reading the database), a read while it was queued said so,
// and another organization's key is never answered with it, before or after.
func TestASettledTaskReadsTheSameEveryTime(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.net.addCompany(company("Acme", "acme.com"))
	otherKey, _ := e.newOrg("other", 10)
	id := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"}).str("task.id")

	queued := e.do("GET", "/v1/tasks/"+id, nil)
	is.Equal(queued.status, 200)
	is.Equal(queued.str("task.status"), "queued")
	is.Equal(queued.header.Get("Retry-After"), "2")
	is.Equal(e.do("GET", "/v1/tasks/"+id, nil, "Authorization", "Bearer "+otherKey).status, 404)

	e.startWorkers()
	settled := e.waitSettled(id)
	is.Equal(settled.str("task.status"), "succeeded")
	for range 3 {
		again := e.do("GET", "/v1/tasks/"+id, nil)
		is.Equal(again.status, 200)
		is.Equal(string(again.raw), string(settled.raw))
		is.Equal(again.header.Get("Retry-After"), "")
		is.Equal(again.header.Get("Content-Type"), "application/json")
		other := e.do("GET", "/v1/tasks/"+id, nil, "Authorization", "Bearer "+otherKey)
		is.Equal(other.status, 404)
		is.Equal(other.str("code"), "not_found")
	}
}
