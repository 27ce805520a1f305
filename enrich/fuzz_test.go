package enrich

import (
	"errors"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

// The fuzz tests hold the parsers of what clients and sources send to bounds on time
// and allocations linear in the input, besides their own correctness properties. The
// bounds are loose enough for a loaded 2-core machine and for ReadMemStats counting
// every goroutine; a linear function stays far below them on a large input, a
// quadratic one (as LocalPartNames was) far above. `go test` runs the seeds; `make
// fuzz` runs each fuzzer for a while. The seeds stay a few KiB long, or the fuzzer
// spends its time minimizing them: TestALongLocalPartCostsLinearMemory reads 60,000
// bytes.

// bounded runs f and fails t when it took more time or allocated more than an input
// of n bytes allows.
func bounded(t *testing.T, n int, f func()) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	f()
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	if limit := 2*time.Second + time.Duration(n)*50*time.Microsecond; took > limit {
		t.Errorf("%d bytes of input took %v, more than %v", n, took, limit)
	}
	if bytes, limit := after.TotalAlloc-before.TotalAlloc, uint64(256*n+4<<20); bytes > limit {
		t.Errorf("%d bytes of input allocated %d bytes, more than %d", n, bytes, limit)
	}
	if allocs, limit := after.Mallocs-before.Mallocs, uint64(64*n+20_000); allocs > limit {
		t.Errorf("%d bytes of input made %d allocations, more than %d", n, allocs, limit)
	}
}

// refusal checks that err is a 400 whose message is valid UTF-8 and echoes no more
// than the input (quoted) and the limit it broke.
func refusal(t *testing.T, err error, input string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindInvalid {
		t.Fatalf("a refusal must be invalid input (400), got %#v", err)
	}
	if limit := 4*min(len(strings.TrimSpace(input)), MaxURL) + 300; len(e.Message) > limit || !utf8.ValidString(e.Message) {
		t.Fatalf("the message must be short and valid UTF-8, got %d bytes: %q", len(e.Message), e.Message)
	}
}

// checkDomain checks a normalized domain: lower-case ASCII within the limits of DNS,
// normalizing to itself.
func checkDomain(t *testing.T, d string) {
	t.Helper()
	if d == "" || len(d) > MaxDomain || strings.ToLower(d) != d || strings.HasPrefix(d, "www.") {
		t.Fatalf("normalized domain %q is not a lower-case domain of at most %d bytes", d, MaxDomain)
	}
	for i := range len(d) {
		if d[i] >= utf8.RuneSelf {
			t.Fatalf("normalized domain %q is not ASCII", d)
		}
	}
	for label := range strings.SplitSeq(d, ".") {
		if label == "" || len(label) > MaxLabel {
			t.Fatalf("normalized domain %q has an empty label or one over %d bytes", d, MaxLabel)
		}
	}
	again, err := Normalizer{}.Domain(d)
	if err != nil || again != d {
		t.Fatalf("normalizing %q again gave %q, %v", d, again, err)
	}
}

func FuzzDomain(f *testing.F) {
	for _, s := range []string{
		"acme.com", "HTTPS://WWW.Acme.COM/about", "  acme.com.\n", "acme.com:8080", "[::1]", "10.0.0.1", "127.1",
		"0x7f.1", "bücher.de", "https://shop.bücher.de/kontakt", "blog.acme.co.uk", "jane@acme.com", "a..b.com",
		"xn--bcher-kva.de", "www.com", "-acme.com", "acme-.com", "http://", "://acme.com", "acme.com/path?q=1#frag",
		strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 57) + ".com",
		strings.Repeat("a", 64) + ".com", strings.Repeat("ü", 60) + ".de", strings.Repeat("a.", 2000) + "com",
		"https://acme.com/" + strings.Repeat("a", 4000),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		var d string
		var err error
		bounded(t, len(raw), func() { d, err = Normalizer{}.Domain(raw) })
		if err != nil {
			refusal(t, err, raw)
			return
		}
		checkDomain(t, d)
		if CheckText("", d) != nil {
			t.Fatalf("normalized %q to %q, which is not text", raw, d)
		}
	})
}

