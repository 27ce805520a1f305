package source_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"enrichd/enrich"
	"enrichd/enrich/enrichtest"
	"enrichd/enrich/source"
	"enrichd/netguard"
)

// sites serves several websites ("acme.test", "www.acme.test", ...) from one local TLS
// listener, with a certificate for all of them. Only the network edge is fake: the web
// source dials, handshakes and follows redirects for real.
type sites struct {
	srv   *httptest.Server
	roots *x509.CertPool
	hits  atomic.Int64
}

var siteHosts = []string{"acme.test", "www.acme.test", "acme-old.test", "slow.test", "down.test", "huge.test", "ld.test", "plain.test", "alias.test", "pdf.test"}

func newSites(t *testing.T, handler http.HandlerFunc) *sites {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "enrichd test sites"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		DNSNames:              siteHosts,
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	s := &sites{roots: x509.NewCertPool()}
	s.roots.AddCert(cert)
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		handler(w, r)
	}))
	s.srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)
	return s
}

// web returns a web source whose *.test hosts lead to the listener; "nxdomain.test"
// does not resolve. The policy allows the loopback listener unless told otherwise.
func (s *sites) web(allowPrivate bool, network ...enrich.Source) *source.Web {
	return &source.Web{
		Network: network,
		Policy:  netguard.Policy{AllowPrivate: allowPrivate},
		RootCAs: s.roots,
		ResolveAddr: func(addr string) (string, error) {
			host, _, _ := net.SplitHostPort(addr)
			if host == "nxdomain.test" {
				return "", &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
			}
			return s.srv.Listener.Addr().String(), nil
		},
	}
}

func page(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write([]byte(body))
}

func TestWebPlainPage(t *testing.T) {
	is := is.New(t)
	var ua string
	s := newSites(t, func(w http.ResponseWriter, r *http.Request) {
		ua = r.Header.Get("User-Agent")
		page(w, `<!doctype html><html><head><title>Plain Widgets | Widgets for everyone</title>
<meta name="description" content="Plain makes widgets.">
<meta property="og:description" content="Not this one."></head>
<body><a href="/about">About</a><a href="https://www.linkedin.com/company/plain-widgets/about/">Us elsewhere</a></body></html>`)
	})
	c, err := s.web(true).CompanyByDomain(context.Background(), nil, "plain.test")
	is.NoErr(err)
	want := &enrich.Company{
		Name:             "Plain Widgets",
		EnrichmentStatus: "enriched",
		Domain:           strp("plain.test"),
		NetworkURL:       strp("https://www.linkedin.com/company/plain-widgets"),
		About:            strp("Plain makes widgets."),
	}
	is.Equal(asJSON(t, c), asJSON(t, want))
	is.True(strings.HasPrefix(ua, "enrichd/"))
}

func TestWebJSONLDAndNetworkMerge(t *testing.T) {
	is := is.New(t)
	s := newSites(t, func(w http.ResponseWriter, r *http.Request) {
		page(w, `<html><head><title>Home</title><meta property="og:site_name" content="LD Inc">
<script type="application/ld+json">{"@context":"https://schema.org","@graph":[
 {"@type":"WebSite","name":"LD website"},
 {"@type":["Corporation"],"name":"LD Incorporated","description":"We link data.","slogan":"Linked, always",
  "foundingDate":"2009-05-01","numberOfEmployees":{"@type":"QuantitativeValue","minValue":51,"maxValue":200},
  "address":{"@type":"PostalAddress","addressLocality":"Berlin","addressCountry":{"@type":"Country","name":"DE"},"postalCode":"10115"},
  "sameAs":["https://twitter.com/ld","https://de.linkedin.com/company/ld-inc"]}]}
</script></head><body></body></html>`)
	})
	var asked []string
	network := enrichtest.Source{SourceName: "net", Asked: &asked, Company: &enrich.Company{
		Name: "LD Incorporated GmbH", Domain: strp("ld.test"), NetworkID: strp("777"),
		EmployeeCount: enrich.Ptr(int64(120)), PrimaryIndustry: strp("Software Development"),
	}}
	c, err := s.web(true, network).CompanyByDomain(context.Background(), nil, "ld.test")
	is.NoErr(err)
	is.Equal(asked, []string{"net https://www.linkedin.com/company/ld-inc"}) // the sameAs page, normalized
	want := &enrich.Company{
		Name:             "LD Incorporated GmbH", // the network's record leads
		EnrichmentStatus: "enriched",
		Domain:           strp("ld.test"),
		NetworkURL:       strp("https://www.linkedin.com/company/ld-inc"),
		NetworkID:        strp("777"),
		EmployeeCount:    enrich.Ptr(int64(120)),
		EmployeeRange:    strp("51-200"), // the site fills what the network left out
		PrimaryIndustry:  strp("Software Development"),
		YearFounded:      enrich.Ptr(2009),
		About:            strp("We link data."),
		Slogan:           strp("Linked, always"),
		Headquarters:     map[string]any{"city": "Berlin", "country": "DE", "postal_code": "10115"},
	}
	is.Equal(asJSON(t, c), asJSON(t, want))
}

