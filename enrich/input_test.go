package enrich_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/matryer/is"

	"enrichd/enrich"
)

// isInvalid asserts that err is an *enrich.Error of kind KindInvalid (a 400).
func isInvalid(t *testing.T, err error) {
	t.Helper()
	is := is.New(t)
	var e *enrich.Error
	is.True(errors.As(err, &e))                 // want an *enrich.Error
	is.Equal(e.Kind, enrich.KindInvalid)        // want KindInvalid
	is.Equal(enrich.KindOf(err), e.Kind)        // KindOf agrees
	is.True(strings.TrimSpace(e.Message) != "") // a sentence a person can act on
}

func ptr(s string) *string { return &s }

func TestNormalizerDomainAccepts(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"HTTPS://WWW.Acme.COM/about", "acme.com"},
		{"acme.com", "acme.com"},
		{"ACME.COM", "acme.com"},
		{"www.acme.com", "acme.com"},
		{"  acme.com\t\n", "acme.com"},
		{"acme.com:8080", "acme.com"},
		{"acme.com:1", "acme.com"},
		{"acme.com:65535", "acme.com"},
		{"https://acme.com:8443/x", "acme.com"},
		{"acme.com.", "acme.com"},
		{"https://www.acme.com./", "acme.com"},
		{"acme.com/path?q=1#frag", "acme.com"},
		{"acme.com?q=1", "acme.com"},
		{"acme.com#top", "acme.com"},
		{"http://acme.com/about?utm_source=x", "acme.com"},
		{"blog.acme.co.uk", "acme.co.uk"},
		{"www.acme.co.uk", "acme.co.uk"},
		{"a.b.c.acme.com", "acme.com"},
		{"bücher.de", "xn--bcher-kva.de"},
		{"WWW.BÜCHER.DE", "xn--bcher-kva.de"},
		{"https://shop.bücher.de/kontakt", "xn--bcher-kva.de"},
		{"xn--bcher-kva.de", "xn--bcher-kva.de"},
		{"acme-corp.io", "acme-corp.io"},
		// Not a number to a URL parser (0a is no octal number): a name, and one that
		// normalizes to itself.
		{"0.0X0000.0A", "0x0000.0a"},
	}
	n := enrich.Normalizer{}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			is := is.New(t)
			got, err := n.Domain(tt.in)
			is.NoErr(err)
			is.Equal(got, tt.want)
			// A normalized domain normalizes to itself.
			again, err := n.Domain(got)
			is.NoErr(err)
			is.Equal(again, got)
		})
	}
}