func FuzzEmail(f *testing.F) {
	for _, s := range []string{
		"jane@acme.com", " Jane.Doe+news@WWW.Acme.COM ", "Jane <jane@acme.com>", `"jane doe"@acme.com`, "jane@[10.0.0.1]",
		"jane@bücher.de", "jané@acme.com", "a@b@acme.com", "@acme.com", "jane@", "jane", "info@acme.com", "jane@gmail.com",
		strings.Repeat("j", 64) + "@acme.com", strings.Repeat("j", 65) + "@acme.com", strings.Repeat("a", 4000) + "@acme.com",
		"jane@" + strings.Repeat("a", 64) + ".com", "jane@" + strings.Repeat("中", 80) + ".com",
		strings.Repeat("j", 60) + "@" + strings.Repeat("ü", 62) + ".de", strings.Repeat("a-", 2000) + "@acme.com",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		var out string
		var err error
		bounded(t, len(raw), func() {
			out, err = Normalizer{}.Email(raw)
			if err == nil {
				Refusal(out)
				LocalPartNames(out[:strings.LastIndex(out, "@")])
			}
		})
		if err != nil {
			refusal(t, err, raw)
			return
		}
		if CheckText("", out) != nil {
			t.Fatalf("normalized %q to %q, which is not text", raw, out)
		}
		at := strings.LastIndex(out, "@")
		local, domain := out[:at], out[at+1:]
		if len(out) > MaxAddress || len(local) > MaxLocalPart || local == "" {
			t.Fatalf("normalized address %q is over the limits", out)
		}
		if !strings.HasPrefix(strings.TrimSpace(raw), local+"@") {
			t.Fatalf("the local part of %q was not kept as sent: %q", raw, out)
		}
		checkDomain(t, domain)
		if again, err := (Normalizer{}).Email(out); err != nil || again != out {
			t.Fatalf("normalizing %q again gave %q, %v", out, again, err)
		}
		l, d, err := SplitAddress(out)
		if err != nil || l != local || d != domain {
			t.Fatalf("SplitAddress(%q) = %q, %q, %v", out, l, d, err)
		}
	})
}

func FuzzNetworkURL(f *testing.F) {
	for _, s := range []string{
		"https://www.linkedin.com/company/acme", "http://linkedin.com/company/Acme/about/?x=1#y", "https://de.linkedin.com/in/jane-doe",
		"https://www.linkedin.com/in/j%C3%A9r%C3%B4me", "https://www.linkedin.com/in/a%2Fb", "https://www.linkedin.com/in/..",
		"https://user@www.linkedin.com/in/jane", "https://www.linkedin.com:443/in/jane", "ftp://www.linkedin.com/in/jane",
		"https://evil.example/in/jane", "https://www.linkedin.com.evil.example/in/jane", "https://www.linkedin.com/in/%",
		"https://www.linkedin.com/in/" + strings.Repeat("İ", 1000), "https://www.linkedin.com/in/" + strings.Repeat("a", 4000),
		"https://www.linkedin.com/company/" + strings.Repeat("%41", 600),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		n := Normalizer{}
		for _, c := range []struct {
			section string
			norm    func(string) (string, error)
		}{{"company", n.CompanyURL}, {"in", n.PersonURL}} {
			var out string
			var err error
			bounded(t, len(raw), func() { out, err = c.norm(raw) })
			if err != nil {
				refusal(t, err, raw)
				continue
			}
			prefix := "https://" + DefaultNetworkHost + "/" + c.section + "/"
			slug := SlugOf(out)
			if len(out) > MaxURL || !strings.HasPrefix(out, prefix) || out != prefix+slug || slug == "" ||
				strings.ContainsAny(slug, "/?#%") || strings.ToLower(slug) != slug || CheckText("", out) != nil {
				t.Fatalf("normalized %q to %q", raw, out)
			}
			// Bytes that are not UTF-8 are refused, not lower-cased into U+FFFD.
			if unescaped, _ := url.PathUnescape(raw); strings.Contains(out, "\uFFFD") && !strings.Contains(unescaped, "\uFFFD") {
				t.Fatalf("normalized %q to %q: bytes that are not UTF-8 became U+FFFD", raw, out)
			}
			if again, err := c.norm(out); err != nil || again != out {
				t.Fatalf("normalizing %q again gave %q, %v", out, again, err)
			}
		}
	})
}

