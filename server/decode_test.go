package server_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"enrichd/server/servertest"

	"github.com/matryer/is"
)

// refused checks a 400 whose JSON error holds want.
func refused(t *testing.T, r *servertest.Response, want string) {
	t.Helper()
	is := is.NewRelaxed(t)
	is.Equal(r.Status, http.StatusBadRequest)
	is.True(strings.HasPrefix(r.Header.Get("Content-Type"), "application/json"))
	is.True(strings.Contains(r.Str("error"), want)) // the error says what to fix
	is.Equal(r.Str("code"), "invalid_input")        // and the code a program branches on
	if t.Failed() {
		t.Logf("got %d %s", r.Status, r.Raw)
	}
}

func TestInvalidUTF8InTheBodyIsRefused(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	personLoop, _ := e.CreateLoop("people", "https://hooks.example/p", "person")
	for name, c := range map[string]struct{ path, body string }{
		"a hint":                          {"/v1/people/enrich", "{\"email\":\"jane@acme.com\",\"fullName\":\"Jan\xe9 Doe\"}"},
		"the email":                       {"/v1/people/enrich", "{\"email\":\"j\xffane@acme.com\"}"},
		"a truncated sequence":            {"/v1/people/enrich", "{\"email\":\"jane@acme.com\",\"title\":\"CT\xe2\x82\"}"},
		"a surrogate half":                {"/v1/people/enrich", "{\"email\":\"jane@acme.com\",\"location\":\"\xed\xa0\x80\"}"},
		"an overlong encoding":            {"/v1/people/enrich", "{\"email\":\"jane@acme.com\",\"location\":\"\xc0\xaf\"}"},
		"the domain":                      {"/v1/companies/enrich", "{\"domain\":\"acme\xff.com\"}"},
		"a field name":                    {"/v1/companies/enrich", "{\"dom\xffain\":\"acme.com\"}"},
		"a Loop run":                      {"/v1/loops/" + personLoop + "/run", "{\"email\":\"jane@acme.com\",\"fullName\":\"\xff\"}"},
		"a Loop's name":                   {"/v1/loops", "{\"name\":\"hooks \xff\",\"webhook_url\":\"https://hooks.example/x\"}"},
		"between tokens":                  {"/v1/companies/enrich", "{\"domain\":\"acme.com\"\xff}"},
		"escaped is fine but raw…":        {"/v1/people/enrich", "{\"email\":\"jane@acme.com\",\"fullName\":\"\\u00e9\xe9\"}"},
		"an escaped high surrogate alone": {"/v1/people/enrich", `{"email":"jane@acme.com","fullName":"Jane \ud83d Doe"}`},
		"an escaped low surrogate alone":  {"/v1/people/enrich", `{"email":"jane@acme.com","title":"\ude00"}`},
		"two high surrogates":             {"/v1/people/enrich", `{"email":"jane@acme.com","title":"\uD83D\uD83D"}`},
		"a surrogate at the end":          {"/v1/companies/enrich", `{"domain":"acme.com\ud800"}`},
	} {
		t.Run(name, func(t *testing.T) {
			refused(t, e.Do("POST", c.path, c.body), "not valid UTF-8")
		})
	}
	is := is.New(t)
	// Valid UTF-8, escaped or not, and U+FFFD sent as itself, are accepted.
	ok := e.Do("POST", "/v1/people/enrich", "{\"email\":\"jane@acme.com\",\"fullName\":\"Jané \\u00e9 \uFFFD \\ufffd \\ud83d\\ude00 \\\\ud800\"}")
	is.Equal(ok.Status, http.StatusAccepted)
	is.Equal(ok.Get("task.input.fullName"), "Jané é \uFFFD \uFFFD 😀 \\ud800")
	is.Equal(e.Balance("acme").Charged, int64(3))
	is.Equal(e.Do("GET", "/v1/tasks", nil).Get("total"), 1.0)
	loops := e.Do("GET", "/v1/loops", nil).Get("data").([]any)
	is.Equal(len(loops), 1) // only the one made above
}

func TestAnotherCharsetIsRefused(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t)
	for _, ct := range []string{
		"application/json; charset=iso-8859-1",
		"application/json; charset=utf-16",
		"application/json;charset=windows-1252",
		`application/json; charset="latin1"`,
	} {
		t.Run(ct, func(t *testing.T) {
			refused(t, e.Do("POST", "/v1/companies/enrich", `{"domain":"acme.com"}`, "Content-Type", ct), "must be UTF-8")
		})
	}
	refused(t, e.Do("POST", "/v1/companies/enrich", `{"domain":"acme.com"}`, "Content-Type", "application/json; charset="), "Content-Type: application/json")
	long := e.Do("POST", "/v1/companies/enrich", `{"domain":"acme.com"}`, "Content-Type", "application/json; charset="+strings.Repeat("x", 5000))
	refused(t, long, "must be UTF-8")
	is := is.New(t)
	is.True(len(long.Str("error")) < 300) // the value sent is not echoed whole
	e.NothingCharged()

	for i, ct := range []string{"application/json; charset=utf-8", "application/json; charset=UTF-8", `Application/JSON;charset="Utf-8"`} {
		r := e.Do("POST", "/v1/companies/enrich", fmt.Sprintf(`{"domain":"c%d.com"}`, i), "Content-Type", ct)
		is.Equal(r.Status, http.StatusAccepted)
	}
}

func TestIdempotencyKeyIsBounded(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	companyLoop, _ := e.CreateLoop("companies", "https://hooks.example/c", "company")
	for _, path := range []string{"/v1/companies/enrich", "/v1/loops/" + companyLoop + "/run"} {
		t.Run(path, func(t *testing.T) {
			refused(t, e.Do("POST", path, `{"domain":"acme.com"}`, "Idempotency-Key", strings.Repeat("k", 256)), "longer than 255 characters")
			refused(t, e.Do("POST", path, `{"domain":"acme.com"}`, "Idempotency-Key", strings.Repeat("é", 256)), "longer than 255 characters")
			refused(t, e.Do("POST", path, `{"domain":"acme.com"}`, "Idempotency-Key", strings.Repeat("k", 100_000)), "longer than 255 characters")
			twice := e.DoHeaders(path, `{"domain":"acme.com"}`, http.Header{"Idempotency-Key": {"a", "b"}})
			if twice.Status != http.StatusBadRequest || !bytes.Contains(twice.Raw, []byte("sent 2 times")) {
				t.Errorf("two keys: %d %s", twice.Status, twice.Raw)
			}
		})
	}
	refused(t, e.Do("POST", "/v1/people/enrich", `{"email":"jane@acme.com"}`, "Idempotency-Key", strings.Repeat("k", 256)), "longer than 255 characters")
	e.NothingCharged()

	// 255 characters is the limit, counted in characters, not bytes.
	is := is.New(t)
	for i, key := range []string{strings.Repeat("k", 255), strings.Repeat("é", 255)} {
		r := e.Do("POST", "/v1/companies/enrich", fmt.Sprintf(`{"domain":"c%d.com"}`, i), "Idempotency-Key", key)
		is.Equal(r.Status, http.StatusAccepted)
		is.Equal(r.Str("task.idempotency_key"), key)
	}
}
