package enrich

import (
	"runtime"
	"strings"
	"testing"
)

// allocated returns the bytes and the allocations f makes.
func allocated(f func()) (bytes, allocs uint64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, after.Mallocs - before.Mallocs
}

// distinctWords returns n different words of four letters, space-separated.
func distinctWords(n int) string {
	var b strings.Builder
	for i := range n {
		x := i
		b.WriteByte(' ')
		for range 4 {
			b.WriteByte(byte('a' + x%26))
			x /= 26
		}
	}
	return b.String()
}

// A local part of 30,000 or 60,000 letters once took gigabytes: every split of it into
// two words was copied. Reading one now costs memory linear in its length, whatever
// reaches these functions.
func TestALongLocalPartCostsLinearMemory(t *testing.T) {
	for _, n := range []int{4000, 30000, 60000} {
		for name, local := range map[string]string{
			"letters":    strings.Repeat("a", n),
			"separators": strings.Repeat("ab.", n/3),
			"accents":    strings.Repeat("é", n/2),
		} {
			address := local + "@acme.com"
			bytes, _ := allocated(func() {
				Refusal(address)
				LocalPartNames(local)
				MatchPattern(PersonName{First: "Jane", Last: "Doe"}, local)
				StaffQuery{Names: LocalPartNames(local)}.Matches("Jane", "Doe")
				CleanLocalPart(local)
				IsRoleLocalPart(local)
			})
			if limit := uint64(40*len(local) + 1<<20); bytes > limit {
				t.Errorf("%s, %d bytes: allocated %d bytes, more than %d", name, len(local), bytes, limit)
			}
		}
	}
}

// A local part longer than the RFC allows stands for no name and fits no pattern.
func TestALocalPartOverTheLimitNamesNobody(t *testing.T) {
	local := strings.Repeat("a", MaxLocalPart-4) + ".doe"
	if got := MatchPattern(PersonName{First: strings.Repeat("a", MaxLocalPart-4), Last: "Doe"}, local); got != PatternFirstDotLast {
		t.Fatalf("at the limit: got pattern %q", got)
	}
	if len(LocalPartNames(local)) == 0 {
		t.Fatal("at the limit: no names")
	}
	local = "a" + local
	if got := MatchPattern(PersonName{First: strings.Repeat("a", MaxLocalPart-3), Last: "Doe"}, local); got != "" {
		t.Fatalf("over the limit: got pattern %q", got)
	}
	if got := LocalPartNames(local); got != nil {
		t.Fatalf("over the limit: got names %q", got)
	}
}

// Matching a name against a local part, a hint against a name, and a staff search's
// names against a person cost time and memory linear in the name: doubling the name
// at most about doubles the allocations (a product of the name's variants, as pattern
// matching once built, quadruples them).
func TestNameMatchingIsLinearInTheName(t *testing.T) {
	cases := map[string]func(words string){
		"MatchPattern": func(words string) {
			MatchPattern(PersonName{First: words, Last: words}, "zzzz.qqqq")
		},
		"fullName hint": func(words string) {
			Employer{}.fullNameFits(distinctWords(100), Candidate{Person: &Person{FullName: &words}}, true)
		},
		"staff search names": func(words string) {
			StaffQuery{Names: LocalPartNames("jane.doe")}.Matches(words, words)
		},
		"NameOf": func(words string) { NameOf(&Person{FullName: &words}) },
	}
	for name, f := range cases {
		small, large := distinctWords(500), distinctWords(2000)
		bSmall, aSmall := allocated(func() { f(small) })
		bLarge, aLarge := allocated(func() { f(large) })
		// Four times the words: linear is 4x, quadratic 16x. 6x leaves room for maps
		// growing in steps.
		if aLarge > 6*aSmall+100 || bLarge > 6*bSmall+64<<10 {
			t.Errorf("%s: 500 words took %d allocations (%d bytes), 2000 words %d (%d bytes): not linear",
				name, aSmall, bSmall, aLarge, bLarge)
		}
	}
}

// An address over the RFC's lengths is refused by SplitAddress, and so by Refusal,
// whatever path it came by: it names nobody.
func TestSplitAddressRefusesAnAddressOverTheLimits(t *testing.T) {
	for _, address := range []string{
		strings.Repeat("a", MaxLocalPart+1) + "@acme.com",
		"jane@" + strings.Repeat("a", MaxDomain-3) + ".com",
		strings.Repeat("a", MaxLocalPart) + "@" + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 63) + ".com",
	} {
		if _, _, err := SplitAddress(address); KindOf(err) != KindInvalid || !strings.Contains(err.Error(), "longer than") {
			t.Errorf("SplitAddress(%d bytes): %v", len(address), err)
		}
		if terr := Refusal(address); terr == nil || terr.Code != CodeNotFound {
			t.Errorf("Refusal(%d bytes): %v", len(address), terr)
		}
	}
	if local, domain, err := SplitAddress(strings.Repeat("a", MaxLocalPart) + "@acme.com"); err != nil || len(local) != MaxLocalPart || domain != "acme.com" {
		t.Errorf("at the limit: %q %q %v", local, domain, err)
	}
}
