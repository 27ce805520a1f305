package enrich_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/matryer/is"

	"enrichd/enrich"
)

func TestMatchPattern(t *testing.T) {
	jane := enrich.PersonName{First: "Jane", Last: "Smith"}
	tests := []struct {
		name  string
		who   enrich.PersonName
		local string
		want  string // "" when the local part does not fit
	}{
		{"first.last", jane, "jane.smith", enrich.PatternFirstDotLast},
		{"first_last", jane, "jane_smith", enrich.PatternFirstUnderLast},
		{"first-last", jane, "jane-smith", enrich.PatternFirstDashLast},
		{"firstlast", jane, "janesmith", enrich.PatternFirstLast},
		{"flast", jane, "jsmith", enrich.PatternFLast},
		{"f.last", jane, "j.smith", enrich.PatternFDotLast},
		{"firstl", jane, "janes", enrich.PatternFirstL},
		{"first.l", jane, "jane.s", enrich.PatternFirstDotL},
		{"first", jane, "jane", enrich.PatternFirst},
		{"last", jane, "smith", enrich.PatternLast},
		{"last.first", jane, "smith.jane", enrich.PatternLastDotFirst},
		{"lastf", jane, "smithj", enrich.PatternLastF},
		{"lastfirst", jane, "smithjane", enrich.PatternLastFirst},

		{"case folded", jane, "Jane.SMITH", enrich.PatternFirstDotLast},
		{"digits stripped", jane, "jane.smith2", enrich.PatternFirstDotLast},
		{"digits inside stripped", jane, "j4smith", enrich.PatternFLast},
		{"+tag stripped", jane, "jane.smith+newsletter", enrich.PatternFirstDotLast},
		{"another person", jane, "john.smith", ""},
		{"last name alone is not the first", jane, "smith.smith", ""},
		{"wrong initial", jane, "ksmith", ""},
		{"empty once cleaned", jane, "1234", ""},
		{"only separators", jane, "._-", ""},

		{"nickname in the address", enrich.PersonName{First: "Robert", Last: "Jones"}, "bob.jones", enrich.PatternFirstDotLast},
		{"formal name in the address", enrich.PersonName{First: "Bill", Last: "Gates"}, "william.gates", enrich.PatternFirstDotLast},
		{"two nicknames of one name", enrich.PersonName{First: "Liz", Last: "Taylor"}, "beth.taylor", enrich.PatternFirstDotLast},
		{"the formal name's initial", enrich.PersonName{First: "Bob", Last: "Jones"}, "rjones", enrich.PatternFLast},
		{"the name's own initial", enrich.PersonName{First: "Bob", Last: "Jones"}, "bjones", enrich.PatternFLast},
		{"another nickname's initial is not a first initial", enrich.PersonName{First: "Margaret", Last: "Hopper"}, "ghopper", ""},
		{"nor is a nickname's initial of a formal name", enrich.PersonName{First: "Robert", Last: "Jones"}, "bjones", ""},
		{"compound surname joined", enrich.PersonName{First: "Ken", Last: "Berners-Lee"}, "k.bernerslee", enrich.PatternFDotLast},
		{"compound surname dotted", enrich.PersonName{First: "Ken", Last: "Berners-Lee"}, "ken.berners.lee", enrich.PatternFirstDotLast},
		{"compound surname by a part", enrich.PersonName{First: "Barbara", Last: "Berners-Lee"}, "barbara.lee", enrich.PatternFirstDotLast},
		{"mc written apart", enrich.PersonName{First: "Dennis", Last: "McCarthy"}, "dennis.mc-carthy", enrich.PatternFirstDotLast},
		{"mc apart in the name", enrich.PersonName{First: "Dennis", Last: "Mc Carthy"}, "dmccarthy", enrich.PatternFLast},
		{"apostrophe written with a dot", enrich.PersonName{First: "Sean", Last: "O'Brien"}, "sean.o.brien", enrich.PatternFirstDotLast},
		{"particles joined", enrich.PersonName{First: "Jan", Last: "van der Berg"}, "jvanderberg", enrich.PatternFLast},
		{"particles left out", enrich.PersonName{First: "Jan", Last: "van der Berg"}, "jan.berg", enrich.PatternFirstDotLast},
		{"nicknames do not chain across names", enrich.PersonName{First: "Robert", Last: "Jones"}, "albert.jones", ""},
		{"unrelated first name", enrich.PersonName{First: "Robert", Last: "Jones"}, "tom.jones", ""},

		{"accents folded", enrich.PersonName{First: "José", Last: "Núñez"}, "jose.nunez", enrich.PatternFirstDotLast},
		{"accents in the address", enrich.PersonName{First: "Jose", Last: "Nunez"}, "josé.núñez", enrich.PatternFirstDotLast},
		{"umlaut dropped", enrich.PersonName{First: "Jürgen", Last: "Müller"}, "jurgen.muller", enrich.PatternFirstDotLast},
		{"umlaut transliterated", enrich.PersonName{First: "Jürgen", Last: "Müller"}, "juergen.mueller", enrich.PatternFirstDotLast},
		{"letters without decomposition", enrich.PersonName{First: "Søren", Last: "Łukasiewicz"}, "soren.lukasiewicz", enrich.PatternFirstDotLast},
		{"apostrophe", enrich.PersonName{First: "Sean", Last: "O'Brien"}, "sean.obrien", enrich.PatternFirstDotLast},

		{"hyphenated last name whole", enrich.PersonName{First: "Anna", Last: "Smith-Jones"}, "anna.smith-jones", enrich.PatternFirstDotLast},
		{"hyphenated last name joined", enrich.PersonName{First: "Anna", Last: "Smith-Jones"}, "asmithjones", enrich.PatternFLast},
		{"hyphenated last name first part", enrich.PersonName{First: "Anna", Last: "Smith-Jones"}, "anna.smith", enrich.PatternFirstDotLast},
		{"hyphenated last name second part", enrich.PersonName{First: "Anna", Last: "Smith-Jones"}, "ajones", enrich.PatternFLast},
		{"two-part last name joined", enrich.PersonName{First: "Gabriel", Last: "García Márquez"}, "gabriel.garciamarquez", enrich.PatternFirstDotLast},
		{"two-part last name first part", enrich.PersonName{First: "Gabriel", Last: "García Márquez"}, "ggarcia", enrich.PatternFLast},
		{"two-part last name second part", enrich.PersonName{First: "Gabriel", Last: "García Márquez"}, "gabriel.marquez", enrich.PatternFirstDotLast},
		{"particle kept", enrich.PersonName{First: "Jan", Last: "van der Berg"}, "jan.vanderberg", enrich.PatternFirstDotLast},
		{"particle dropped", enrich.PersonName{First: "Jan", Last: "van der Berg"}, "jan.berg", enrich.PatternFirstDotLast},
		{"particle alone is no last name", enrich.PersonName{First: "Jan", Last: "van der Berg"}, "jan.van", ""},
		{"compound first name", enrich.PersonName{First: "Mary Ann", Last: "Lee"}, "maryann.lee", enrich.PatternFirstDotLast},
		{"compound first name, first word", enrich.PersonName{First: "Mary Ann", Last: "Lee"}, "mary.lee", enrich.PatternFirstDotLast},
		{"no last name: only first", enrich.PersonName{First: "Cher"}, "cher", enrich.PatternFirst},
		{"no last name: nothing else", enrich.PersonName{First: "Cher"}, "cher.x", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			is.Equal(enrich.MatchPattern(tt.who, tt.local), tt.want)
		})
	}
}