func TestNormalizerDomainRejects(t *testing.T) {
	tests := []struct {
		name, in string
	}{
		{"empty", ""},
		{"spaces only", "   "},
		{"whitespace only", "\t\n"},
		{"no dot", "acme"},
		{"localhost", "localhost"},
		{"tld only", "com"},
		{"public suffix only", "co.uk"},
		{"www on a tld", "www.com"},
		{"ipv4", "1.2.3.4"},
		{"ipv4 url", "http://1.2.3.4/"},
		{"ipv4 with port", "1.2.3.4:80"},
		// A port is dropped, so only a port: these name no website.
		{"port out of range", "acme.com:99999"},
		{"port out of range in a URL", "https://acme.com:99999/"},
		{"port 0", "acme.com:0"},
		{"port 65536", "acme.com:65536"},
		{"empty port", "acme.com:"},
		{"port of letters", "acme.com:http"},
		{"signed port", "acme.com:+80"},
		{"port of 6 digits", "acme.com:000080"},
		{"two ports", "acme.com:80:80"},
		{"ipv4 trailing dot", "1.2.3.4."},
		{"ipv6 bracketed", "[::1]"},
		{"ipv6 bare", "::1"},
		{"ipv6 full", "2001:db8::1"},
		{"ipv6 url with port", "http://[2001:db8::1]:8080/"},
		{"ipv4-mapped ipv6", "::ffff:1.2.3.4"},
		{"email", "jane@acme.com"},
		{"mailto", "mailto:jane@acme.com"},
		{"empty label", "acme..com"},
		{"leading dot", ".acme.com"},
		{"two trailing dots", "acme.com.."},
		{"hyphen label", "-.com"},
		{"leading hyphen", "-acme.com"},
		{"trailing hyphen", "acme-.com"},
		{"space inside", "acme com"},
		{"underscore", "a_b.com"},
		{"wildcard", "*.acme.com"},
		{"bang", "acme!.com"},
		{"scheme without host", "http://"},
		{"scheme-relative", "//acme.com"},
		// Numeric hosts are IP addresses to inet_aton/WHATWG URL parsers (127.1 is
		// 127.0.0.1, 0x7f.0.0.1 too) or invalid ones; an all-numeric TLD does not
		// exist (RFC 3696 section 2).
		{"short loopback", "127.1"},
		{"short loopback URL", "http://127.1/"},
		{"three numbers", "1.2.3"},
		{"hex address", "0x7f.0.0.1"},
		{"hex top-level label", "0x7f.0x1"},
		{"www as the registrable label, under a subdomain", "mail.www.com"},
		{"bare hex top-level label", "acme.0x"},
		{"out of range address", "256.1.1.1"},
		{"nines", "999.999.999.999"},
		{"numeric TLD", "acme.123"},
	}
	n := enrich.Normalizer{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			got, err := n.Domain(tt.in)
			is.True(err != nil) // want an error
			is.Equal(got, "")
			isInvalid(t, err)
		})
	}
}

func TestNormalizerEmail(t *testing.T) {
	tests := []struct {
		name, in, want string
		wantErr        bool
	}{
		{name: "case of local part kept, domain lowered", in: "Jane.Doe@Acme.COM", want: "Jane.Doe@acme.com"},
		{name: "upper-case local part kept", in: "JANE@acme.com", want: "JANE@acme.com"},
		{name: "surrounding space trimmed, www dropped", in: "  Jane@WWW.acme.com  ", want: "Jane@acme.com"},
		{name: "tabs and newline trimmed", in: "\tjane@acme.com\n", want: "jane@acme.com"},
		{name: "plus tag kept, subdomain reduced", in: "jane+news@blog.acme.co.uk", want: "jane+news@acme.co.uk"},
		{name: "idna domain", in: "jane@bücher.de", want: "jane@xn--bcher-kva.de"},
		{name: "display name", in: "Jane <jane@acme.com>", wantErr: true},
		{name: "quoted display name", in: `"Jane Doe" <jane@acme.com>`, wantErr: true},
		{name: "angle brackets only", in: "<jane@acme.com>", wantErr: true},
		{name: "missing at", in: "jane.acme.com", wantErr: true},
		{name: "empty", in: "", wantErr: true},
		{name: "spaces only", in: "   ", wantErr: true},
		{name: "no domain", in: "jane@", wantErr: true},
		{name: "no local part", in: "@acme.com", wantErr: true},
		{name: "domain without dot", in: "jane@acme", wantErr: true},
		{name: "public suffix domain", in: "jane@co.uk", wantErr: true},
		{name: "ip domain", in: "jane@1.2.3.4", wantErr: true},
		{name: "ip literal domain", in: "jane@[1.2.3.4]", wantErr: true},
		{name: "empty label in domain", in: "jane@acme..com", wantErr: true},
		{name: "hyphen label domain", in: "jane@-.com", wantErr: true},
		{name: "two ats", in: "a@b@acme.com", wantErr: true},
		{name: "space inside", in: "jane @acme.com", wantErr: true},
	}
	n := enrich.Normalizer{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			got, err := n.Email(tt.in)
			if tt.wantErr {
				is.True(err != nil) // want an error
				is.Equal(got, "")
				isInvalid(t, err)
				return
			}
			is.NoErr(err)
			is.Equal(got, tt.want)
			again, err := n.Email(got)
			is.NoErr(err)
			is.Equal(again, got) // normalized email normalizes to itself
		})
	}
}

