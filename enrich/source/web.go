package source

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/html"

	"enrichd/enrich"
	"enrichd/netguard"
)

// Web is the `web` source: a company's own website. It fetches https://<domain>/
// through the guarded client (public addresses only), follows up to five redirects
// (none to plain http), and reads the page's title, meta description, Open Graph tags, JSON-LD Organization
// and its link to the company's page on the network. When it finds that page, it asks
// the Network sources for it and merges their answer in.
type Web struct {
	NetworkHost string
	// Network are the sources asked for the company page the site links to; their
	// answer fills what the site does not say. Typically the other configured sources.
	Network []enrich.Source
	// Policy says which addresses may be dialed; the zero value allows public ones only.
	Policy netguard.Policy
	// AllowHTTP lets a redirect from the https page lead to plain http. Off (the
	// default), such a site is refused as one on a private address is: what comes back
	// over http may have been written by anyone on the path. For local development
	// only; serve turns it on with --web-allow-private.
	AllowHTTP bool
	// ResolveAddr, when set, replaces the host:port a connection is made to, so that
	// tests can serve "acme.test" from a local listener; the guard still checks the
	// address actually dialed. Nil in production: hosts are resolved by DNS.
	ResolveAddr func(addr string) (string, error)
	// RootCAs, when set, are the only certificate authorities trusted (tests).
	RootCAs      *x509.CertPool
	Timeout      time.Duration // of the whole fetch, redirects included; 10 s by default
	MaxBytes     int64         // of the page read; 2 MiB by default, the rest is ignored
	MaxRedirects int           // 5 by default
	Logger       *slog.Logger

	once   sync.Once
	client *http.Client
	meter  meter
}

var (
	_ enrich.Source  = (*Web)(nil)
	_ enrich.Metered = (*Web)(nil)
)

func (w *Web) Name() string              { return "web" }
func (w *Web) Stats() enrich.SourceStats { return w.meter.stats(w.Name()) }

// Supports: a website is found by domain only, and shows no profiles.
func (w *Web) Supports(l enrich.Lookup) bool { return l == enrich.LookupDomain }

// CompanyByURL: a website is found by domain only.
func (w *Web) CompanyByURL(ctx context.Context, tally *enrich.Tally, networkURL string) (*enrich.Company, error) {
	return nil, fmt.Errorf("web: finds companies by domain only: %w", enrich.ErrNotFound)
}

// PersonByURL: a website shows no profiles.
func (w *Web) PersonByURL(ctx context.Context, tally *enrich.Tally, networkURL string) (*enrich.Person, error) {
	return nil, fmt.Errorf("web: finds no people: %w", enrich.ErrNotFound)
}

func (w *Web) httpClient() *http.Client {
	w.once.Do(func() {
		c := w.Policy.Client(orDefault(w.Timeout, 10*time.Second), orDefault(w.MaxRedirects, 5))
		tr := c.Transport.(*http.Transport)
		if w.ResolveAddr != nil {
			dial := tr.DialContext
			tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				to, err := w.ResolveAddr(addr)
				if err != nil {
					return nil, err
				}
				return dial(ctx, network, to)
			}
		}
		if w.RootCAs != nil {
			tr.TLSClientConfig = &tls.Config{RootCAs: w.RootCAs}
		}
		c.Transport = tr
		guarded := c.CheckRedirect
		c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
			if err := guarded(req, via); err != nil {
				return err
			}
			// The fetch starts at https, so any hop over http is a downgrade.
			if req.URL.Scheme != "https" && !w.AllowHTTP {
				return errDowngrade
			}
			return nil
		}
		w.client = c
	})
	return w.client
}

// errDowngrade refuses a redirect from https to plain http.
var errDowngrade = errors.New("redirects from https to plain http")

// countingTransport counts every request one fetch sends, redirects included, in the
// source's meter and in the ask's Tally.
type countingTransport struct {
	next  http.RoundTripper
	meter *meter
	tally *enrich.Tally
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.meter.call()
	t.tally.Call()
	return t.next.RoundTrip(r)
}

func (w *Web) norm() normalizer { return newNormalizer(w.NetworkHost) }