// Initials collide: one local part can fit several people, which is what makes an
// address ambiguous.
func TestMatchPatternInitialsCollide(t *testing.T) {
	is := is.New(t)
	for _, who := range []enrich.PersonName{{First: "Jane", Last: "Smith"}, {First: "John", Last: "Smith"}, {First: "Jim", Last: "Smith"}} {
		is.Equal(enrich.MatchPattern(who, "jsmith"), enrich.PatternFLast)
	}
	is.Equal(enrich.MatchPattern(enrich.PersonName{First: "Adam", Last: "Smith"}, "jsmith"), "")
	// Jane Smith and Jan Esmith both are "janesmith".
	is.Equal(enrich.MatchPattern(enrich.PersonName{First: "Jan", Last: "Esmith"}, "janesmith"), enrich.PatternFirstLast)
}

func TestSplitFullName(t *testing.T) {
	tests := []struct {
		full        string
		first, last string
	}{
		{"Jane Doe", "Jane", "Doe"},
		{"Dr. Jane van der Berg, PhD", "Jane", "van der Berg"},
		{"John Smith Jr.", "John", "Smith"},
		{"Cher", "Cher", ""},
		{"  ", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.full, func(t *testing.T) {
			is := is.New(t)
			is.Equal(enrich.SplitFullName(tt.full), enrich.PersonName{First: tt.first, Last: tt.last})
		})
	}
}