func TestNormalizerNetworkURLs(t *testing.T) {
	const (
		company = "company"
		person  = "person"
	)
	tests := []struct {
		name    string
		host    string // Normalizer.NetworkHost
		kind    string // company or person
		in      string
		want    string
		wantErr bool
	}{
		// Companies, default host.
		{name: "canonical", kind: company, in: "https://www.linkedin.com/company/acme", want: "https://www.linkedin.com/company/acme"},
		{name: "http", kind: company, in: "http://www.linkedin.com/company/acme", want: "https://www.linkedin.com/company/acme"},
		{name: "bare host", kind: company, in: "https://linkedin.com/company/acme", want: "https://www.linkedin.com/company/acme"},
		{name: "country subdomain and subpage", kind: company, in: "https://uk.linkedin.com/company/acme/about", want: "https://www.linkedin.com/company/acme"},
		{name: "upper-case slug and trailing slash", kind: company, in: "https://www.linkedin.com/company/Acme-Corp/", want: "https://www.linkedin.com/company/acme-corp"},
		{name: "query and fragment dropped", kind: company, in: "https://www.linkedin.com/company/acme?trk=x#top", want: "https://www.linkedin.com/company/acme"},
		{name: "subpage with query", kind: company, in: "https://www.linkedin.com/company/acme/jobs/?x=1", want: "https://www.linkedin.com/company/acme"},
		{name: "host case", kind: company, in: "https://WWW.LinkedIn.COM/company/acme", want: "https://www.linkedin.com/company/acme"},
		{name: "scheme case", kind: company, in: "HTTPS://www.linkedin.com/company/acme", want: "https://www.linkedin.com/company/acme"},
		{name: "percent-decoded ascii", kind: company, in: "https://www.linkedin.com/company/%41cme", want: "https://www.linkedin.com/company/acme"},
		{name: "percent-decoded utf-8", kind: company, in: "https://www.linkedin.com/company/B%C3%BCcher", want: "https://www.linkedin.com/company/bücher"},
		{name: "surrounding space", kind: company, in: "  https://www.linkedin.com/company/acme  ", want: "https://www.linkedin.com/company/acme"},

		{name: "profile given as company", kind: company, in: "https://www.linkedin.com/in/jane-doe", wantErr: true},
		{name: "other section", kind: company, in: "https://www.linkedin.com/school/mit", wantErr: true},
		{name: "missing slug", kind: company, in: "https://www.linkedin.com/company/", wantErr: true},
		{name: "missing slug no slash", kind: company, in: "https://www.linkedin.com/company", wantErr: true},
		{name: "empty slug segment", kind: company, in: "https://www.linkedin.com/company//acme", wantErr: true},
		{name: "root", kind: company, in: "https://www.linkedin.com/", wantErr: true},
		{name: "space in slug", kind: company, in: "https://www.linkedin.com/company/ac%20me", wantErr: true},
		{name: "port 443", kind: company, in: "https://www.linkedin.com:443/company/acme", wantErr: true},
		{name: "port 8080", kind: company, in: "http://www.linkedin.com:8080/company/acme", wantErr: true},
		{name: "userinfo", kind: company, in: "https://user:pw@www.linkedin.com/company/acme", wantErr: true},
		{name: "user only", kind: company, in: "https://user@www.linkedin.com/company/acme", wantErr: true},
		{name: "ftp", kind: company, in: "ftp://www.linkedin.com/company/acme", wantErr: true},
		{name: "javascript", kind: company, in: "javascript://www.linkedin.com/company/acme", wantErr: true},
		{name: "no scheme", kind: company, in: "www.linkedin.com/company/acme", wantErr: true},
		{name: "other host", kind: company, in: "https://evil.com/company/acme", wantErr: true},
		{name: "host as prefix", kind: company, in: "https://www.linkedin.com.evil.com/company/acme", wantErr: true},
		{name: "host as suffix without dot", kind: company, in: "https://evillinkedin.com/company/acme", wantErr: true},
		{name: "long subdomain", kind: company, in: "https://abc.linkedin.com/company/acme", wantErr: true},
		{name: "nested subdomain", kind: company, in: "https://uk.www.linkedin.com/company/acme", wantErr: true},
		{name: "empty", kind: company, in: "", wantErr: true},
		// An encoded "/" must not split the slug (a%2Fb is not the company "a"), an
		// encoded "?" or "#" must not put a query or fragment into the target, and "."
		// and ".." are no slugs.
		{name: "encoded slash", kind: company, in: "https://www.linkedin.com/company/a%2Fb/jobs", wantErr: true},
		{name: "encoded question mark", kind: company, in: "https://www.linkedin.com/company/acme%3Fx", wantErr: true},
		{name: "encoded hash", kind: company, in: "https://www.linkedin.com/company/acme%23x", wantErr: true},
		{name: "dot", kind: company, in: "https://www.linkedin.com/company/.", wantErr: true},
		{name: "dot dot", kind: company, in: "https://www.linkedin.com/company/..", wantErr: true},
		{name: "encoded dot dot", kind: person, in: "https://www.linkedin.com/in/%2E%2E", wantErr: true},

		// People, default host.
		{name: "profile", kind: person, in: "https://www.linkedin.com/in/jane-doe-1a2b", want: "https://www.linkedin.com/in/jane-doe-1a2b"},
		{name: "profile normalized", kind: person, in: "http://de.linkedin.com/in/Jane-Doe-1A2B/?x=1#y", want: "https://www.linkedin.com/in/jane-doe-1a2b"},
		{name: "profile subpage", kind: person, in: "https://linkedin.com/in/jane/details/experience/", want: "https://www.linkedin.com/in/jane"},
		{name: "company given as profile", kind: person, in: "https://www.linkedin.com/company/acme", wantErr: true},
		{name: "profile missing slug", kind: person, in: "https://www.linkedin.com/in/", wantErr: true},
		{name: "old public profile", kind: person, in: "https://www.linkedin.com/pub/jane", wantErr: true},
		{name: "profile with port", kind: person, in: "https://linkedin.com:8443/in/jane", wantErr: true},
		{name: "profile on other host", kind: person, in: "https://network.example/in/jane", wantErr: true},

		// A configured network host.
		{name: "configured host", host: "network.example", kind: person, in: "https://network.example/in/jane", want: "https://network.example/in/jane"},
		{name: "configured host www", host: "network.example", kind: company, in: "https://www.network.example/company/Acme", want: "https://network.example/company/acme"},
		{name: "configured host country", host: "network.example", kind: person, in: "http://de.network.example/in/jane/", want: "https://network.example/in/jane"},
		{name: "default host refused when configured", host: "network.example", kind: person, in: "https://www.linkedin.com/in/jane", wantErr: true},
		{name: "default host company refused when configured", host: "network.example", kind: company, in: "https://www.linkedin.com/company/acme", wantErr: true},
		{name: "configured host in upper case", host: "WWW.LinkedIn.com", kind: person, in: "https://linkedin.com/in/Jane", want: "https://www.linkedin.com/in/jane"},
	}
	for _, tt := range tests {
		t.Run(tt.kind+"/"+tt.name, func(t *testing.T) {
			is := is.New(t)
			n := enrich.Normalizer{NetworkHost: tt.host}
			normalize := n.CompanyURL
			if tt.kind == person {
				normalize = n.PersonURL
			}
			got, err := normalize(tt.in)
			if tt.wantErr {
				is.True(err != nil) // want an error
				is.Equal(got, "")
				isInvalid(t, err)
				return
			}
			is.NoErr(err)
			is.Equal(got, tt.want)
			again, err := normalize(got)
			is.NoErr(err)
			is.Equal(again, got) // normalized URL normalizes to itself
			is.Equal(enrich.SlugOf(got), tt.want[strings.LastIndex(tt.want, "/")+1:])
		})
	}
}