// CompanyByDomain reads the domain's website. A domain that does not resolve, or
// resolves to an address that is not public, is not found; a site that cannot be
// reached, times out or answers 5xx is unavailable; any other answer but a 200 HTML
// page is not found.
func (w *Web) CompanyByDomain(ctx context.Context, tally *enrich.Tally, domain string) (*enrich.Company, error) {
	page, final, err := w.fetch(ctx, tally, domain)
	if err != nil {
		return nil, err
	}
	site := w.parse(page, final)
	c := site.company()
	if canonical, err := w.norm().Domain(final.Hostname()); err == nil && canonical != domain {
		// An HTTP redirect to another registrable domain: that one is canonical.
		c.Domain = enrich.Ptr(canonical)
		c.Redirect = &enrich.Redirect{From: domain, To: canonical, Confirmed: true}
	} else {
		c.Domain = enrich.Ptr(domain)
	}
	if c.NetworkURL != nil {
		if nc := w.askNetwork(ctx, tally, *c.NetworkURL); nc != nil {
			c = merge(nc, c, domain)
		}
	}
	if c.Name == "" {
		return nil, fmt.Errorf("web: %s names no company: %w", domain, enrich.ErrNotFound)
	}
	c.EnrichmentStatus = enrich.StatusEnriched
	return c, nil
}

func (w *Web) fetch(ctx context.Context, tally *enrich.Tally, domain string) ([]byte, *url.URL, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+domain+"/", nil)
	if err != nil {
		return nil, nil, fmt.Errorf("web: %s: %w", domain, enrich.ErrNotFound)
	}
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set("Accept", "text/html,application/xhtml+xml;q=0.9,*/*;q=0.1")
	client := *w.httpClient() // the shared client's transport and policy, counted for this ask
	client.Transport = countingTransport{next: client.Transport, meter: &w.meter, tally: tally}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		var dnsErr *net.DNSError
		switch {
		case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
			return nil, nil, fmt.Errorf("web: %s does not resolve: %w", domain, enrich.ErrNotFound)
		case errors.Is(err, netguard.ErrNotPublic):
			w.meter.fail("web: " + domain + " leads to an address that is not public")
			return nil, nil, fmt.Errorf("web: %s leads to an address that is not public, which is never fetched: %w", domain, enrich.ErrNotFound)
		case errors.Is(err, errDowngrade):
			w.meter.fail("web: " + domain + " redirects from https to plain http")
			return nil, nil, fmt.Errorf("web: %s redirects from https to plain http, which is never followed: %w", domain, enrich.ErrNotFound)
		}
		w.meter.fail("web: " + domain + ": " + err.Error())
		return nil, nil, fmt.Errorf("web: %s could not be fetched: %v: %w", domain, err, enrich.ErrUnavailable)
	}
	defer resp.Body.Close()
	final := resp.Request.URL
	switch code := resp.StatusCode; {
	case code == http.StatusTooManyRequests || code >= 500:
		w.meter.fail(fmt.Sprintf("web: %s answered %d", final.Host, code))
		return nil, nil, fmt.Errorf("web: %s answered %d: %w", final.Host, code, enrich.ErrUnavailable)
	case code != http.StatusOK:
		return nil, nil, fmt.Errorf("web: %s answered %d: %w", final.Host, code, enrich.ErrNotFound)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		if mt, _, _ := mime.ParseMediaType(ct); mt != "text/html" && mt != "application/xhtml+xml" {
			return nil, nil, fmt.Errorf("web: %s is %s, not a web page: %w", final.Host, mt, enrich.ErrNotFound)
		}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, orDefault(w.MaxBytes, 2<<20)))
	if err != nil && len(body) == 0 {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		w.meter.fail("web: " + domain + ": " + err.Error())
		return nil, nil, fmt.Errorf("web: reading %s: %v: %w", final.Host, err, enrich.ErrUnavailable)
	}
	return body, final, nil
}

