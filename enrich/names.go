package enrich

import (
	_ "embed"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"
)

// Local-part patterns: the shapes of a work address's local part an email lookup
// recognizes, most specific first. The first that fits a person names the match.
const (
	PatternFirstDotLast   = "first.last"
	PatternFirstUnderLast = "first_last"
	PatternFirstDashLast  = "first-last"
	PatternLastDotFirst   = "last.first"
	PatternFirstLast      = "firstlast"
	PatternLastFirst      = "lastfirst"
	PatternFDotLast       = "f.last"
	PatternFLast          = "flast"
	PatternFirstDotL      = "first.l"
	PatternFirstL         = "firstl"
	PatternLastF          = "lastf"
	PatternFirst          = "first"
	PatternLast           = "last"
)

// nameSet is which names a part of a local part may be: the first name variants, the
// last name variants, or the initial of one of them.
type nameSet int

const (
	firstNames nameSet = iota
	lastNames
	firstInitials
	lastInitials
)

// addressPattern is a local-part pattern: it fits a local part when the part splits, at sep,
// into a name of set left and one of set right (a pattern of one name has no right).
type addressPattern struct {
	name        string
	left, right nameSet
	sep         string
	single      bool
}

// patterns are the local-part patterns, most specific first.
var patterns = []addressPattern{
	{name: PatternFirstDotLast, left: firstNames, sep: ".", right: lastNames},
	{name: PatternFirstUnderLast, left: firstNames, sep: "_", right: lastNames},
	{name: PatternFirstDashLast, left: firstNames, sep: "-", right: lastNames},
	{name: PatternLastDotFirst, left: lastNames, sep: ".", right: firstNames},
	{name: PatternFirstLast, left: firstNames, right: lastNames},
	{name: PatternLastFirst, left: lastNames, right: firstNames},
	{name: PatternFDotLast, left: firstInitials, sep: ".", right: lastNames},
	{name: PatternFLast, left: firstInitials, right: lastNames},
	{name: PatternFirstDotL, left: firstNames, sep: ".", right: lastInitials},
	{name: PatternFirstL, left: firstNames, right: lastInitials},
	{name: PatternLastF, left: lastNames, right: firstInitials},
	{name: PatternFirst, left: firstNames, single: true},
	{name: PatternLast, left: lastNames, single: true},
}

func initial(s string) string {
	for _, r := range s {
		if unicode.IsLetter(r) {
			return string(r)
		}
	}
	return ""
}

// foldTransform takes accents off: decompose, drop the combining marks, recompose.
var foldTransform = sync.Pool{New: func() any {
	return transform.Chain(norm.NFD, runes.Remove(runes.In(unicode.Mn)), norm.NFC)
}}

// letters that do not decompose into a base letter and a mark.
var foldSpecial = strings.NewReplacer("ß", "ss", "æ", "ae", "ø", "o", "œ", "oe", "ł", "l", "đ", "d", "ð", "d", "þ", "th", "ı", "i")

// Fold lower-cases s and takes its accents off: "Zoë Ærøe" -> "zoe aeroe".
func Fold(s string) string {
	t := foldTransform.Get().(transform.Transformer)
	defer foldTransform.Put(t)
	t.Reset()
	out, _, err := transform.String(t, strings.ToLower(s))
	if err != nil {
		out = strings.ToLower(s)
	}
	return foldSpecial.Replace(out)
}

// germanTransliteration spells umlauts the way German addresses do: Müller -> mueller.
var germanTransliteration = strings.NewReplacer("ä", "ae", "ö", "oe", "ü", "ue", "Ä", "ae", "Ö", "oe", "Ü", "ue")

// foldings are the ways a name may be spelled in an address: accents dropped, and
// umlauts transliterated when it has any.
func foldings(s string) []string {
	out := []string{Fold(s)}
	if t := germanTransliteration.Replace(s); t != s {
		out = append(out, Fold(t))
	}
	return out
}

var apostrophes = strings.NewReplacer("'", "", "’", "", "`", "")