func TestLocalPartNames(t *testing.T) {
	is := is.New(t)
	names := enrich.LocalPartNames("Bob.Smith2+x")
	for _, want := range []string{"bob", "robert", "smith"} {
		is.True(slices.Contains(names, want)) // the words and the first name's equivalents
	}
	names = enrich.LocalPartNames("jsmith")
	is.True(slices.Contains(names, "smith"))  // flast
	is.True(slices.Contains(names, "jsmith")) // a single word
	names = enrich.LocalPartNames("johnsmith")
	is.True(slices.Contains(names, "john") && slices.Contains(names, "smith")) // a split at a given name
	is.Equal(len(enrich.LocalPartNames("123")), 0)

	// Only plausible names: no fragments of two letters, no pieces that are no name.
	is.Equal(enrich.LocalPartNames("rjones"), []string{"rjones", "jones", "rjone"})
	names = enrich.LocalPartNames("dennismccarthy")
	for _, want := range []string{"dennismccarthy", "dennis", "mccarthy", "carthy"} {
		is.True(slices.Contains(names, want)) // the given name split off, the particle left out
	}
	is.True(slices.Contains(enrich.LocalPartNames("mccarthyvint"), "mccarthy")) // lastfirst
	is.True(!slices.Contains(names, "de") && !slices.Contains(names, "ennismccarthy"[:3]))
	is.True(slices.Contains(enrich.LocalPartNames("k.bernerslee"), "bernerslee"))
	is.True(slices.Contains(enrich.LocalPartNames("jan.van.der.berg"), "vanderberg")) // particles join the name after them
	is.True(!slices.Contains(enrich.LocalPartNames("jan.van.der.berg"), "van"))
	is.True(slices.Contains(enrich.LocalPartNames("jvanderberg"), "berg"))
	is.True(slices.Contains(enrich.LocalPartNames("ghopper"), "hopper"))
	for _, n := range enrich.LocalPartNames("rjones") {
		is.True(len(n) > 2) // never a fragment of two letters
	}
}

func TestRefusal(t *testing.T) {
	tests := []struct {
		address string
		refused bool
	}{
		{"jane@gmail.com", true},
		{"jane@googlemail.com", true},
		{"jane@outlook.fr", true},
		{"jane@proton.me", true},
		{"jane@yahoo.co.uk", true},
		{"jane@web.de", true},
		{"info@acme.com", true},
		{"Sales@acme.com", true},
		{"support+eu@acme.com", true},
		{"noreply@acme.com", true},
		{"no-reply@acme.com", true},
		{"postmaster@acme.com", true},
		{"careers2@acme.com", true},
		{"jane@acme.com", false},
		{"jane.doe@acme.co.uk", false},
		{"information.officer@acme.com", false},
		{"salesforce@acme.com", false},
	}
	for _, tt := range tests {
		t.Run(tt.address, func(t *testing.T) {
			is := is.New(t)
			terr := enrich.Refusal(tt.address)
			is.Equal(terr != nil, tt.refused)
			if terr != nil {
				is.Equal(terr.Code, enrich.CodeNotFound) // refusals are not_found
				is.True(terr.Message != "")
			}
		})
	}
}

func TestPersonalMailboxListIsLarge(t *testing.T) {
	is := is.New(t)
	// Matched on the registrable domain: a subdomain of a provider is the provider.
	is.True(enrich.IsPersonalMailboxDomain("mail.gmail.com"))
	is.True(!enrich.IsPersonalMailboxDomain("acme.com"))
	n := 0
	for _, d := range []string{"gmail.com", "hotmail.com", "aol.com", "gmx.de", "mail.ru", "qq.com", "163.com", "naver.com", "icloud.com", "yandex.ru", "libero.it", "orange.fr"} {
		if enrich.IsPersonalMailboxDomain(d) {
			n++
		}
	}
	is.Equal(n, 12)
}

