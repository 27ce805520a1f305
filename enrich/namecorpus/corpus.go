// Package namecorpus makes people's names of 21 Latin-script naming cultures that no
// list of enrich/data holds (compound given names, double surnames, particles,
// diacritics), companies staffed with them, and work addresses written the way each
// company writes its own, with whom each address belongs to. The sim source draws its
// held-out staff from it, the email-quality bench scores email lookups on them, and
// the tests measure email resolution on names no list holds.
//
// Its truth does not come from the code it measures: an address belongs to the people
// whose name renders to it (Renderings), by rules written out here, with its own
// folding of accents.
package namecorpus

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"unicode"

	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"
)

// Name is a person's name as their culture writes it.
type Name struct {
	Locale string
	// Given are the given names, in order ("Thái", "Minh"); Hyphenated joins them
	// with a hyphen when written ("Marc-Aurèle").
	Given      []string
	Hyphenated bool
	// Particle begins the surname ("van der", "da"), "" when none does.
	Particle string
	// Surnames are the family names, in order: two in Spanish and Portuguese usage,
	// the father's then the mother's.
	Surnames []string
}

// First is the given name as written.
func (n Name) First() string {
	if n.Hyphenated {
		return strings.Join(n.Given, "-")
	}
	return strings.Join(n.Given, " ")
}

// Last is the surname as written, its particle first.
func (n Name) Last() string {
	words := slices.Clone(n.Surnames)
	if n.Particle != "" {
		words = append([]string{n.Particle}, words...)
	}
	return strings.Join(words, " ")
}

// Full is the whole name as written: given names, then the surname.
func (n Name) Full() string { return n.First() + " " + n.Last() }

// Compound says the person has two given names.
func (n Name) Compound() bool { return len(n.Given) > 1 }

// DoubleSurname says the person has two family names.
func (n Name) DoubleSurname() bool { return len(n.Surnames) > 1 }

// Accented says the name carries a letter its folding changes (é, ñ, ß, ø, ...).
func (n Name) Accented() bool {
	full := strings.ToLower(n.Full())
	return fold(full) != full
}

// Plain is the name written without its diacritics ("José Núñez" as "Jose Nunez"),
// as many profiles have it.
func (n Name) Plain() Name {
	out := n
	out.Given = mapWords(n.Given, stripMarks)
	out.Surnames = mapWords(n.Surnames, stripMarks)
	out.Particle = stripMarks(n.Particle)
	return out
}

func mapWords(in []string, f func(string) string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = f(s)
	}
	return out
}

// stripMarks takes the diacritics off a name: its combining marks once decomposed,
// and the letters that do not decompose spelled out (ß: ss, ø: o).
func stripMarks(s string) string {
	stripped.Lock()
	defer stripped.Unlock()
	if out, ok := stripped.m[s]; ok {
		return out
	}
	t := transform.Chain(norm.NFD, runes.Remove(runes.In(unicode.Mn)), norm.NFC)
	out, _, err := transform.String(t, s)
	if err != nil {
		out = s
	}
	out = specials.Replace(out)
	stripped.m[s] = out
	return out
}

// stripped remembers the names stripMarks was given: a corpus has a few hundred.
var stripped = struct {
	sync.Mutex
	m map[string]string
}{m: map[string]string{}}

// specials are the letters that do not decompose into a base letter and a mark.
var specials = strings.NewReplacer("ß", "ss", "æ", "ae", "Æ", "Ae", "ø", "o", "Ø", "O", "œ", "oe", "ł", "l", "Ł", "L",
	"đ", "d", "Đ", "D", "ð", "d", "Ð", "D", "þ", "th", "Þ", "Th", "ı", "i", "İ", "I")

// fold is how an address writes a name word: lower case, no diacritics, letters only.
func fold(s string) string {
	s = strings.ToLower(stripMarks(s))
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r == ' ' {
			return r
		}
		return -1
	}, s)
}

// umlauts spells ä, ö and ü the German way, as two letters.
var umlauts = strings.NewReplacer("ä", "ae", "ö", "oe", "ü", "ue", "Ä", "Ae", "Ö", "Oe", "Ü", "Ue")

// foldings are the ways a word may be written in an address: folded, and for a German
// name with umlauts also transliterated (Müller: muller, mueller).
func (n Name) foldings(word string) []string {
	out := []string{fold(word)}
	if n.Locale == "de" {
		if t := fold(umlauts.Replace(word)); t != out[0] {
			out = append(out, t)
		}
	}
	return out
}