// askNetwork asks the network sources for the company page, first answer wins; a
// failure there costs only what the page would have added.
func (w *Web) askNetwork(ctx context.Context, tally *enrich.Tally, page string) *enrich.Company {
	for _, src := range w.Network {
		// Asked as the waterfall asks it: within its budget, its calls its own.
		c, err := enrich.AskWithin(ctx, tally, src, enrich.Input{Lookup: enrich.LookupCompanyURL, Target: page}, func(ctx context.Context, tally *enrich.Tally) (*enrich.Company, error) {
			return src.CompanyByURL(ctx, tally, page)
		})
		if err == nil && c != nil {
			return c
		}
		if err != nil && !isNotFound(err) && !errors.Is(err, enrich.ErrNotAsked) && w.Logger != nil {
			w.Logger.Warn("web: the network source could not answer for the site's company page", "source", src.Name(), "page", page, "err", err)
		}
	}
	return nil
}

// merge takes the network's record as the base and fills its gaps from the site. The
// canonical domain is the one an HTTP redirect led to; without one, a network page
// that lists another website makes that website canonical, unconfirmed.
func merge(network, site *enrich.Company, sent string) *enrich.Company {
	c := *network
	c.Redirect = site.Redirect
	c.Domain = site.Domain
	if site.Redirect == nil && network.Domain != nil && *network.Domain != sent {
		c.Domain = network.Domain
		c.Redirect = &enrich.Redirect{From: sent, To: *network.Domain, Confirmed: false}
	}
	if c.Name == "" {
		c.Name = site.Name
	}
	fill := func(dst **string, src *string) {
		if *dst == nil {
			*dst = src
		}
	}
	fill(&c.NetworkURL, site.NetworkURL)
	fill(&c.EmployeeRange, site.EmployeeRange)
	fill(&c.About, site.About)
	fill(&c.Slogan, site.Slogan)
	if c.EmployeeCount == nil {
		c.EmployeeCount = site.EmployeeCount
	}
	if c.YearFounded == nil {
		c.YearFounded = site.YearFounded
	}
	if c.Headquarters == nil {
		c.Headquarters = site.Headquarters
	}
	return &c
}

// site is what a page says about its company.
type site struct {
	title, description, ogSiteName, ogDescription string
	org                                           map[string]any // the JSON-LD Organization
	networkURL                                    *string
}