func TestWebJSONLDAlone(t *testing.T) {
	is := is.New(t)
	s := newSites(t, func(w http.ResponseWriter, r *http.Request) {
		page(w, `<script type="application/ld+json">[{"@type":"Organization","name":"LD Inc","numberOfEmployees":42,"foundingDate":"1999"}]</script>`)
	})
	c, err := s.web(true).CompanyByDomain(context.Background(), nil, "ld.test")
	is.NoErr(err)
	is.Equal(c.Name, "LD Inc")
	is.Equal(*c.EmployeeCount, int64(42))
	is.Equal(*c.YearFounded, 1999)
	is.True(c.NetworkURL == nil && c.EmployeeRange == nil && c.About == nil && c.Headquarters == nil) // nothing invented
}

func TestWebRedirectToAnotherDomain(t *testing.T) {
	is := is.New(t)
	s := newSites(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.Host {
		case "acme-old.test":
			http.Redirect(w, r, "https://www.acme.test/", http.StatusMovedPermanently)
		case "www.acme.test":
			page(w, `<title>Acme</title>`)
		default:
			http.NotFound(w, r)
		}
	})
	web := s.web(true)
	c, err := web.CompanyByDomain(context.Background(), nil, "acme-old.test")
	is.NoErr(err)
	is.Equal(*c.Domain, "acme.test")
	is.Equal(*c.Redirect, enrich.Redirect{From: "acme-old.test", To: "acme.test", Confirmed: true})
	is.Equal(*web.Stats().Calls, int64(2)) // each hop is a request
}

func TestWebNetworkListsAnotherWebsite(t *testing.T) {
	is := is.New(t)
	s := newSites(t, func(w http.ResponseWriter, r *http.Request) {
		page(w, `<title>Alias</title><a href="https://linkedin.com/company/acme">us</a>`)
	})
	var asked []string
	network := enrichtest.Source{SourceName: "net", Asked: &asked, Company: &enrich.Company{Name: "Acme", Domain: strp("acme.test")}}
	c, err := s.web(true, network).CompanyByDomain(context.Background(), nil, "alias.test")
	is.NoErr(err)
	is.Equal(*c.Domain, "acme.test")
	is.Equal(*c.Redirect, enrich.Redirect{From: "alias.test", To: "acme.test", Confirmed: false})
}

func TestWebHugePageIsCutOff(t *testing.T) {
	is := is.New(t)
	s := newSites(t, func(w http.ResponseWriter, r *http.Request) {
		page(w, `<html><head><title>Huge Co</title></head><body>`+strings.Repeat("<p>filler</p>", 3<<20/13)+
			`<script type="application/ld+json">{"@type":"Organization","name":"Past the cut","slogan":"never read"}</script></body></html>`)
	})
	c, err := s.web(true).CompanyByDomain(context.Background(), nil, "huge.test")
	is.NoErr(err)
	is.Equal(c.Name, "Huge Co") // read from the first 2 MiB
	is.True(c.Slogan == nil)    // what lies past them is not
}