// words splits a written name into its words: spaces and hyphens separate, an
// apostrophe joins.
func words(s string) []string {
	s = strings.NewReplacer("'", "", "’", "").Replace(s)
	return strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '-' })
}

// GivenForms are the ways an address writes the given name: the given names joined
// ("thaiminh") and, for two, each alone ("thai", "minh": a Vietnamese Thái Minh goes
// by Minh, a Brazilian Ana Laura often by Laura). The first is the usual one.
func (n Name) GivenForms() []string {
	var out []string
	for _, joined := range n.foldings(strings.Join(n.Given, "")) {
		out = append(out, strings.ReplaceAll(joined, " ", ""))
	}
	if n.Compound() {
		for _, g := range n.Given {
			out = append(out, n.foldings(g)...)
		}
	}
	return dedupe(out)
}

// Initials are the first letters an address may write for the given name: of each
// given name. The first is the usual one.
func (n Name) Initials() []string {
	var out []string
	for _, g := range n.Given {
		out = append(out, fold(g)[:1])
	}
	return dedupe(out)
}

// SurnameForms are the ways an address writes the surname: with its particle joined
// ("vanderberg") and without it ("berg"); two surnames both joined ("garcialopez")
// and each alone. The first is the usual one, and for two surnames the second is the
// one their culture goes by alone: the first, the father's, in Spanish usage (García
// López: garcia), the last, the father's, in Portuguese (Antunes Mendonça: mendonca).
func (n Name) SurnameForms() []string {
	bases := [][]string{n.Surnames}
	if n.DoubleSurname() {
		first, last := n.Surnames[:1], n.Surnames[len(n.Surnames)-1:]
		if n.Locale == "pt" || n.Locale == "br" {
			first, last = last, first
		}
		bases = append(bases, first, last)
	}
	var out []string
	for _, b := range bases {
		var ws []string
		for _, s := range b {
			ws = append(ws, words(s)...)
		}
		whole := strings.Join(ws, "")
		out = append(out, n.foldings(whole)...)
		// The particle goes with the surname it stands before, the first: dos Santos
		// Silva is dossantos or silva, never dossilva.
		if n.Particle != "" && b[0] == n.Surnames[0] {
			out = append(out, n.foldings(strings.Join(words(n.Particle), "")+whole)...)
		}
	}
	for i := range out {
		out[i] = strings.ReplaceAll(out[i], " ", "")
	}
	return dedupe(out)
}

