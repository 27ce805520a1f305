package source_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"enrichd/enrich"
	"enrichd/enrich/enrichtest"
	"enrichd/enrich/source"
)

// A vendor (or anything between) answering with a redirect to another host must not
// receive the API key again: Go strips Authorization across hosts, not X-Api-Key.
func TestVendorsDoNotFollowRedirectsWithTheKey(t *testing.T) {
	var leaked atomic.Value
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked.Store(r.Header.Get("X-Api-Key") + "|" + r.Header.Get("Authorization"))
		w.WriteHeader(404)
	}))
	defer other.Close()
	otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1) // another host name
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, otherURL+"/collect", http.StatusFound)
	}))
	defer vendor.Close()
	for _, name := range []string{"pdl", "enrichlayer", "apollo"} {
		leaked.Store("")
		cfg := source.VendorConfig{APIKey: "sekrit-key-123", BaseURL: vendor.URL, Rate: 1000, Burst: 1000}
		var src enrich.Source
		var err error
		switch name {
		case "pdl":
			src, err = source.NewPDL(cfg)
		case "enrichlayer":
			src, err = source.NewEnrichLayer(cfg)
		default:
			src, err = source.NewApollo(cfg)
		}
		if err != nil {
			t.Fatal(err)
		}
		src.PersonByURL(context.Background(), nil, "https://www.linkedin.com/in/x")
		if got := leaked.Load().(string); strings.Contains(got, "sekrit-key-123") {
			t.Errorf("%s: the key was sent to the redirect target on another host: %q", name, got)
		}
	}
}

// A page that links to several company pages (a partner, its own) claims none of them:
// taking the first would give the site another company's identity.
func TestAPageLinkingSeveralCompanyPagesClaimsNone(t *testing.T) {
	s := newSites(t, func(w http.ResponseWriter, r *http.Request) {
		page(w, `<title>Acme | Anvils</title><body>
<p>Proud partner of <a href="https://www.linkedin.com/company/bigbank">BigBank</a></p>
<footer><a href="https://www.linkedin.com/company/acme">Follow us</a></footer></body>`)
	})
	var asked []string
	network := enrichtest.Source{SourceName: "vendor", Asked: &asked, Company: &enrich.Company{Name: "BigBank", Domain: strp("bigbank.com")}}
	c, err := s.web(true, network).CompanyByDomain(context.Background(), nil, "acme.test")
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "Acme" || c.Domain == nil || *c.Domain != "acme.test" || c.Redirect != nil || c.NetworkURL != nil || len(asked) != 0 {
		t.Errorf("acme.test came back as %q (domain %v, redirect %+v, network_url %v, asked %v)", c.Name, c.Domain, c.Redirect, c.NetworkURL, asked)
	}
}

// JSON-LD: LocalBusiness, the most common type on small company sites, is an
// organization too.
func TestJSONLDLocalBusinessIsAnOrganization(t *testing.T) {
	s := newSites(t, func(w http.ResponseWriter, r *http.Request) {
		page(w, `<title>Home</title><script type="application/ld+json">{"@type":"LocalBusiness","name":"Joe's Bakery","foundingDate":"1990","sameAs":["https://www.linkedin.com/company/joes-bakery"]}</script>`)
	})
	c, err := s.web(true).CompanyByDomain(context.Background(), nil, "ld.test")
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "Joe's Bakery" || c.YearFounded == nil {
		t.Errorf("name %q year %v network %v", c.Name, c.YearFounded, c.NetworkURL)
	}
}

// /v1/status shows last_error to any organization's key, so it must not carry the
// request URL: that names the profile another organization looked up.
func TestLastErrorDoesNotNameTheLookup(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	base := dead.URL
	dead.Close() // nothing listens there any more
	cfg := source.VendorConfig{APIKey: "k-123456", BaseURL: base, Rate: 1000, Burst: 1000, Attempts: 1}
	el, err := source.NewEnrichLayer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ap, err := source.NewApollo(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []interface {
		enrich.Source
		enrich.Metered
	}{el, ap} {
		src.PersonByURL(context.Background(), nil, "https://www.linkedin.com/in/jane-doe-secret-candidate")
		le := src.Stats().LastError
		if le == nil {
			t.Fatalf("%s: an unreachable vendor left no last_error", src.Name())
		}
		if strings.Contains(*le, "jane-doe-secret-candidate") {
			t.Errorf("%s: last_error names the looked-up profile: %s", src.Name(), *le)
		}
	}
	ap.PersonByEmail(context.Background(), nil, "jane.secret@acme.com")
	if le := ap.Stats().LastError; le == nil || strings.Contains(*le, "jane.secret") {
		t.Errorf("apollo: last_error names the looked-up address: %v", le)
	}
}