func TestWebRefusesPrivateAddresses(t *testing.T) {
	is := is.New(t)
	s := newSites(t, func(w http.ResponseWriter, r *http.Request) { page(w, `<title>Inside</title>`) })
	web := s.web(false) // the default policy: public addresses only
	_, err := web.CompanyByDomain(context.Background(), nil, "acme.test")
	is.True(errors.Is(err, enrich.ErrNotFound))
	is.True(strings.Contains(err.Error(), "not public"))
	is.Equal(s.hits.Load(), int64(0)) // the loopback listener was never reached
	is.Equal(*web.Stats().Errors, int64(1))
}

func TestWebTimeout(t *testing.T) {
	is := is.New(t)
	release := make(chan struct{})
	defer close(release)
	s := newSites(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	web := s.web(true)
	web.Timeout = 100 * time.Millisecond
	_, err := web.CompanyByDomain(context.Background(), nil, "slow.test")
	is.True(errors.Is(err, enrich.ErrUnavailable))
}

func TestWebFailures(t *testing.T) {
	s := newSites(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.Host {
		case "down.test":
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
		case "pdf.test":
			w.Header().Set("Content-Type", "application/pdf")
			w.Write([]byte("%PDF-1.7"))
		case "plain.test":
			page(w, `<p>no title, no name</p>`)
		default:
			http.NotFound(w, r)
		}
	})
	for _, c := range []struct {
		domain string
		want   error
	}{
		{"down.test", enrich.ErrUnavailable},  // 5xx: try again later
		{"nxdomain.test", enrich.ErrNotFound}, // does not resolve
		{"acme.test", enrich.ErrNotFound},     // 404
		{"pdf.test", enrich.ErrNotFound},      // not a web page
		{"plain.test", enrich.ErrNotFound},    // names no company
	} {
		t.Run(c.domain, func(t *testing.T) {
			is := is.New(t)
			_, err := s.web(true).CompanyByDomain(context.Background(), nil, c.domain)
			is.True(errors.Is(err, c.want))
		})
	}
}

func TestWebFindsNoPeopleOrPages(t *testing.T) {
	is := is.New(t)
	w := &source.Web{}
	_, err := w.PersonByURL(context.Background(), nil, "https://www.linkedin.com/in/x")
	is.True(errors.Is(err, enrich.ErrNotFound))
	_, err = w.CompanyByURL(context.Background(), nil, "https://www.linkedin.com/company/x")
	is.True(errors.Is(err, enrich.ErrNotFound))
	_, ok := any(w).(enrich.StaffSearcher)
	is.True(!ok)
}

// downgradeSites is a TLS site (from newSites) whose redirects lead to "insecure.test",
// a plain-http server on another listener; hits counts what that server was asked.
func downgradeSites(t *testing.T, allowHTTP bool) (*source.Web, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		page(w, `<title>Acme | Over plain http</title>`)
	}))
	t.Cleanup(plain.Close)
	s := newSites(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://insecure.test/", http.StatusMovedPermanently)
	})
	web := s.web(true) // loopback listeners are allowed: only the scheme is at stake
	web.AllowHTTP = allowHTTP
	web.ResolveAddr = func(addr string) (string, error) {
		if host, _, _ := net.SplitHostPort(addr); host == "insecure.test" {
			return plain.Listener.Addr().String(), nil
		}
		return s.srv.Listener.Addr().String(), nil
	}
	return web, &hits
}

// A site whose https page redirects to plain http is refused, as a site on a private
// address is: what comes back over http may have been written by anyone on the path.
func TestWebRefusesARedirectFromHTTPSToHTTP(t *testing.T) {
	is := is.New(t)
	web, plainHits := downgradeSites(t, false)
	c, err := web.CompanyByDomain(context.Background(), nil, "acme.test")
	is.True(c == nil)
	is.True(errors.Is(err, enrich.ErrNotFound))
	is.True(strings.Contains(err.Error(), "plain http"))
	is.Equal(plainHits.Load(), int64(0)) // the http server was never asked
	is.Equal(*web.Stats().Errors, int64(1))
	is.True(strings.Contains(*web.Stats().LastError, "plain http"))
}