func dedupe(in []string) []string {
	var out []string
	for _, s := range in {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// Patterns are the local-part patterns companies write addresses in, by enrich's names.
var Patterns = []string{"first.last", "first_last", "firstlast", "flast", "f.last", "last.first", "lastfirst", "first.l", "lastf", "first"}

// render writes one address in a pattern from a given-name form, an initial and a
// surname form.
func render(pattern, given, initial, surname string) string {
	switch pattern {
	case "first.last":
		return given + "." + surname
	case "first_last":
		return given + "_" + surname
	case "firstlast":
		return given + surname
	case "flast":
		return initial + surname
	case "f.last":
		return initial + "." + surname
	case "last.first":
		return surname + "." + given
	case "lastfirst":
		return surname + given
	case "first.l":
		return given + "." + surname[:1]
	case "lastf":
		return surname + initial
	case "first":
		return given
	}
	panic("namecorpus: unknown pattern " + pattern)
}

// Renderings are the local parts the name is written as in a pattern: every given
// form (or initial) with every surname form.
func (n Name) Renderings(pattern string) []string {
	var out []string
	for _, g := range n.GivenForms() {
		for _, i := range n.Initials() {
			for _, s := range n.SurnameForms() {
				out = append(out, render(pattern, g, i, s))
			}
		}
	}
	return dedupe(out)
}

// Usual is the address a person writes in pattern from the forms they usually go by:
// the given names joined, the first initial, and the surname (the one their culture
// goes by alone, of two).
func (n Name) Usual(pattern string) string {
	surnames := n.SurnameForms()
	s := surnames[0]
	if n.DoubleSurname() && len(surnames) > 1 {
		s = surnames[1]
	}
	return render(pattern, n.GivenForms()[0], n.Initials()[0], s)
}

// written is every local part the name renders to, in any pattern.
func (n Name) written() map[string]bool {
	out := map[string]bool{}
	for _, p := range Patterns {
		for _, l := range n.Renderings(p) {
			out[l] = true
		}
	}
	return out
}

// Person is one member of a company's staff.
type Person struct {
	Name
	// Slug is the profile's slug, unique in the corpus.
	Slug    string
	Current bool // false: they have left the company
	// Plain says the profile writes the name without its diacritics.
	Plain bool
	// FullNameOnly says the profile has a full name but no first and last names.
	FullNameOnly bool
}

// Written is the name as the person's profile writes it.
func (p Person) Written() Name {
	if p.Plain {
		return p.Name.Plain()
	}
	return p.Name
}

// Address is one work address and whom it belongs to.
type Address struct {
	Local   string
	Pattern string
	// Holder is the index in the staff of the person whose mailbox it is, -1 for an
	// address of nobody at the company.
	Holder int
	// Owners are the indexes of everyone whose name renders to it, in any pattern:
	// the current employees among them are those it fits.
	Owners []int
}

// Company is one company of the corpus.
type Company struct {
	Slug, Name, Domain string
	Locale             string // the culture most of its staff come from
	Pattern            string // how it writes its addresses
	Staff              []Person
	Addresses          []Address
}

// Fits are the current employees the address belongs to.
func (c Company) Fits(a Address) []int {
	var out []int
	for _, i := range a.Owners {
		if c.Staff[i].Current {
			out = append(out, i)
		}
	}
	return out
}

// Options size the corpus.
type Options struct {
	Seed      string
	Companies int
	// MinStaff and MaxStaff bound a company's staff; 60 and 130 when 0.
	MinStaff, MaxStaff int
}

// companyPatterns are the patterns the companies write in, by how many of every 40
// do: first.last the most, and joined names often enough to measure them alone.
var companyPatterns = []string{
	"first.last", "firstlast", "flast", "first.last", "firstlast", "f.last", "first_last", "flast", "lastfirst", "first.last",
	"firstlast", "last.first", "first.l", "flast", "first.last", "firstlast", "first_last", "lastf", "flast", "first.last",
	"firstlast", "f.last", "lastfirst", "first.last", "flast", "firstlast", "first_last", "last.first", "first.last", "firstlast",
	"flast", "lastfirst", "first.l", "first.last", "firstlast", "f.last", "flast", "first", "first.last", "firstlast",
}

// Generate makes the corpus: the same options always give the same companies, staff
// and addresses.
func Generate(opt Options) []Company {
	minStaff, maxStaff := opt.MinStaff, opt.MaxStaff
	if minStaff <= 0 {
		minStaff = 60
	}
	if maxStaff < minStaff {
		maxStaff = max(minStaff, 130)
	}
	out := make([]Company, 0, opt.Companies)
	for i := range opt.Companies {
		r := seeded(fmt.Sprintf("%s:company:%d", opt.Seed, i))
		loc := locales[i%len(locales)]
		slug := fmt.Sprintf("corpus-%s-%d", loc.code, i+1)
		c := Company{Slug: slug, Name: fmt.Sprintf("Corpus %s %d", loc.name, i+1), Domain: slug + ".example",
			Locale: loc.code, Pattern: companyPatterns[i%len(companyPatterns)]}
		n := minStaff + r.IntN(maxStaff-minStaff+1)
		for j := range n {
			l := loc
			if r.IntN(10) >= 6 { // four in ten come from elsewhere
				l = locales[r.IntN(len(locales))]
			}
			var name Name
			if j > 0 && r.IntN(100) < 6 {
				// A namesake of someone already there: one given name and the surname in
				// common (Ana Laura Macedo beside Laura Macedo, Kim Ly Trần beside Kim
				// Ly Tô), as families and common names make.
				name = namesake(r, c.Staff[r.IntN(len(c.Staff))].Name)
			} else {
				name = nameFrom(r, l)
			}
			p := Person{Name: name, Current: r.IntN(8) != 0,
				Slug:         fmt.Sprintf("%s-%s-%d", strings.ReplaceAll(fold(name.Full()), " ", "-"), slug, j+1),
				FullNameOnly: r.IntN(5) == 0}
			p.Plain = name.Accented() && r.IntN(4) == 0
			c.Staff = append(c.Staff, p)
		}
		c.Addresses = addresses(r, c)
		out = append(out, c)
	}
	return out
}

// nameFrom draws a name of the culture of locale l.
func nameFrom(r *rand.Rand, l locale) Name {
	n := Name{Locale: l.code, Given: []string{pick(r, l.given)}}
	if r.IntN(100) < l.compoundGiven {
		second := pick(r, l.given)
		for second == n.Given[0] {
			second = pick(r, l.given)
		}
		n.Given = append(n.Given, second)
		n.Hyphenated = l.hyphen
	}
	n.Surnames = []string{pick(r, l.surnames)}
	if r.IntN(100) < l.doubleSurname {
		second := pick(r, l.surnames)
		for second == n.Surnames[0] {
			second = pick(r, l.surnames)
		}
		n.Surnames = append(n.Surnames, second)
	}
	if len(l.particles) > 0 && r.IntN(100) < l.particleShare {
		n.Particle = pick(r, l.particles)
	}
	return n
}

// namesake is a name sharing one given name and the surname with n.
func namesake(r *rand.Rand, n Name) Name {
	loc := localeOf(n.Locale)
	out := n
	out.Given = slices.Clone(n.Given)
	switch {
	case n.Compound():
		// The other given name changes, or goes: Kim Ly beside Kim Tú, Laura beside
		// Ana Laura.
		if r.IntN(2) == 0 {
			out.Given = []string{n.Given[r.IntN(2)]}
		} else {
			out.Given[1] = pick(r, loc.given)
		}
	default:
		out.Given = []string{pick(r, loc.given), n.Given[0]}
		out.Hyphenated = loc.hyphen
		if r.IntN(2) == 0 {
			out.Given[0], out.Given[1] = out.Given[1], out.Given[0]
		}
	}
	if out.Given[0] == out.Given[len(out.Given)-1] && len(out.Given) > 1 {
		out.Given = out.Given[:1]
	}
	return out
}

func localeOf(code string) locale {
	for _, l := range locales {
		if l.code == code {
			return l
		}
	}
	return locales[0]
}

// Locales are the codes of the cultures the corpus draws from.
func Locales() []string {
	out := make([]string, len(locales))
	for i, l := range locales {
		out[i] = l.code
	}
	return out
}

// Draw draws a name of the culture of this code (Locales); "" draws from any.
func Draw(r *rand.Rand, code string) Name {
	if code == "" {
		return nameFrom(r, locales[r.IntN(len(locales))])
	}
	return nameFrom(r, localeOf(code))
}

func pick(r *rand.Rand, from []string) string { return from[r.IntN(len(from))] }

// addresses writes the company's addresses: for about three in four of its people the
// one they have, in the company's pattern from the forms they go by, and one in ten
// more of names nobody there has.
func addresses(r *rand.Rand, c Company) []Address {
	var out []Address
	seen := map[string]int{}
	written := make([]map[string]bool, len(c.Staff))
	for i, p := range c.Staff {
		written[i] = p.Name.written()
	}
	add := func(local string, holder int) {
		if local == "" {
			return
		}
		if _, dup := seen[local]; dup {
			return
		}
		a := Address{Local: local, Pattern: c.Pattern, Holder: holder}
		for i := range c.Staff {
			if written[i][local] {
				a.Owners = append(a.Owners, i)
			}
		}
		if holder >= 0 && !slices.Contains(a.Owners, holder) {
			panic("namecorpus: an address does not render its holder's name: " + local)
		}
		seen[local] = len(out)
		out = append(out, a)
	}
	for i, p := range c.Staff {
		if r.IntN(4) == 0 {
			continue
		}
		add(mailbox(r, p.Name, c.Pattern), i)
	}
	nobody := max(1, len(out)/10)
	for range nobody * 3 {
		if nobody == 0 {
			break
		}
		name := nameFrom(r, localeOf(c.Locale))
		local := mailbox(r, name, c.Pattern)
		if _, dup := seen[local]; dup {
			continue
		}
		taken := false
		for i := range c.Staff {
			taken = taken || written[i][local]
		}
		if taken {
			continue
		}
		add(local, -1)
		nobody--
	}
	return out
}

// mailbox is the address a person has at a company writing in pattern: mostly from
// the forms they usually go by, sometimes from another (a Thái Minh who goes by Minh,
// a García López by both surnames), chosen once.
func mailbox(r *rand.Rand, n Name, pattern string) string {
	usual := func(forms []string) string {
		if len(forms) > 1 && r.IntN(10) < 3 {
			return forms[1+r.IntN(len(forms)-1)]
		}
		return forms[0]
	}
	g, s := usual(n.GivenForms()), n.SurnameForms()[0]
	if n.DoubleSurname() && r.IntN(10) < 7 {
		s = usual(n.SurnameForms()[1:])
	} else if len(n.SurnameForms()) > 1 {
		s = usual(n.SurnameForms())
	}
	return render(pattern, g, n.Initials()[0], s)
}

func seeded(key string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(key))
	return rand.New(rand.NewPCG(h.Sum64(), 0x6e616d6573))
}

// Seeded is a source of randomness for key: the same key always draws the same names.
func Seeded(key string) *rand.Rand { return seeded(key) }