func TestCompanyInput(t *testing.T) {
	tests := []struct {
		name        string
		domain, url *string
		want        enrich.Input
		wantErr     bool
	}{
		{name: "domain", domain: ptr("WWW.Acme.com"), want: enrich.Input{Lookup: enrich.LookupDomain, Target: "acme.com"}},
		{name: "networkUrl", url: ptr("https://www.linkedin.com/company/Acme/"), want: enrich.Input{Lookup: enrich.LookupCompanyURL, Target: "https://www.linkedin.com/company/acme"}},
		{name: "neither", wantErr: true},
		{name: "both", domain: ptr("acme.com"), url: ptr("https://www.linkedin.com/company/acme"), wantErr: true},
		{name: "both with empty values", domain: ptr(""), url: ptr(""), wantErr: true},
		{name: "bad domain", domain: ptr("acme"), wantErr: true},
		{name: "empty domain", domain: ptr(""), wantErr: true},
		{name: "profile URL as company", url: ptr("https://www.linkedin.com/in/jane"), wantErr: true},
	}
	n := enrich.Normalizer{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			got, err := n.CompanyInput(tt.domain, tt.url)
			if tt.wantErr {
				is.True(err != nil) // want an error
				isInvalid(t, err)
				return
			}
			is.NoErr(err)
			is.Equal(got, tt.want)
			is.Equal(got.Lookup.ObjectType(), enrich.ObjectCompany)
			is.Equal(got.Lookup.Cost(), int64(1))
		})
	}
}

