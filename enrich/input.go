package enrich

import (
	"net"
	"net/mail"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// DefaultNetworkHost is the professional network whose URLs are accepted by default.
const DefaultNetworkHost = "www.linkedin.com"

// MaxHintLength is the most characters a tie-break hint may have.
const MaxHintLength = 200

// Length limits of the inputs, from the RFCs, in bytes (an internationalized domain
// counts in its ASCII form, as DNS carries it). They are checked before any other work
// on an input, so the cost of refusing one does not grow with it.
const (
	MaxLocalPart = 64   // RFC 5321 4.5.3.1.1: the local part of an address
	MaxDomain    = 253  // RFC 1035 2.3.4: a domain name, without its trailing dot
	MaxLabel     = 63   // RFC 1035 2.3.4: one label of a domain name
	MaxAddress   = 254  // RFC 5321 4.5.3.1.3 (a path of 256 less its angle brackets)
	MaxURL       = 2048 // network URLs and website addresses sent as a domain
)

// Input is a validated, normalized enrichment request.
type Input struct {
	Lookup Lookup
	Target string // the normalized domain, network URL or email
	Hints  Hints
}

// Hints are the tie-break hints of an email lookup.
type Hints struct {
	FullName string `json:"fullName,omitempty"`
	Title    string `json:"title,omitempty"`
	Location string `json:"location,omitempty"`
}

// Normalizer turns what a client sends into the canonical targets tasks are keyed by.
type Normalizer struct {
	NetworkHost string // e.g. www.linkedin.com
}

// CompanyInput validates the body of a company enrichment: exactly one of domain or
// networkUrl.
func (n Normalizer) CompanyInput(domain, networkURL *string) (Input, error) {
	switch {
	case domain != nil && networkURL != nil:
		return Input{}, Errorf(KindInvalid, "send either domain or networkUrl, not both")
	case domain != nil:
		d, err := n.Domain(*domain)
		return Input{Lookup: LookupDomain, Target: d}, err
	case networkURL != nil:
		u, err := n.CompanyURL(*networkURL)
		return Input{Lookup: LookupCompanyURL, Target: u}, err
	}
	return Input{}, Errorf(KindInvalid, "send one of domain or networkUrl")
}

// SentHints are the tie-break hints as a request sent them: nil when absent.
type SentHints struct {
	FullName, Title, Location *string
}

// PersonInput validates the body of a person enrichment: exactly one of networkUrl or
// email; hints only with email (even empty ones) and at most MaxHintLength characters
// each.
func (n Normalizer) PersonInput(networkURL, email *string, sent SentHints) (Input, error) {
	var hints Hints
	for _, h := range []struct {
		name string
		sent *string
		dst  *string
	}{{"fullName", sent.FullName, &hints.FullName}, {"title", sent.Title, &hints.Title}, {"location", sent.Location, &hints.Location}} {
		if h.sent == nil {
			continue
		}
		if networkURL != nil {
			return Input{}, Errorf(KindInvalid, "fullName, title and location are tie-break hints for email lookups; they cannot be sent with networkUrl")
		}
		if utf8.RuneCountInString(*h.sent) > MaxHintLength {
			return Input{}, Errorf(KindInvalid, "%s is longer than %d characters", h.name, MaxHintLength)
		}
		*h.dst = *h.sent
	}
	switch {
	case networkURL != nil && email != nil:
		return Input{}, Errorf(KindInvalid, "send either networkUrl or email, not both")
	case networkURL != nil:
		u, err := n.PersonURL(*networkURL)
		return Input{Lookup: LookupPersonURL, Target: u}, err
	case email != nil:
		e, err := n.Email(*email)
		return Input{Lookup: LookupEmail, Target: e, Hints: hints}, err
	}
	return Input{}, Errorf(KindInvalid, "send one of networkUrl or email")
}

// Domain normalizes a domain to its registrable host in lower-case IDNA form:
// "HTTPS://WWW.Acme.COM/about" -> "acme.com".
func (n Normalizer) Domain(raw string) (string, error) {
	return n.domain(raw, "domain")
}

// domain is Domain; field names the input in the messages of the length limits.
func (n Normalizer) domain(raw, field string) (string, error) {
	s := strings.TrimSpace(raw)
	raw = s // quoted in the messages: the input less its surrounding space
	if s == "" {
		return "", Errorf(KindInvalid, "%s is empty", field)
	}
	if len(s) > MaxURL {
		return "", Errorf(KindInvalid, "%s is longer than %d bytes, the most a website address may have", field, MaxURL)
	}
	if i := strings.Index(s, "://"); i >= 0 {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			return "", Errorf(KindInvalid, "domain %q is not a domain or a website address", raw)
		}
		s = u.Host
	} else if i := strings.IndexAny(s, "/?#"); i >= 0 {
		s = s[:i]
	}
	if strings.Contains(s, "@") {
		return "", Errorf(KindInvalid, "domain %q looks like an email address; send it as email to /v1/people/enrich", raw)
	}
	if host, port, err := net.SplitHostPort(s); err == nil {
		// A website address's port is dropped, but only a port: acme.com:99999 and
		// acme.com:http name no website, and are not taken for acme.com.
		if !isPort(port) {
			return "", Errorf(KindInvalid, "domain %q has a port that is not a number from 1 to 65535; send the domain alone, such as acme.com", raw)
		}
		s = host
	}
	s = strings.TrimSuffix(s, ".")
	// An ASCII form is never shorter in characters than the name it encodes, so a
	// name over the limit is refused before IDNA reads it.
	if utf8.RuneCountInString(s) > MaxDomain {
		return "", domainTooLong(field)
	}
	if net.ParseIP(strings.Trim(s, "[]")) != nil {
		return "", Errorf(KindInvalid, "domain %q is an IP address; send a domain name", raw)
	}
	ascii, err := idna.Lookup.ToASCII(strings.ToLower(s))
	if err == nil {
		if err := checkDomainLength(ascii, field); err != nil {
			return "", err
		}
	}
	// A top-level label that is a number is no domain: URL parsers read "127.1" and
	// "0x7f.0x1" as IP addresses.
	if err != nil || !strings.Contains(ascii, ".") || isNumber(ascii[strings.LastIndex(ascii, ".")+1:]) {
		return "", Errorf(KindInvalid, "domain %q is not a valid domain name", raw)
	}
	ascii = strings.TrimPrefix(ascii, "www.")
	registrable, err := publicsuffix.EffectiveTLDPlusOne(ascii)
	// www is dropped from the front of a domain, so it cannot be the registrable
	// label: x.www.com would name www.com, which normalizes to com.
	if err != nil || strings.HasPrefix(registrable, "www.") {
		return "", Errorf(KindInvalid, "domain %q is not a registrable domain name", raw)
	}
	return registrable, nil
}

