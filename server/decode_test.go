package server_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// refused checks a 400 whose JSON error holds want.
func refused(t *testing.T, r *response, want string) {
	t.Helper()
	is := is.NewRelaxed(t)
	is.Equal(r.status, http.StatusBadRequest)
	is.True(strings.HasPrefix(r.header.Get("Content-Type"), "application/json"))
	is.True(strings.Contains(r.str("error"), want)) // the error says what to fix
	is.Equal(r.str("code"), "invalid_input")        // and the code a program branches on
	if t.Failed() {
		t.Logf("got %d %s", r.status, r.raw)
	}
}

// nothingCharged checks that org acme was charged nothing and has no task.
func (e *env) nothingCharged() {
	e.t.Helper()
	is := is.New(e.t)
	is.Equal(e.balance("acme").Charged, int64(0))
	is.Equal(e.do("GET", "/v1/tasks", nil).get("total"), 0.0)
}

func TestInvalidUTF8InTheBodyIsRefused(t *testing.T) {
	e := newEnv(t, allowPrivateWebhooks)
	personLoop, _ := e.createLoop("people", "https://hooks.example/p", "person")
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
			refused(t, e.do("POST", c.path, c.body), "not valid UTF-8")
		})
	}
	is := is.New(t)
	// Valid UTF-8, escaped or not, and U+FFFD sent as itself, are accepted.
	ok := e.do("POST", "/v1/people/enrich", "{\"email\":\"jane@acme.com\",\"fullName\":\"Jané \\u00e9 \uFFFD \\ufffd \\ud83d\\ude00 \\\\ud800\"}")
	is.Equal(ok.status, http.StatusAccepted)
	is.Equal(ok.get("task.input.fullName"), "Jané é \uFFFD \uFFFD 😀 \\ud800")
	is.Equal(e.balance("acme").Charged, int64(3))
	is.Equal(e.do("GET", "/v1/tasks", nil).get("total"), 1.0)
	loops := e.do("GET", "/v1/loops", nil).get("data").([]any)
	is.Equal(len(loops), 1) // only the one made above
}

func TestAnotherCharsetIsRefused(t *testing.T) {
	e := newEnv(t)
	for _, ct := range []string{
		"application/json; charset=iso-8859-1",
		"application/json; charset=utf-16",
		"application/json;charset=windows-1252",
		`application/json; charset="latin1"`,
	} {
		t.Run(ct, func(t *testing.T) {
			refused(t, e.do("POST", "/v1/companies/enrich", `{"domain":"acme.com"}`, "Content-Type", ct), "must be UTF-8")
		})
	}
	refused(t, e.do("POST", "/v1/companies/enrich", `{"domain":"acme.com"}`, "Content-Type", "application/json; charset="), "Content-Type: application/json")
	long := e.do("POST", "/v1/companies/enrich", `{"domain":"acme.com"}`, "Content-Type", "application/json; charset="+strings.Repeat("x", 5000))
	refused(t, long, "must be UTF-8")
	is := is.New(t)
	is.True(len(long.str("error")) < 300) // the value sent is not echoed whole
	e.nothingCharged()

	for i, ct := range []string{"application/json; charset=utf-8", "application/json; charset=UTF-8", `Application/JSON;charset="Utf-8"`} {
		r := e.do("POST", "/v1/companies/enrich", fmt.Sprintf(`{"domain":"c%d.com"}`, i), "Content-Type", ct)
		is.Equal(r.status, http.StatusAccepted)
	}
}

// doHeaders sends a body with a header that may repeat, which env.do cannot.
func (e *env) doHeaders(path, body string, header http.Header) *response {
	e.t.Helper()
	req, err := http.NewRequest("POST", e.http.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header = header
	req.Header.Set("Authorization", "Bearer "+e.key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := &response{status: res.StatusCode, header: res.Header, raw: raw}
	e.checkOpenAPI(req, []byte(body), out)
	return out
}

func TestIdempotencyKeyIsBounded(t *testing.T) {
	e := newEnv(t, allowPrivateWebhooks)
	companyLoop, _ := e.createLoop("companies", "https://hooks.example/c", "company")
	for _, path := range []string{"/v1/companies/enrich", "/v1/loops/" + companyLoop + "/run"} {
		t.Run(path, func(t *testing.T) {
			refused(t, e.do("POST", path, `{"domain":"acme.com"}`, "Idempotency-Key", strings.Repeat("k", 256)), "longer than 255 characters")
			refused(t, e.do("POST", path, `{"domain":"acme.com"}`, "Idempotency-Key", strings.Repeat("é", 256)), "longer than 255 characters")
			refused(t, e.do("POST", path, `{"domain":"acme.com"}`, "Idempotency-Key", strings.Repeat("k", 100_000)), "longer than 255 characters")
			twice := e.doHeaders(path, `{"domain":"acme.com"}`, http.Header{"Idempotency-Key": {"a", "b"}})
			if twice.status != http.StatusBadRequest || !bytes.Contains(twice.raw, []byte("sent 2 times")) {
				t.Errorf("two keys: %d %s", twice.status, twice.raw)
			}
		})
	}
	refused(t, e.do("POST", "/v1/people/enrich", `{"email":"jane@acme.com"}`, "Idempotency-Key", strings.Repeat("k", 256)), "longer than 255 characters")
	e.nothingCharged()

	// 255 characters is the limit, counted in characters, not bytes.
	is := is.New(t)
	for i, key := range []string{strings.Repeat("k", 255), strings.Repeat("é", 255)} {
		r := e.do("POST", "/v1/companies/enrich", fmt.Sprintf(`{"domain":"c%d.com"}`, i), "Idempotency-Key", key)
		is.Equal(r.status, http.StatusAccepted)
		is.Equal(r.str("task.idempotency_key"), key)
	}
}