func TestPersonInput(t *testing.T) {
	const profile = "https://www.linkedin.com/in/jane-doe"
	long200 := strings.Repeat("ü", 200) // 200 characters, 400 bytes
	long201 := strings.Repeat("ü", 201)
	ascii201 := strings.Repeat("a", 201)
	tests := []struct {
		name       string
		url, email *string
		hints      enrich.SentHints
		want       enrich.Input
		wantErr    bool
	}{
		{name: "profile", url: ptr("https://de.linkedin.com/in/Jane-Doe/"), want: enrich.Input{Lookup: enrich.LookupPersonURL, Target: profile}},
		{name: "email", email: ptr(" Jane@WWW.Acme.com "), want: enrich.Input{Lookup: enrich.LookupEmail, Target: "Jane@acme.com"}},
		{
			name:  "email with hints carries them",
			email: ptr("jane@acme.com"),
			hints: sent(enrich.Hints{FullName: "Jane Doe", Title: "CTO", Location: "Berlin"}),
			want:  enrich.Input{Lookup: enrich.LookupEmail, Target: "jane@acme.com", Hints: enrich.Hints{FullName: "Jane Doe", Title: "CTO", Location: "Berlin"}},
		},
		{
			name:  "hints of 200 multi-byte characters",
			email: ptr("jane@acme.com"),
			hints: sent(enrich.Hints{FullName: long200, Title: long200, Location: long200}),
			want:  enrich.Input{Lookup: enrich.LookupEmail, Target: "jane@acme.com", Hints: enrich.Hints{FullName: long200, Title: long200, Location: long200}},
		},
		{name: "neither", wantErr: true},
		{name: "neither with hints", hints: sent(enrich.Hints{FullName: "Jane"}), wantErr: true},
		{name: "both", url: ptr(profile), email: ptr("jane@acme.com"), wantErr: true},
		{name: "fullName 201 multi-byte", email: ptr("jane@acme.com"), hints: sent(enrich.Hints{FullName: long201}), wantErr: true},
		{name: "title 201 multi-byte", email: ptr("jane@acme.com"), hints: sent(enrich.Hints{Title: long201}), wantErr: true},
		{name: "location 201 multi-byte", email: ptr("jane@acme.com"), hints: sent(enrich.Hints{Location: long201}), wantErr: true},
		{name: "fullName 201 ascii", email: ptr("jane@acme.com"), hints: sent(enrich.Hints{FullName: ascii201}), wantErr: true},
		{name: "fullName with networkUrl", url: ptr(profile), hints: sent(enrich.Hints{FullName: "Jane Doe"}), wantErr: true},
		{name: "title with networkUrl", url: ptr(profile), hints: sent(enrich.Hints{Title: "CTO"}), wantErr: true},
		{name: "location with networkUrl", url: ptr(profile), hints: sent(enrich.Hints{Location: "Berlin"}), wantErr: true},
		{name: "empty fullName with networkUrl", url: ptr(profile), hints: enrich.SentHints{FullName: ptr("")}, wantErr: true},
		{name: "empty hints with email are no hints", email: ptr("jane@acme.com"), hints: enrich.SentHints{FullName: ptr(""), Title: ptr("")},
			want: enrich.Input{Lookup: enrich.LookupEmail, Target: "jane@acme.com"}},
		{name: "company URL as profile", url: ptr("https://www.linkedin.com/company/acme"), wantErr: true},
		{name: "display-name email", email: ptr("Jane <jane@acme.com>"), wantErr: true},
		{name: "bad email domain", email: ptr("jane@acme"), wantErr: true},
	}
	n := enrich.Normalizer{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			got, err := n.PersonInput(tt.url, tt.email, tt.hints)
			if tt.wantErr {
				is.True(err != nil) // want an error
				isInvalid(t, err)
				return
			}
			is.NoErr(err)
			is.Equal(got, tt.want)
			is.Equal(got.Lookup.ObjectType(), enrich.ObjectPerson)
		})
	}
}

