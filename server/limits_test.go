package server_test

import (
	"net/http"
	"strings"
	"testing"

	"enrichd/server/servertest"

	"github.com/matryer/is"
)

// Inputs at the limits of the RFCs and of the contract: one byte (or character) more
// is refused with 400 invalid_input naming the limit, before any work or charge.
var (
	// A domain name of exactly 253 bytes, labels of at most 63.
	domain253 = strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 57) + ".com"
	domain254 = strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 58) + ".com"
	// An address of exactly 254 bytes: a local part of 64, a domain of 189.
	address254 = strings.Repeat("j", 64) + "@" + strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 57) + ".com"
	address255 = strings.Repeat("j", 64) + "@" + strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 58) + ".com"
	profile    = "https://www.linkedin.com/in/"
	page       = "https://www.linkedin.com/company/"
)

func TestInputsOverTheirLimitsAreRefusedBeforeAnyCharge(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	personLoop, _ := e.CreateLoop("people", "https://hooks.example/p", "person")
	companyLoop, _ := e.CreateLoop("companies", "https://hooks.example/c", "company")
	long := func(n int) string { return strings.Repeat("a", n) }
	cases := []struct {
		name string
		path string
		body map[string]string
		want string // in the error: the field and the limit
	}{
		{"domain of 254 bytes", "/v1/companies/enrich", map[string]string{"domain": domain254}, "domain is longer than 253 bytes"},
		{"domain of 30,000 bytes", "/v1/companies/enrich", map[string]string{"domain": long(30000) + ".com"}, "longer than 2048 bytes"},
		{"domain with a label of 64 bytes", "/v1/companies/enrich", map[string]string{"domain": long(64) + ".com"}, "domain has a label (a part between dots) longer than 63 bytes"},
		{"domain with a label of 64 in a website address", "/v1/companies/enrich", map[string]string{"domain": "https://www." + long(64) + ".com/about"}, "longer than 63 bytes"},
		{"website address of 2049 bytes", "/v1/companies/enrich", map[string]string{"domain": "https://acme.com/" + long(2049-len("https://acme.com/"))}, "domain is longer than 2048 bytes"},
		{"company page of 2049 bytes", "/v1/companies/enrich", map[string]string{"networkUrl": page + long(2049-len(page))}, "networkUrl is longer than 2048 bytes"},
		{"profile of 2049 bytes", "/v1/people/enrich", map[string]string{"networkUrl": profile + long(2049-len(profile))}, "networkUrl is longer than 2048 bytes"},
		{"profile of 60,000 bytes", "/v1/people/enrich", map[string]string{"networkUrl": profile + long(60000)}, "networkUrl is longer than 2048 bytes"},
		{"local part of 65 bytes", "/v1/people/enrich", map[string]string{"email": long(65) + "@acme.com"}, "local part of email (before the @) is longer than 64 bytes"},
		{"local part of 30,000 bytes", "/v1/people/enrich", map[string]string{"email": long(30000) + "@acme.com"}, "longer than 64 bytes"},
		{"local part of 60,000 bytes", "/v1/people/enrich", map[string]string{"email": long(60000) + "@acme.com"}, "longer than 64 bytes"},
		{"local part of 33 two-byte letters", "/v1/people/enrich", map[string]string{"email": strings.Repeat("é", 33) + "@acme.com"}, "longer than 64 bytes"},
		{"address of 255 bytes", "/v1/people/enrich", map[string]string{"email": address255}, "email is longer than 254 bytes"},
		{"no address, 30,000 bytes", "/v1/people/enrich", map[string]string{"email": long(30000)}, "email is longer than 254 bytes"},
		{"email domain of 254 bytes", "/v1/people/enrich", map[string]string{"email": "jane@" + domain254}, "the domain of email is longer than 253 bytes"},
		{"email domain with a label of 64 bytes", "/v1/people/enrich", map[string]string{"email": "jane@" + long(64) + ".com"}, "the domain of email has a label (a part between dots) longer than 63 bytes"},
		{"fullName of 201 characters", "/v1/people/enrich", map[string]string{"email": "jane@acme.com", "fullName": strings.Repeat("é", 201)}, "fullName is longer than 200 characters"},
		{"title of 201 characters", "/v1/people/enrich", map[string]string{"email": "jane@acme.com", "title": long(201)}, "title is longer than 200 characters"},
		{"location of 201 characters", "/v1/people/enrich", map[string]string{"email": "jane@acme.com", "location": long(201)}, "location is longer than 200 characters"},
		{"Loop run: local part of 65 bytes", "/v1/loops/" + personLoop + "/run", map[string]string{"email": long(65) + "@acme.com"}, "longer than 64 bytes"},
		{"Loop run: profile of 2049 bytes", "/v1/loops/" + personLoop + "/run", map[string]string{"networkUrl": profile + long(2049-len(profile))}, "longer than 2048 bytes"},
		{"Loop run: hint of 201 characters", "/v1/loops/" + personLoop + "/run", map[string]string{"email": "jane@acme.com", "location": long(201)}, "location is longer than 200 characters"},
		{"Loop run: domain of 254 bytes", "/v1/loops/" + companyLoop + "/run", map[string]string{"domain": domain254}, "longer than 253 bytes"},
		{"Loop run: company page of 2049 bytes", "/v1/loops/" + companyLoop + "/run", map[string]string{"networkUrl": page + long(2049-len(page))}, "longer than 2048 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.Do("POST", c.path, c.body)
			refused(t, r, c.want)
			// The refusal does not echo the input back.
			is.New(t).True(len(r.Raw) < 512)
		})
	}
	e.NothingCharged()
	is := is.New(t)
	b := e.Balance("acme")
	is.Equal(b.Balance, int64(100))
	is.Equal(b.Refund, int64(0))
}

// Inputs exactly at their limits are accepted: the limits are the RFCs', not tighter.
func TestInputsAtTheirLimitsAreAccepted(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	for name, c := range map[string]struct {
		path string
		body map[string]string
	}{
		"domain of 253 bytes":           {"/v1/companies/enrich", map[string]string{"domain": domain253}},
		"website address of 2048 bytes": {"/v1/companies/enrich", map[string]string{"domain": "https://acme.com/" + strings.Repeat("a", 2048-len("https://acme.com/"))}},
		"company page of 2048 bytes":    {"/v1/companies/enrich", map[string]string{"networkUrl": page + strings.Repeat("a", 2048-len(page))}},
		"profile of 2048 bytes":         {"/v1/people/enrich", map[string]string{"networkUrl": profile + strings.Repeat("a", 2048-len(profile))}},
		"local part of 64 bytes":        {"/v1/people/enrich", map[string]string{"email": strings.Repeat("j", 64) + "@acme.com"}},
		"address of 254 bytes":          {"/v1/people/enrich", map[string]string{"email": address254}},
		"label of 63 bytes":             {"/v1/people/enrich", map[string]string{"email": "jane@" + strings.Repeat("a", 63) + ".com"}},
		"hints of 200 characters": {"/v1/people/enrich", map[string]string{"email": "jane.doe@acme.com",
			"fullName": strings.Repeat("é", 200), "title": strings.Repeat("t", 200), "location": strings.Repeat("l", 200)}},
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			r := e.Do("POST", c.path, c.body)
			is.True(r.Status == http.StatusAccepted || r.Status == http.StatusOK) // accepted, not refused
			is.True(r.Str("task.id") != "")
		})
	}
}
