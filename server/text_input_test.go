package server_test

import (
	"net/http"
	"strings"
	"testing"

	"enrichd/server/servertest"

	"github.com/matryer/is"
)

// Bytes that are not UTF-8, or control characters, in anything a client sends that
// would be stored are refused by one rule, 400 invalid_input, before anything is
// charged or stored, and with the same answer on SQLite and PostgreSQL (where they
// answered 500 or were stored as sent, or a decoded URL became U+FFFD).
func TestTextThatIsNotValidIsRefusedOnEitherEngine(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t)
	companyLoop, _ := e.CreateLoop("Companies", rcv.Srv.URL, "company")
	before := e.Balance("acme")
	tasksBefore := e.Do("GET", "/v1/tasks", nil).Get("total")
	for _, tt := range []struct {
		name, path string
		body       any
		headers    []string
		want       string
	}{
		{"Idempotency-Key not UTF-8", "/v1/companies/enrich", map[string]any{"domain": "acme.com"},
			[]string{"Idempotency-Key", "ab\xff\xfe"}, "Idempotency-Key is not valid UTF-8"},
		{"Idempotency-Key with a tab", "/v1/companies/enrich", map[string]any{"domain": "acme.com"},
			[]string{"Idempotency-Key", "ab\tcd"}, "Idempotency-Key holds a control character"},
		{"company slug not UTF-8", "/v1/companies/enrich", map[string]any{"networkUrl": "https://www.linkedin.com/company/%ff%fe"},
			nil, "percent-decoded, is not valid UTF-8"},
		{"profile slug not UTF-8", "/v1/people/enrich", map[string]any{"networkUrl": "https://www.linkedin.com/in/%c3%28"},
			nil, "percent-decoded, is not valid UTF-8"},
		{"profile slug with a control character", "/v1/people/enrich", map[string]any{"networkUrl": "https://www.linkedin.com/in/jane%01doe"},
			nil, "holds a control character"},
		{"domain with a control character", "/v1/companies/enrich", map[string]any{"domain": "acme\u0000.com"},
			nil, "domain holds a control character"},
		{"email with a control character", "/v1/people/enrich", map[string]any{"email": "ja\u0007ne@acme.com"},
			nil, "email holds a control character"},
		{"hint with a control character", "/v1/people/enrich", map[string]any{"email": "jane@acme.com", "fullName": "Jane\u001bDoe"},
			nil, "fullName holds a control character"},
		{"Loop name with a control character", "/v1/loops", map[string]any{"name": "CRM\u0085", "webhook_url": rcv.Srv.URL, "object_type": "company"},
			nil, "name holds a control character"},
		{"watch on a slug not UTF-8", "/v1/watches", map[string]any{"object_type": "company", "networkUrl": "https://www.linkedin.com/company/%ff", "loop_id": companyLoop},
			nil, "not valid UTF-8"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			r := e.Do("POST", tt.path, tt.body, tt.headers...)
			is.Equal(r.Status, http.StatusBadRequest)
			is.Equal(r.Str("code"), "invalid_input")
			if !strings.Contains(r.Str("error"), tt.want) {
				t.Errorf("error %q does not say %q", r.Str("error"), tt.want)
			}
		})
	}
	is := is.New(t)
	is.Equal(e.Balance("acme"), before)                                 // nothing charged
	is.Equal(e.Do("GET", "/v1/tasks", nil).Get("total"), tasksBefore)   // no task
	is.Equal(len(e.Do("GET", "/v1/loops", nil).Get("data").([]any)), 1) // no Loop but the first
	is.Equal(e.WatchTotal(), float64(0))                                // no watch
}

// The rule refuses only bytes that are not UTF-8 and control characters: the rest of
// Unicode that names and titles are written in (letters outside the BMP, combining
// marks, right-to-left text and its marks, U+2028) is accepted as before, and kept as
// sent, on either engine.
func TestTextOfAnyScriptIsAccepted(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t)
	for _, tt := range []struct {
		name, text string
	}{
		{"letters outside the BMP", "\U00020BB7\U0001D400 Jane 😀"},
		{"combining marks", "Jose\u0301 Zoe\u0308"},
		{"right-to-left text and marks", "\u200fعلي\u200e Ali \u202bx\u202c"},
		{"a line separator", "Jane\u2028Doe"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			r := e.Do("POST", "/v1/people/enrich", map[string]any{"email": "jane@acme.com", "fullName": tt.text, "title": tt.text},
				"Idempotency-Key", tt.text)
			is.Equal(r.Status, http.StatusAccepted) // r.raw
			id, _ := e.CreateLoop(tt.text, rcv.Srv.URL, "company")
			loop := e.Do("GET", "/v1/loops/"+id, nil)
			is.Equal(loop.Status, http.StatusOK)
			is.Equal(loop.Str("data.name"), tt.text) // kept as sent
		})
	}
}