func FuzzLocalPartNames(f *testing.F) {
	for _, s := range []struct{ local, first, last string }{
		{"jane.doe", "Jane", "Doe"}, {"J.Smith2+news", "John", "Smith"}, {"bob.smith", "Robert", "Smith"},
		{"zoe.aeroe", "Zoë", "Ærøe"}, {"mueller", "Hans", "Müller"}, {"jvanderberg", "Jan", "van der Berg"},
		{"jean-luc.picard", "Jean-Luc", "Picard"}, {"obrien", "Conan", "O'Brien"}, {`"jane"`, "Jane", ""},
		{"...", "", ""}, {"a", "A", "B"}, {"ﬀ.ǅ", "ﬀ", "ǅ"}, {"ΣΑΣ.x", "ΣΑΣ", "x"},
		{strings.Repeat("a", 4000), "Jane", "Doe"}, {strings.Repeat("é", 2000), "é", "é"},
		{strings.Repeat("ab.", 21), distinctWords(100), distinctWords(100)},
		// Compound and particle surnames, written every way an address writes them.
		{"k.bernerslee", "Ken", "Berners-Lee"}, {"k.berners-lee", "Katherine", "Berners-Lee"},
		{"ken.berners.lee", "Ken", "Berners-Lee"}, {"barbara.lee", "Barbara", "Berners-Lee"},
		{"dennismccarthy", "Dennis", "McCarthy"}, {"vint_mccarthy", "Vint", "McCarthy"},
		{"d.mc-carthy", "Dennis", "Mc Carthy"}, {"jan.vanderberg", "Jan", "van der Berg"},
		{"jan.van.der.berg", "Jan", "van der Berg"}, {"jberg", "Jan", "van der Berg"},
		{"sean.o.brien", "Sean", "O'Brien"}, {"sobrien", "Sean", "O’Brien"}, {"rjones", "Robert", "Jones"},
		{"ghopper", "Margaret", "Hopper"},
	} {
		f.Add(s.local, s.first, s.last)
	}
	f.Fuzz(func(t *testing.T, local, first, last string) {
		name := PersonName{First: first, Last: last}
		var clean, pattern string
		var names []string
		bounded(t, len(local)+len(first)+len(last), func() {
			clean = CleanLocalPart(local)
			names = LocalPartNames(local)
			pattern = MatchPattern(name, local)
			StaffQuery{Names: names}.Matches(first, last)
			IsRoleLocalPart(local)
			NameOf(&Person{FullName: &first})
			SplitFullName(last)
		})
		if strings.Trim(clean, "._-") != clean ||
			strings.ContainsFunc(clean, func(r rune) bool { return !strings.ContainsRune("._-", r) && !unicode.IsLetter(r) }) {
			t.Fatalf("CleanLocalPart(%q) = %q: not letters and inner separators", local, clean)
		}
		if len(local) > MaxLocalPart && (pattern != "" || names != nil) {
			t.Fatalf("a local part over %d bytes named %q, fit %q", MaxLocalPart, names, pattern)
		}
		if pattern != "" && !slices.ContainsFunc(patterns, func(p addressPattern) bool {
			return p.name == pattern
		}) {
			t.Fatalf("MatchPattern returned %q, not a pattern", pattern)
		}
		if slices.Contains(names, "") {
			t.Fatalf("LocalPartNames(%q) holds an empty name", local)
		}
		// A search with the local part's names lists the person it fits: the forms meet.
		// Only a given name unknown to the lists, joined to the surname, is not split
		// out (the search then cannot list them, and no person held decides alone).
		if pattern != "" && pattern != PatternFirstLast && pattern != PatternLastFirst && len(local) <= MaxLocalPart &&
			!slices.ContainsFunc(append(nameWords(Fold(first)), nameWords(Fold(last))...), func(w string) bool { return len([]rune(w)) < 3 }) &&
			!(StaffQuery{Names: names}).Matches(first, last) {
			t.Fatalf("%q fits %q %q as %s, but a search for %q would not list them", local, first, last, pattern, names)
		}
		// A name written first.last in a local part fits the person under that pattern.
		f, l := nameWords(Fold(first)), nameWords(Fold(last))
		if len(f) == 1 && len(l) == 1 && len(f[0])+1+len(l[0]) <= MaxLocalPart {
			if got := MatchPattern(name, f[0]+"."+l[0]); got != PatternFirstDotLast {
				t.Fatalf("%s.%s does not fit %q %q as first.last: got %q", f[0], l[0], first, last, got)
			}
		}
	})
}