func (w *Web) parse(page []byte, base *url.URL) *site {
	s := &site{}
	doc, err := html.Parse(strings.NewReader(string(page)))
	if err != nil {
		return s
	}
	norm := w.norm()
	var sameAs []string
	var linked []string // the network's company pages the page links to
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "title":
				if s.title == "" {
					s.title = strings.TrimSpace(textOf(n))
				}
			case "meta":
				name, prop, content := strings.ToLower(attr(n, "name")), strings.ToLower(attr(n, "property")), strings.TrimSpace(attr(n, "content"))
				switch {
				case name == "description" && s.description == "":
					s.description = content
				case prop == "og:site_name" && s.ogSiteName == "":
					s.ogSiteName = content
				case prop == "og:description" && s.ogDescription == "":
					s.ogDescription = content
				}
			case "script":
				if strings.EqualFold(strings.TrimSpace(attr(n, "type")), "application/ld+json") && s.org == nil {
					var v any
					if json.Unmarshal([]byte(textOf(n)), &v) == nil {
						s.org = findOrganization(v)
						if s.org != nil {
							sameAs = strings1(s.org["sameAs"])
						}
					}
				}
			case "a":
				if ref, err := base.Parse(strings.TrimSpace(attr(n, "href"))); err == nil {
					if u, err := norm.CompanyURL(ref.String()); err == nil && !slices.Contains(linked, u) {
						linked = append(linked, u)
					}
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	// The organization's own sameAs is a surer link than one found in the page. A page
	// that links to several company pages (partners, customers) says none of them is
	// its own.
	for _, raw := range sameAs {
		if u := norm.companyURLOf(&raw); u != nil {
			s.networkURL = u
			break
		}
	}
	if s.networkURL == nil && len(linked) == 1 {
		s.networkURL = &linked[0]
	}
	return s
}

func (s *site) company() *enrich.Company {
	org := s.org
	c := &enrich.Company{
		Name:       firstOf(str(org, "name"), s.ogSiteName, siteName(s.title)),
		About:      text(enrich.Ptr(firstOf(str(org, "description"), s.description, s.ogDescription))),
		Slogan:     text(enrich.Ptr(str(org, "slogan"))),
		NetworkURL: s.networkURL,
	}
	if y, err := strconv.Atoi(strings.SplitN(str(org, "foundingDate"), "-", 2)[0]); err == nil && y > 0 && y < 10000 {
		c.YearFounded = &y
	}
	c.Headquarters = address(org["address"])
	c.EmployeeCount, c.EmployeeRange = employees(org["numberOfEmployees"])
	return c
}

// siteName is the company's name in a page title such as "Acme | Widgets for all".
func siteName(title string) string {
	for _, sep := range []string{" | ", " – ", " — ", " - ", " · ", ": "} {
		if i := strings.Index(title, sep); i > 0 {
			return strings.TrimSpace(title[:i])
		}
	}
	return strings.TrimSpace(title)
}

// findOrganization finds an Organization (or a subtype such as Corporation) in a
// JSON-LD document: an object, an array of them, or a @graph.
// businessTypes are the schema.org types of a business that do not end in
// "Organization", common on company sites.
var businessTypes = map[string]bool{"LocalBusiness": true, "Store": true, "ProfessionalService": true,
	"NGO": true, "Airline": true, "Consortium": true, "FinancialService": true, "MedicalBusiness": true}

func findOrganization(v any) map[string]any {
	switch t := v.(type) {
	case []any:
		for _, e := range t {
			if o := findOrganization(e); o != nil {
				return o
			}
		}
	case map[string]any:
		for _, typ := range strings1(t["@type"]) {
			if typ == "Organization" || typ == "Corporation" || strings.HasSuffix(typ, "Organization") || businessTypes[typ] {
				return t
			}
		}
		if g, ok := t["@graph"]; ok {
			return findOrganization(g)
		}
	}
	return nil
}

// address reads a schema.org PostalAddress (or a plain string, which is too loose to
// split and is left out).
func address(v any) map[string]any {
	a, ok := v.(map[string]any)
	if !ok {
		if list, ok := v.([]any); ok && len(list) > 0 {
			return address(list[0])
		}
		return nil
	}
	country := str(a, "addressCountry")
	if c, ok := a["addressCountry"].(map[string]any); ok {
		country = str(c, "name")
	}
	return headquarters(map[string]*string{
		"city": enrich.Ptr(str(a, "addressLocality")), "region": enrich.Ptr(str(a, "addressRegion")), "country": enrich.Ptr(country),
		"postal_code": enrich.Ptr(str(a, "postalCode")), "street_address": enrich.Ptr(str(a, "streetAddress")),
	})
}

// employees reads numberOfEmployees: a number, or a QuantitativeValue with a value or
// a minValue and maxValue.
func employees(v any) (*int64, *string) {
	num := func(x any) *int64 {
		switch n := x.(type) {
		case float64:
			if n >= 0 && n == float64(int64(n)) {
				return enrich.Ptr(int64(n))
			}
		case string:
			if i, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64); err == nil && i >= 0 {
				return &i
			}
		}
		return nil
	}
	if q, ok := v.(map[string]any); ok {
		if n := num(q["value"]); n != nil {
			return n, nil
		}
		if lo := num(q["minValue"]); lo != nil {
			return nil, sizeRange(lo, num(q["maxValue"]))
		}
		return nil, nil
	}
	return num(v), nil
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if strings.EqualFold(a.Key, key) {
			return a.Val
		}
	}
	return ""
}

func textOf(n *html.Node) string {
	var b strings.Builder
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	}
	return b.String()
}

// str is a JSON-LD property as a string: "" when absent or not text.
func str(m map[string]any, key string) string {
	switch v := m[key].(type) {
	case string:
		return strings.TrimSpace(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return ""
}

// strings1 reads a JSON-LD value that may be one string or an array of them.
func strings1(v any) []string {
	switch t := v.(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, e := range t {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func firstOf(vals ...string) string {
	for _, v := range vals {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}