// isPort reports whether s is a TCP port: decimal digits, from 1 to 65535.
func isPort(s string) bool {
	if s == "" || len(s) > 5 || strings.Trim(s, "0123456789") != "" {
		return false
	}
	n, _ := strconv.Atoi(s)
	return n >= 1 && n <= 65535
}

// isNumber reports whether a label is a number as the WHATWG URL parser reads an IPv4
// part: decimal digits, or 0x followed by hexadecimal ones.
func isNumber(label string) bool {
	if hex, ok := strings.CutPrefix(label, "0x"); ok {
		return strings.Trim(hex, "0123456789abcdef") == ""
	}
	return strings.Trim(label, "0123456789") == ""
}

func domainTooLong(field string) error {
	return Errorf(KindInvalid, "%s is longer than %d bytes, the most a domain name may have (RFC 1035)", field, MaxDomain)
}

// checkDomainLength holds a domain name in ASCII form to the limits of DNS: the name
// and each of its labels.
func checkDomainLength(ascii, field string) error {
	if len(ascii) > MaxDomain {
		return domainTooLong(field)
	}
	for label := range strings.SplitSeq(ascii, ".") {
		if len(label) > MaxLabel {
			return Errorf(KindInvalid, "%s has a label (a part between dots) longer than %d bytes, the most DNS allows (RFC 1035)", field, MaxLabel)
		}
	}
	return nil
}

// CompanyURL normalizes a network company page URL to https://HOST/company/<slug>.
func (n Normalizer) CompanyURL(raw string) (string, error) {
	return n.networkURL(raw, "company", "networkUrl must be a company page such as https://"+n.Host()+"/company/acme")
}

// PersonURL normalizes a network profile URL to https://HOST/in/<slug>.
func (n Normalizer) PersonURL(raw string) (string, error) {
	return n.networkURL(raw, "in", "networkUrl must be a profile such as https://"+n.Host()+"/in/jane-doe")
}

// Host is the network's host these URLs are normalized to: NetworkHost lower-cased,
// DefaultNetworkHost when it is empty. Sources use it to write the network's URLs.
func (n Normalizer) Host() string {
	if n.NetworkHost == "" {
		return DefaultNetworkHost
	}
	return strings.ToLower(n.NetworkHost)
}