// nameWords splits a folded name into words of letters: apostrophes join ("o'brien"
// -> "obrien"), anything else separates.
func nameWords(folded string) []string {
	folded = apostrophes.Replace(folded)
	return strings.FieldsFunc(folded, func(r rune) bool { return !unicode.IsLetter(r) })
}

//go:embed data/nicknames.txt
var nicknamesData string

// nicknameGroups maps a folded first name to the groups (lines of nicknames.txt) it
// is on; two names are the same first name when they share a group.
var nicknameGroups = sync.OnceValue(func() map[string][]int {
	groups := map[string][]int{}
	n := 0
	for _, line := range strings.Split(nicknamesData, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		formal, short, _ := strings.Cut(line, ":")
		for _, name := range append([]string{formal}, strings.Fields(short)...) {
			name = Fold(strings.TrimSpace(name))
			if name != "" {
				groups[name] = append(groups[name], n)
			}
		}
		n++
	}
	return groups
})

// nicknameFormal is the formal name of each group: the name before the colon.
var nicknameFormal = sync.OnceValue(func() map[int]string {
	out := map[int]string{}
	n := 0
	for _, line := range strings.Split(nicknamesData, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		formal, _, _ := strings.Cut(line, ":")
		out[n] = Fold(strings.TrimSpace(formal))
		n++
	}
	return out
})

// formalNames are the formal names a folded first name is short for (bob: robert).
func formalNames(name string) []string {
	var out []string
	for _, g := range nicknameGroups()[name] {
		if f := nicknameFormal()[g]; f != name {
			out = append(out, f)
		}
	}
	return out
}

// nicknameNames lists every name on a group, by group.
var nicknameNames = sync.OnceValue(func() map[int][]string {
	out := map[int][]string{}
	for name, gs := range nicknameGroups() {
		for _, g := range gs {
			out[g] = append(out[g], name)
		}
	}
	return out
})

// SameFirstName reports whether two first names stand for the same person's: equal
// once folded, or a formal name and one of its nicknames (bob and robert), or two
// nicknames of one name.
func SameFirstName(a, b string) bool {
	a, b = Fold(a), Fold(b)
	if a == b {
		return true
	}
	for _, ga := range nicknameGroups()[a] {
		for _, gb := range nicknameGroups()[b] {
			if ga == gb {
				return true
			}
		}
	}
	return false
}