func TestAddressKey(t *testing.T) {
	is := is.New(t)
	is.Equal(enrich.AddressKey("Jane.Doe+news@acme.com"), "jane.doe@acme.com")
	is.Equal(enrich.AddressKey("jane@acme.com"), "jane@acme.com")
}

func TestEmployerEmploys(t *testing.T) {
	acme := enrich.Employer{NetworkURL: "https://www.linkedin.com/company/acme", Domains: []string{"acme.com", "acme.io"}, Name: "Acme"}
	noPage := enrich.Employer{Domains: []string{"acme.com"}, Name: "Acme"}
	p := enrich.Ptr[string]
	tests := []struct {
		name     string
		employer enrich.Employer
		pos      enrich.Position
		want     bool
	}{
		{"same page", acme, enrich.Position{CompanyNetworkURL: p("https://www.linkedin.com/company/acme"), CompanyName: p("Other name")}, true},
		{"another page of the same name", acme, enrich.Position{CompanyNetworkURL: p("https://www.linkedin.com/company/acme-tools"), CompanyName: p("Acme")}, false},
		{"domain of the matched company", acme, enrich.Position{Company: &enrich.PositionCompany{Domain: p("acme.io")}, CompanyName: p("Acme Europe")}, true},
		{"another domain", acme, enrich.Position{Company: &enrich.PositionCompany{Domain: p("acme.org")}, CompanyName: p("Acme")}, false},
		{"page on one side only: domain decides", noPage, enrich.Position{CompanyNetworkURL: p("https://www.linkedin.com/company/x"), Company: &enrich.PositionCompany{Domain: p("acme.com")}}, true},
		{"name folded", acme, enrich.Position{CompanyName: p("ACME, Inc.")}, true},
		{"name with accents", enrich.Employer{Name: "Société Générale"}, enrich.Position{CompanyName: p("societe generale SA")}, true},
		{"another name", acme, enrich.Position{CompanyName: p("Acme Tools")}, false},
		{"no employer", acme, enrich.Position{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			is.Equal(tt.employer.Employs(tt.pos), tt.want)
		})
	}
}

func TestCurrentPositionOnly(t *testing.T) {
	is := is.New(t)
	acme := enrich.Employer{NetworkURL: "https://www.linkedin.com/company/acme", Name: "Acme"}
	former := &enrich.Person{FullName: enrich.Ptr("Jane Smith"), Positions: []enrich.Position{{
		CompanyNetworkURL: enrich.Ptr("https://www.linkedin.com/company/acme"), EndDate: enrich.Ptr("2023-01-01"),
	}}}
	_, ok := acme.Confirm(former, "jane.smith", enrich.MatchResolved)
	is.True(!ok) // a former employee does not confirm
	former.Positions[0].IsCurrent = true
	_, ok = acme.Confirm(former, "jane.smith", enrich.MatchResolved)
	is.True(!ok) // nor does a position marked current that has ended
	former.Positions[0].EndDate = nil
	c, ok := acme.Confirm(former, "jane.smith", enrich.MatchResolved)
	is.True(ok)
	is.Equal(c.Pattern, enrich.PatternFirstDotLast)
}

// A surname's particles come off the same way every time, the longest first:
// dellarosa asks for rosa (Della Rosa), never sometimes larosa.
func TestParticlesComeOffTheSameWayEveryTime(t *testing.T) {
	for range 200 {
		names := enrich.LocalPartNames("dellarosa")
		if !slices.Contains(names, "rosa") || slices.Contains(names, "larosa") {
			t.Fatalf("dellarosa searches %v, want rosa and not larosa", names)
		}
	}
}