func (n Normalizer) networkURL(raw, section, help string) (string, error) {
	raw = strings.TrimSpace(raw)
	if len(raw) > MaxURL {
		return "", Errorf(KindInvalid, "networkUrl is longer than %d bytes, the most a URL may have here", MaxURL)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil {
		return "", Errorf(KindInvalid, "%s", help)
	}
	host := n.Host()
	base := strings.TrimPrefix(host, "www.")
	got := strings.ToLower(u.Hostname())
	sub, onBase := strings.CutSuffix(got, "."+base)
	if u.Port() != "" || !(got == base || got == host || (onBase && (sub == "www" || isCountrySubdomain(sub)))) {
		return "", Errorf(KindInvalid, "%s", help)
	}
	// Split the path as sent, then decode the slug: an encoded '/', '?' or '#' in it
	// would change what the normalized URL names.
	parts := strings.Split(strings.Trim(u.EscapedPath(), "/"), "/")
	if len(parts) < 2 || parts[0] != section {
		return "", Errorf(KindInvalid, "%s", help)
	}
	slug, err := url.PathUnescape(parts[1])
	slug = strings.ToLower(slug)
	if err != nil || slug == "" || slug == "." || slug == ".." || strings.ContainsAny(slug, "/?#%") ||
		strings.ContainsFunc(slug, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return "", Errorf(KindInvalid, "%s", help)
	}
	out := "https://" + host + "/" + section + "/" + slug
	if len(out) > MaxURL {
		// Lower-casing can lengthen a slug: the normalized URL must itself be accepted.
		return "", Errorf(KindInvalid, "networkUrl is longer than %d bytes once normalized, the most a URL may have here", MaxURL)
	}
	return out, nil
}

func isCountrySubdomain(s string) bool {
	return len(s) == 2 && s[0] >= 'a' && s[0] <= 'z' && s[1] >= 'a' && s[1] <= 'z'
}

// Email keeps the local part as sent (minus surrounding space) and normalizes the
// domain like Domain.
func (n Normalizer) Email(raw string) (string, error) {
	s := strings.TrimSpace(raw)
	raw = s // quoted in the messages: the input less its surrounding space
	if err := checkAddressLength(s); err != nil {
		return "", err
	}
	addr, err := mail.ParseAddress(s)
	if err != nil || addr.Name != "" || addr.Address != s {
		return "", Errorf(KindInvalid, "email %q is not a plain email address such as jane@acme.com", raw)
	}
	at := strings.LastIndex(s, "@")
	domain, err := n.domain(s[at+1:], "the domain of email")
	if err != nil {
		// Over a limit of DNS, the domain's own message says which.
		if ascii, aerr := idna.Lookup.ToASCII(strings.ToLower(strings.TrimSuffix(s[at+1:], "."))); aerr == nil {
			if lerr := checkDomainLength(ascii, "the domain of email"); lerr != nil {
				return "", lerr
			}
		}
		return "", Errorf(KindInvalid, "email %q does not end in a valid domain", raw)
	}
	// The domain's ASCII form may be longer than the domain as sent.
	if len(s[:at])+1+len(domain) > MaxAddress {
		return "", Errorf(KindInvalid, "email is longer than %d bytes once its domain is in ASCII form, the most an address may have (RFC 5321)", MaxAddress)
	}
	return s[:at] + "@" + domain, nil
}

// checkAddressLength holds an address, as sent, to the limits of RFC 5321: its local
// part (before the last @), its domain and the whole.
func checkAddressLength(s string) error {
	at := strings.LastIndexByte(s, '@')
	if at < 0 {
		// No address at all: only its length is checked here, the parser says the rest.
		if len(s) > MaxAddress {
			return Errorf(KindInvalid, "email is longer than %d bytes, the most an address may have (RFC 5321)", MaxAddress)
		}
		return nil
	}
	local, domain := s[:at], s[at+1:]
	switch {
	case len(local) > MaxLocalPart:
		return Errorf(KindInvalid, "the local part of email (before the @) is longer than %d bytes, the most an address may have (RFC 5321)", MaxLocalPart)
	case utf8.RuneCountInString(domain) > MaxDomain:
		return domainTooLong("the domain of email")
	case len(s) > MaxAddress:
		return Errorf(KindInvalid, "email is longer than %d bytes, the most an address may have (RFC 5321)", MaxAddress)
	}
	return nil
}

// SlugOf returns the last path segment of a normalized network URL.
func SlugOf(networkURL string) string {
	return networkURL[strings.LastIndex(networkURL, "/")+1:]
}