// equivalents returns name and every name that is the same first name.
func equivalents(name string) []string {
	out := []string{name}
	for _, g := range nicknameGroups()[name] {
		out = append(out, nicknameNames()[g]...)
	}
	return dedupe(out)
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	out := in[:0]
	for _, s := range in {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// lastNameParticles are the small words of two-part last names that an address
// rarely carries on their own.
var lastNameParticles = map[string]bool{
	"van": true, "von": true, "der": true, "den": true, "de": true, "del": true, "della": true, "di": true,
	"da": true, "du": true, "la": true, "le": true, "dos": true, "das": true, "do": true, "ten": true, "ter": true,
	"al": true, "el": true, "bin": true, "ibn": true, "st": true,
}

var honorifics = map[string]bool{"mr": true, "mrs": true, "ms": true, "miss": true, "dr": true, "prof": true, "sir": true, "dame": true}

var nameSuffixes = map[string]bool{"jr": true, "sr": true, "ii": true, "iii": true, "iv": true, "phd": true, "md": true, "mba": true, "esq": true, "cpa": true}

// PersonName is a person's name as the pattern engine reads it.
type PersonName struct {
	First, Last string
	// guessed says only the first word of First is known to be a given name: a
	// reading of a full name that puts more words before the surname, which may be
	// surnames as well. Those words count as given names written whole, but an
	// initial stands only for the first (Laia Pujol Puigdemont, read Laia Pujol /
	// Puigdemont, is laia.puigdemont and laiapujol.puigdemont, never ppuigdemont).
	guessed bool
}

// NameOf returns the first reading of a person's name (NamesOf): first_name and
// last_name when both are set, else the first word of the full name and the rest.
func NameOf(p *Person) PersonName {
	if names := NamesOf(p); len(names) > 0 {
		return names[0]
	}
	return PersonName{}
}

// NamesOf returns the readings of a person's name: the ways its words may split into
// given names and surname. first_name and last_name, when both are set, are one; a
// full name is read every way it splits (Kim Ly Trần as Kim / Ly Trần and as Kim Ly /
// Trần; María García López as María / García López and as María García / López),
// when it is all the record has, or when it holds words that neither first_name nor
// last_name does (a middle name a vendor keeps apart: then first_name, the middle name
// and last_name are a reading too, the middle name a given name). Where the split is
// not known, no reading is preferred: a person fits an address when any reading does,
// so nobody is ruled out by a guess at where the given names end; and an initial
// stands only for a word known to be a given name (PersonName.guessed).
func NamesOf(p *Person) []PersonName {
	return nameReadings(deref(p.FirstName), deref(p.LastName), deref(p.FullName))
}

// leniently returns the readings with every word before the surname a given name
// of its own, its initial included: what a person may be, for listing and counting
// them, where NamesOf's readings say what they are sure to be.
func leniently(names []PersonName) []PersonName {
	out := make([]PersonName, len(names))
	for i, n := range names {
		n.guessed = false
		out[i] = n
	}
	return out
}

// readingWords bounds the readings of a long full name: a split leaves at most this
// many words on one side, so a name of many words has a few readings, not one a word.
const readingWords = 4

func nameReadings(first, last, full string) []PersonName {
	first, last = strings.TrimSpace(first), strings.TrimSpace(last)
	var out []PersonName
	known := first != "" && last != ""
	if known {
		out = append(out, PersonName{First: first, Last: last})
	}
	words := fullNameWords(full)
	if known && !holdsOtherWords(words, first, last) {
		return out
	}
	if len(words) < 2 {
		if !known && (first != "" || last != "" || len(words) == 1) {
			n := PersonName{First: first, Last: last}
			if n.First == "" && len(words) == 1 {
				n.First = words[0]
			}
			out = append(out, n)
		}
		return out
	}
	if known {
		if middle, ok := between(words, first, last); ok {
			out = append(out, PersonName{First: first + " " + middle, Last: last})
		}
	}
	for i := 1; i < len(words); i++ {
		if i > readingWords && len(words)-i > readingWords {
			continue
		}
		out = append(out, PersonName{First: strings.Join(words[:i], " "), Last: strings.Join(words[i:], " "), guessed: i > 1})
	}
	return out
}

// between returns the words of a full name between its first and last names, when it
// is the first name, those words and the last name (a vendor's middle name put back).
func between(words []string, first, last string) (string, bool) {
	fw, lw := nameWords(Fold(first)), nameWords(Fold(last))
	var folded []string
	for _, w := range words {
		folded = append(folded, strings.Join(nameWords(Fold(w)), ""))
	}
	n := len(strings.Fields(first))
	m := len(strings.Fields(last))
	if n+m >= len(words) || strings.Join(folded[:n], "") != strings.Join(fw, "") ||
		strings.Join(folded[len(words)-m:], "") != strings.Join(lw, "") {
		return "", false
	}
	return strings.Join(words[n:len(words)-m], " "), true
}

// fullNameWords are the words of a full name without its honorifics ("Dr.") and
// suffixes ("Jr.", ", PhD").
func fullNameWords(full string) []string {
	full, _, _ = strings.Cut(full, ",")
	words := strings.Fields(full)
	for len(words) > 0 && honorifics[strings.Trim(Fold(words[0]), ".")] {
		words = words[1:]
	}
	for len(words) > 1 && nameSuffixes[strings.Trim(Fold(words[len(words)-1]), ".")] {
		words = words[:len(words)-1]
	}
	return words
}

// holdsOtherWords reports whether the full name has a name word that neither first
// nor last has.
func holdsOtherWords(words []string, first, last string) bool {
	known := map[string]bool{}
	for _, s := range []string{first, last} {
		for _, w := range nameWords(Fold(s)) {
			known[w] = true
		}
	}
	for _, word := range words {
		for _, w := range nameWords(Fold(word)) {
			if !known[w] {
				return true
			}
		}
	}
	return false
}

// SplitFullName reads "Dr. Jane van der Berg, PhD" as Jane / van der Berg: the first
// word and the rest, one of the readings NamesOf gives.
func SplitFullName(full string) PersonName {
	words := fullNameWords(full)
	switch len(words) {
	case 0:
		return PersonName{}
	case 1:
		return PersonName{First: words[0]}
	}
	return PersonName{First: words[0], Last: strings.Join(words[1:], " ")}
}

// variants are the spellings an address may use for a person's first and last names.
type variants struct {
	firsts, lasts []string
	// initials are the first letters of the first name as the person has it (each
	// word of it) and of the formal name it is short for (Bob: b and r), never of
	// another nickname: Margaret's initial is m, not the g of Greta.
	initials []string
}

func (n PersonName) variants() variants {
	var v variants
	for _, f := range foldings(n.First) {
		words := nameWords(f)
		if len(words) == 0 {
			continue
		}
		v.firsts = append(v.firsts, strings.Join(words, ""), strings.Join(words, "-"))
		for i, w := range words {
			v.firsts = append(v.firsts, equivalents(w)...)
			if i > 0 && n.guessed {
				continue // a given name only in this reading: no initial of its own
			}
			v.initials = append(v.initials, initial(w))
			for _, formal := range formalNames(w) {
				v.initials = append(v.initials, initial(formal))
			}
		}
	}
	for _, l := range foldings(n.Last) {
		words := nameWords(l)
		if len(words) == 0 {
			continue
		}
		v.lasts = append(v.lasts, strings.Join(words, ""), strings.Join(words, "-"))
		var main []string
		for _, w := range words {
			if !lastNameParticles[w] {
				main = append(main, w)
			}
		}
		// A hyphenated or two-part last name may appear as any of its parts, and a
		// part with the particles before it: dos Loureiro Rebelo is dosloureiro too.
		if len(main) > 0 && len(main) < len(words) {
			v.lasts = append(v.lasts, strings.Join(main, ""))
		}
		if len(main) > 1 {
			v.lasts = append(v.lasts, main...)
			run := 0
			for i, w := range words {
				if lastNameParticles[w] {
					run++
					continue
				}
				if run > 0 {
					v.lasts = append(v.lasts, strings.Join(words[i-run:i+1], ""))
				}
				run = 0
			}
		}
	}
	v.firsts, v.lasts = dedupe(v.firsts), dedupe(v.lasts)
	return v
}

// CleanLocalPart is the local part as patterns are matched against it: the +tag and
// digits removed, case and accents folded, only letters and the separators . _ -
// kept ("J.Smith2+news" -> "j.smith").
func CleanLocalPart(local string) string {
	if i := strings.IndexByte(local, '+'); i >= 0 {
		local = local[:i]
	}
	local = strings.Trim(local, `"`)
	var b strings.Builder
	for _, r := range Fold(local) {
		switch {
		case unicode.IsLetter(r), r == '.', r == '_', r == '-':
			b.WriteRune(r)
		}
	}
	return strings.Trim(b.String(), "._-")
}

// MatchPattern says which local-part pattern fits the person named n: "" when none
// does. local is the local part as sent; it is cleaned with CleanLocalPart. Nicknames
// count as the first name (bob.smith fits Robert Smith), and a hyphenated or
// two-part last name may appear whole or as any of its parts. A local part longer than
// MaxLocalPart fits none.
//
// It takes time linear in the length of the name: the name's variants are put in sets
// once, and each pattern tries every split of the (bounded) local part against them,
// so no pair of variants is ever built.
func MatchPattern(n PersonName, local string) string {
	if len(local) > MaxLocalPart {
		return ""
	}
	clean := CleanLocalPart(local)
	if clean == "" {
		return ""
	}
	v := n.variants()
	sets := [4]map[string]bool{firstNames: {}, lastNames: {}, firstInitials: {}, lastInitials: {}}
	for _, f := range v.firsts {
		sets[firstNames][f] = true
	}
	for _, i := range v.initials {
		sets[firstInitials][i] = true
	}
	for _, l := range v.lasts {
		sets[lastNames][l] = true
		sets[lastInitials][initial(l)] = true
	}
	// A last name is compared without the separators the address may put inside it:
	// berners.lee, berners_lee, mc-carthy and o.brien are the joined name.
	in := func(set nameSet, s string) bool {
		if sets[set][s] {
			return true
		}
		return set == lastNames && strings.ContainsAny(s, "._-") && sets[set][stripSeparators(s)]
	}
	for _, p := range patterns {
		if p.single {
			if in(p.left, clean) {
				return p.name
			}
			continue
		}
		for i := 0; i+len(p.sep) <= len(clean); i++ {
			if clean[i:i+len(p.sep)] == p.sep && in(p.left, clean[:i]) && in(p.right, clean[i+len(p.sep):]) {
				return p.name
			}
		}
	}
	return ""
}

// MatchNames says which pattern the local part fits any of the readings of a name in
// (NamesOf), the most specific of them; "" when it fits none.
func MatchNames(names []PersonName, local string) string {
	best := len(patterns)
	for _, n := range names {
		p := MatchPattern(n, local)
		if p == "" {
			continue
		}
		if i := slices.IndexFunc(patterns, func(q addressPattern) bool { return q.name == p }); i < best {
			best = i
		}
	}
	if best == len(patterns) {
		return ""
	}
	return patterns[best].name
}

// LocalPartNames lists the names a staff search asks for: the plausible names the
// local part describes, never fragments. A local part with separators gives each
// piece of two letters or more (an initial alone is not searched) and the surname its
// particle pieces join into (mc.carthy: mccarthy; o.brien: obrien). One without separators gives the
// whole; the whole without its first letter or its last, when three letters or more
// are left (flast, lastf, firstl: rjones gives jones); and, where a known given name
// begins or ends it (givennames.txt, nicknames.txt), that name and the rest
// (dennismccarthy: dennis, mccarthy). Each name comes with the names that are the
// same first name, and a surname with its particles left out (vanderberg: berg). A
// local part longer than MaxLocalPart stands for none.
func LocalPartNames(local string) []string {
	// The words the address spells come first and the other names of the same first
	// name after them all: a source that can ask for only so many (a length limit, a
	// bound on patterns) leaves out a nickname before a surname.
	spelled, others := localPartForms(local)
	return dedupe(append(spelled, others...))
}

func localPartForms(local string) (spelled, others []string) {
	words := localPartWords(local)
	for _, w := range words {
		spelled = append(spelled, w)
		if s := withoutParticles(w); s != w {
			spelled = append(spelled, s)
		}
		others = append(others, equivalents(w)[1:]...)
	}
	return spelled, others
}

// localPartWords are the name words a local part spells (see LocalPartNames).
func localPartWords(local string) []string {
	if len(local) > MaxLocalPart {
		return nil
	}
	clean := CleanLocalPart(local)
	parts := strings.FieldsFunc(clean, func(r rune) bool { return r == '.' || r == '_' || r == '-' })
	var words []string
	add := func(w string, least int) {
		if utf8.RuneCountInString(w) >= least && !searchParticles[w] {
			words = append(words, w)
		}
	}
	if len(parts) > 1 {
		for i, p := range parts {
			add(p, 2)
			// Particles written apart belong to the name after them, joined once from
			// the start of their run: van.der.berg is vanderberg, o.brien obrien.
			if i > 0 && joinsNext(parts[i-1]) {
				continue
			}
			j := i
			for j+1 < len(parts) && joinsNext(parts[j]) {
				j++
			}
			if j > i {
				add(strings.Join(parts[i:j+1], ""), 2)
			}
		}
	} else if len(parts) == 1 {
		w := parts[0]
		add(w, 2)
		_, first := utf8.DecodeRuneInString(w)
		_, last := utf8.DecodeLastRuneInString(w)
		add(w[first:], 3)
		add(w[:len(w)-last], 3)
		// A given name joined to a surname, either way round.
		for i := range w {
			if i == 0 {
				continue
			}
			head, tail := w[:i], w[i:]
			if utf8.RuneCountInString(head) < 2 || utf8.RuneCountInString(tail) < 2 {
				continue
			}
			if isGivenName(head) || isGivenName(tail) {
				add(head, 2)
				add(tail, 2)
			}
		}
	}
	return words
}

// LocalPartSplits lists every split of the local part's names into two of two letters
// or more, whatever list holds them or not: a given name and a surname joined
// (annalopez: an|nalopez, ann|alopez, anna|lopez, annal|opez, ...), in each piece of
// a local part with separators (kimly.tran: ki|mly, kim|ly). A source that matches
// names whole asks for both sides of each (a local part of n letters has n-3 such
// splits), so a joined address is searched for without a list of given names; a
// source that matches any text of a profile does not, as a fragment of two letters
// would list most of a company. A local part longer than MaxLocalPart has none.
func LocalPartSplits(local string) [][2]string {
	if len(local) > MaxLocalPart {
		return nil
	}
	var out [][2]string
	for _, piece := range strings.FieldsFunc(CleanLocalPart(local), func(r rune) bool { return r == '.' || r == '_' || r == '-' }) {
		for i := range piece {
			head, tail := piece[:i], piece[i:]
			if utf8.RuneCountInString(head) < 2 || utf8.RuneCountInString(tail) < 2 {
				continue
			}
			out = append(out, [2]string{head, tail})
		}
	}
	return out
}

// searchParticles are the particles a surname may be joined with in an address, which
// a staff search never asks for alone: too short, or too common, to name anyone.
var searchParticles = func() map[string]bool {
	m := map[string]bool{"mc": true}
	for p := range lastNameParticles {
		m[p] = true
	}
	return m
}()

// prefixParticles are the particles withoutParticles takes off a joined surname: those
// of three letters or more, and mc; the longest first, so the same surname always loses
// the same ones (dellarosa -> rosa, never larosa).
var prefixParticles = func() []string {
	var out []string
	for p := range searchParticles {
		if len(p) >= 3 || p == "mc" {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	return out
}()

// joinsNext says a piece of a local part written apart is a particle of the surname
// after it: a particle, or the O' or D' of O'Brien and D'Angelo, whose apostrophe an
// address cannot carry.
func joinsNext(piece string) bool {
	return searchParticles[piece] || piece == "o" || piece == "d"
}

// withoutParticles takes the particles of three letters or more (and mc) off the front
// of a joined surname, as long as four letters are left: vanderberg -> berg, mccarthy
// -> carthy. A given name is left alone, and so is one that begins the word (dennis
// and dennismccarthy are not den nis...).
func withoutParticles(w string) string {
	if isGivenName(w) {
		return w
	}
	for {
		cut := false
		for _, p := range prefixParticles {
			if strings.HasPrefix(w, p) && utf8.RuneCountInString(w[len(p):]) >= 4 && !givenNameBegins(w, len(p)) {
				w, cut = w[len(p):], true
				break
			}
		}
		if !cut {
			return w
		}
	}
}

// givenNameBegins reports whether a given name longer than n bytes begins w.
func givenNameBegins(w string, n int) bool {
	for i := range w {
		if i > n && isGivenName(w[:i]) {
			return true
		}
	}
	return false
}

//go:embed data/givennames.txt
var givenNamesData string

// givenNames are the given names a joined local part is split at: those of
// givennames.txt and every name of nicknames.txt.
var givenNames = sync.OnceValue(func() map[string]bool {
	set := map[string]bool{}
	for _, line := range strings.Split(givenNamesData, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		for _, w := range strings.Fields(line) {
			set[Fold(w)] = true
		}
	}
	for name := range nicknameGroups() {
		set[name] = true
	}
	return set
})

func isGivenName(s string) bool { return givenNames()[s] }

func stripSeparators(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '.' || r == '_' || r == '-' {
			return -1
		}
		return r
	}, s)
}