// An elided particle written apart (o.brien, d.angelo) joins the name after it, as the
// person's surname is spelled: the search asks for obrien, so it lists Sean O'Brien,
// whom the address fits. A run of particles joins once, from its start: van.der.berg
// asks for vanderberg, not also derberg.
func TestElidedParticlesWrittenApartAreSearchedJoined(t *testing.T) {
	for _, tt := range []struct {
		local, first, last string
	}{
		{"s.o.brien", "Sean", "O'Brien"},
		{"o.brien", "Sean", "O'Brien"},
		{"sean.o.brien", "Sean", "O'Brien"},
		{"a.d.angelo", "Anna", "D'Angelo"},
		{"d.angelo", "Anna", "D'Angelo"},
	} {
		if enrich.MatchPattern(enrich.PersonName{First: tt.first, Last: tt.last}, tt.local) == "" {
			t.Fatalf("%s does not fit %s %s", tt.local, tt.first, tt.last)
		}
		q := enrich.StaffQuery{Names: enrich.LocalPartNames(tt.local)}
		if !q.Matches(tt.first, tt.last) {
			t.Errorf("%s fits %s %s, but the search asks for %v", tt.local, tt.first, tt.last, q.Names)
		}
	}
	if names := enrich.LocalPartNames("jan.van.der.berg"); slices.Contains(names, "derberg") {
		t.Errorf("jan.van.der.berg asks for %v, a piece that is no name", names)
	}
}

// A particle is not taken off a given name that begins a joined local part:
// dennismccarthy asks for dennis and mccarthy, never nismccarthy.
func TestAGivenNameLosesNoParticle(t *testing.T) {
	names := enrich.LocalPartNames("dennismccarthy")
	for _, junk := range []string{"nismccarthy", "nismccarth"} {
		if slices.Contains(names, junk) {
			t.Errorf("dennismccarthy asks for %v, with %s, which is no name", names, junk)
		}
	}
	for _, want := range []string{"dennis", "mccarthy", "carthy"} {
		if !slices.Contains(names, want) {
			t.Errorf("dennismccarthy asks for %v, without %s", names, want)
		}
	}
	if names := enrich.LocalPartNames("vanderberg"); !slices.Contains(names, "berg") {
		t.Errorf("vanderberg asks for %v, without berg", names)
	}
}

// The most common given names are split out of a joined local part, so the search
// lists the person: seanobrien asks for sean and obrien.
func TestCommonGivenNamesAreSplitOut(t *testing.T) {
	for _, tt := range []struct{ local, first, last string }{
		{"seanobrien", "Sean", "O'Brien"},
		{"paulsmith", "Paul", "Smith"},
		{"kevinjones", "Kevin", "Jones"},
		{"georgewu", "George", "Wu"},
		{"millerryan", "Ryan", "Miller"},
	} {
		q := enrich.StaffQuery{Names: enrich.LocalPartNames(tt.local)}
		if !q.Matches(tt.first, tt.last) || !slices.Contains(q.Names, enrich.Fold(tt.first)) {
			t.Errorf("%s asks for %v, which does not list %s %s", tt.local, q.Names, tt.first, tt.last)
		}
	}
}

// The names the address spells come before the other names of the same first name.
func TestLocalPartSpelledComesFirst(t *testing.T) {
	is := is.New(t)
	names := enrich.LocalPartNames("robert.jones")
	is.Equal(names[:2], []string{"robert", "jones"})
	is.True(slices.Contains(names, "bob"))
	is.Equal(enrich.LocalPartNames("j.vanderberg")[:2], []string{"vanderberg", "berg"})
}

// Every split of a joined name into two of two letters or more is listed, whatever
// list holds them: a joined address is searched for without a list of given names.
func TestLocalPartSplitsNeedNoList(t *testing.T) {
	is := is.New(t)
	is.Equal(enrich.LocalPartSplits("zbigniew"), [][2]string{{"zb", "igniew"}, {"zbi", "gniew"}, {"zbig", "niew"}, {"zbign", "iew"}, {"zbigni", "ew"}})
	splits := enrich.LocalPartSplits("aitanasaez")
	is.True(slices.Contains(splits, [2]string{"aitana", "saez"}))
	is.Equal(len(splits), len("aitanasaez")-3)                                             // n letters, n-3 splits of two letters a side
	is.True(slices.Contains(enrich.LocalPartSplits("kimly.tran"), [2]string{"kim", "ly"})) // a piece of a local part with separators
	is.Equal(len(enrich.LocalPartSplits("jo")), 0)
	is.Equal(enrich.LocalPartSplits(strings.Repeat("a", enrich.MaxLocalPart+1)), [][2]string(nil))
}
