package namecorpus_test

import (
	"os"
	"strings"
	"testing"

	"enrichd/enrich"
	"enrichd/enrich/namecorpus"
)

// listed are the names enrichd's lists hold: the given names a joined address is split
// at, and every name of the nicknames.
func listed(t *testing.T) map[string]bool {
	t.Helper()
	set := map[string]bool{}
	for _, file := range []string{"../data/givennames.txt", "../data/nicknames.txt"} {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			for _, w := range strings.Fields(strings.ReplaceAll(line, ":", " ")) {
				set[enrich.Fold(w)] = true
			}
		}
	}
	return set
}

// No word of the corpus's names is on enrichd's lists, so what email lookups find in
// it they find without one.
func TestNoNameOfTheCorpusIsListed(t *testing.T) {
	set := listed(t)
	for _, c := range namecorpus.Generate(namecorpus.Options{Seed: "list", Companies: 42}) {
		for _, p := range c.Staff {
			for _, w := range strings.FieldsFunc(enrich.Fold(p.Full()), func(r rune) bool { return r == ' ' || r == '-' }) {
				if set[w] && !particle(w) {
					t.Errorf("%q (%s) is on enrichd's lists", w, p.Full())
				}
			}
		}
	}
}

func particle(w string) bool {
	switch w {
	case "van", "der", "den", "de", "la", "del", "da", "dos", "du", "le", "ten", "von", "di", "della", "dela", "los":
		return true
	}
	return false
}

// The same options give the same corpus; its figures are of the size the measurements
// report, and every address belongs to whom it says.
func TestTheCorpusIsDeterministic(t *testing.T) {
	a := namecorpus.Generate(namecorpus.Options{Seed: "x", Companies: 40})
	b := namecorpus.Generate(namecorpus.Options{Seed: "x", Companies: 40})
	people, addresses, unique, several, nobody := 0, 0, 0, 0, 0
	locales := map[string]bool{}
	for i := range a {
		if len(a[i].Staff) != len(b[i].Staff) || len(a[i].Addresses) != len(b[i].Addresses) {
			t.Fatalf("company %d differs between two runs", i)
		}
		for j := range a[i].Addresses {
			if a[i].Addresses[j].Local != b[i].Addresses[j].Local {
				t.Fatalf("address %d of company %d differs between two runs", j, i)
			}
		}
		people += len(a[i].Staff)
		for _, p := range a[i].Staff {
			locales[p.Locale] = true
		}
		for _, ad := range a[i].Addresses {
			addresses++
			switch len(a[i].Fits(ad)) {
			case 0:
				nobody++
			case 1:
				unique++
			default:
				several++
			}
		}
	}
	t.Logf("40 companies, %d people, %d addresses (%d fit one current employee, %d several, %d nobody or only a former one), %d locales",
		people, addresses, unique, several, nobody, len(locales))
	if len(locales) != 21 || people < 3000 || several == 0 || nobody == 0 {
		t.Errorf("the corpus is not what it should be: %d locales, %d people, %d addresses fit several, %d nobody", len(locales), people, several, nobody)
	}
}