func TestLookupCost(t *testing.T) {
	tests := []struct {
		lookup enrich.Lookup
		object string
		cost   int64
	}{
		{enrich.LookupDomain, enrich.ObjectCompany, 1},
		{enrich.LookupCompanyURL, enrich.ObjectCompany, 1},
		{enrich.LookupPersonURL, enrich.ObjectPerson, 1},
		{enrich.LookupEmail, enrich.ObjectPerson, 3},
	}
	for _, tt := range tests {
		t.Run(string(tt.lookup), func(t *testing.T) {
			is := is.New(t)
			is.Equal(tt.lookup.ObjectType(), tt.object)
			is.Equal(tt.lookup.Cost(), tt.cost)
		})
	}
}

// sent turns hints into hints as a request sends them: the empty ones absent.
func sent(h enrich.Hints) enrich.SentHints {
	var s enrich.SentHints
	for _, f := range []struct {
		v   string
		dst **string
	}{{h.FullName, &s.FullName}, {h.Title, &s.Title}, {h.Location, &s.Location}} {
		if f.v != "" {
			*f.dst = ptr(f.v)
		}
	}
	return s
}

// A slug that lower-casing lengthens (Ⱥ is two bytes, ⱥ three) must not normalize to a
// URL over the limit, which would then be refused as itself.
func TestANormalizedURLStaysWithinTheLimit(t *testing.T) {
	is := is.New(t)
	n := enrich.Normalizer{}
	raw := "https://www.linkedin.com/in/" + strings.Repeat("Ⱥ", 1000) // 2,028 bytes, 3,028 once normalized
	is.True(len(raw) <= enrich.MaxURL)
	_, err := n.PersonURL(raw)
	isInvalid(t, err)
	is.True(strings.Contains(err.Error(), "longer than 2048 bytes once normalized"))

	raw = "https://www.linkedin.com/in/" + strings.Repeat("Ⱥ", 600) // 1,828 bytes once normalized
	got, err := n.PersonURL(raw)
	is.NoErr(err)
	is.True(len(got) <= enrich.MaxURL)
	again, err := n.PersonURL(got)
	is.NoErr(err)
	is.Equal(again, got)
}