// With the allowance for local development (serve --web-allow-private), the redirect
// to plain http is followed as before.
func TestWebFollowsARedirectToHTTPWhenAllowed(t *testing.T) {
	is := is.New(t)
	web, plainHits := downgradeSites(t, true)
	c, err := web.CompanyByDomain(context.Background(), nil, "acme.test")
	is.NoErr(err)
	is.Equal(c.Name, "Acme")
	is.Equal(plainHits.Load(), int64(1))
}

// Every request a fetch sends, each hop of a redirect included, counts in the Tally of
// the ask it was sent for, as in the source's meter, and in no other ask's.
func TestWebCountsEachHopInTheAsksTally(t *testing.T) {
	is := is.New(t)
	web, _ := downgradeSites(t, true)
	tally, other := &enrich.Tally{}, &enrich.Tally{}
	_, err := web.CompanyByDomain(context.Background(), tally, "acme.test")
	is.NoErr(err)
	is.Equal(tally.Calls(), int64(2)) // the https page and the page it redirects to
	is.Equal(*web.Stats().Calls, int64(2))
	_, err = web.CompanyByDomain(context.Background(), other, "acme.test")
	is.NoErr(err)
	is.Equal(tally.Calls(), int64(2))
	is.Equal(other.Calls(), int64(2))
}

// webSpend refuses the sources named in over, and keeps what each ask recorded.
type webSpend struct {
	over  map[string]bool
	spent *[]enrich.SourceCall
}

func (s webSpend) Admit(_ context.Context, _, src string, _ bool) (*enrich.Booking, string) {
	if s.over[src] {
		return nil, enrich.ReasonBudget
	}
	return nil, ""
}

func (s webSpend) Book(context.Context, *enrich.Booking, int64, int64) error { return nil }

func (s webSpend) Spent(_ context.Context, _ string, call enrich.SourceCall, _ *enrich.Booking) {
	*s.spent = append(*s.spent, call)
}

// The network source the web source asks for its site's company page is asked as the
// waterfall asks it: not at all once its budget is spent, and otherwise counted to it
// in the spend and in the task's sources, not to web.
func TestWebAsksTheNetworkWithinItsBudget(t *testing.T) {
	s := newSites(t, func(w http.ResponseWriter, r *http.Request) {
		page(w, `<html><head><title>LD Inc</title></head><body>
<a href="https://www.linkedin.com/company/ld-inc">Us elsewhere</a></body></html>`)
	})
	for _, over := range []bool{false, true} {
		t.Run(fmt.Sprintf("over budget %v", over), func(t *testing.T) {
			is := is.New(t)
			var asked []string
			var spent []enrich.SourceCall
			vendor := enrichtest.Source{SourceName: "vendor", Asked: &asked, Company: &enrich.Company{
				Name: "LD Incorporated", Domain: strp("ld.test"), EmployeeCount: enrich.Ptr(int64(120))}}
			p := &enrich.Pipeline{Sources: []enrich.Source{s.web(true, vendor)},
				Spend: webSpend{over: map[string]bool{"vendor": over}, spent: &spent}}
			res, tr, terr := p.Lookup(context.Background(), &enrich.Task{Org: "org-1"}, enrich.Input{Lookup: enrich.LookupDomain, Target: "ld.test"})
			is.True(terr == nil)
			is.Equal(res.Company.Name, map[bool]string{false: "LD Incorporated", true: "LD Inc"}[over])
			var names []string
			for _, c := range tr.Sources {
				names = append(names, c.Name+" "+c.Outcome+" "+c.Reason+" "+fmt.Sprint(c.VendorCalls))
			}
			if over {
				is.Equal(asked, nil) // the vendor over its budget is not asked, even by web
				is.Equal(names, []string{"web hit  1", "vendor skipped budget 0"})
				is.Equal(len(spent), 1)
				is.Equal(spent[0].Name, "web")
				return
			}
			is.Equal(asked, []string{"vendor https://www.linkedin.com/company/ld-inc"})
			is.Equal(names, []string{"web hit  1", "vendor hit  1"}) // web's own call, and the vendor's apart
			is.Equal(len(spent), 2)
			is.Equal(spent[0].Name, "vendor")
			is.Equal(spent[0].VendorCalls, int64(1))
		})
	}
}
