package source

import (
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"enrichd/enrich"

	"github.com/matryer/is"
)

func sp(s string) *string { return &s }

// A middle name PDL keeps apart is put back in the full name, where a name's readings
// find it: Kim Ly Trần is first_name kim, middle_name ly.
func TestPDLMiddleNameIsInTheFullName(t *testing.T) {
	is := is.New(t)
	is.Equal(*pdlFullName(sp("kim trần"), sp("kim"), sp("ly"), sp("trần")), "kim ly trần")
	is.Equal(*pdlFullName(sp("kim ly trần"), sp("kim"), sp("ly"), sp("trần")), "kim ly trần") // there already
	is.Equal(*pdlFullName(sp("sean thorne"), sp("sean"), nil, sp("thorne")), "sean thorne")
	is.True(pdlFullName(nil, nil, nil, nil) == nil)
}

// The shapes a local part is asked for in: each of its readings as a full name with a
// wildcard for every letter a diacritic may sit on, the first letter written out with
// each diacritic it may carry while they all fit, and neighbouring splits of a long
// joined local part sharing one, so that every reading is asked in one query.
func TestPDLShapes(t *testing.T) {
	is := is.New(t)
	lists := func(shapes []string, name string) bool {
		return slices.ContainsFunc(shapes, func(s string) bool { return wildcardMatches(s, name) })
	}
	shapes, fit := pdlShapes("jose.nunez", pdlMaxWildcards)
	is.True(fit)
	is.Equal(shapes[0], "j???* *?????*")              // j carries no diacritic: one shape
	is.True(slices.Contains(shapes, "n????* *j???*")) // last.first
	is.True(slices.Contains(shapes, "ñ????* *j???*")) // its first letter with a diacritic
	for _, name := range []string{"josé núñez", "jose nunez", "josé núñez garcía", "josé garcía núñez", "núñez josé", "josé-luis núñez"} {
		is.True(lists(shapes, name))
	}
	is.True(!lists(shapes, "pepe núñez")) // another first name

	shapes, _ = pdlShapes("k.bernerslee", pdlMaxWildcards)
	is.Equal(shapes, []string{"k* *b?????????*"}) // an initial goes first: one order
	is.True(lists(shapes, "ken berners-lee"))

	shapes, fit = pdlShapes("jnunez", pdlMaxWildcards)
	is.True(fit)
	is.True(lists(shapes, "josé núñez")) // flast
	is.True(lists(shapes, "jo nuñez"))   // firstlast, a name of two letters
	is.True(lists(shapes, "nuño jez"))   // lastfirst

	// Every split of a long joined local part, in either order, within one query.
	for _, local := range []string{"aitanasaezgarcia", "oluwaseunadeyemiokonkwo", strings.Repeat("ab", 32)} {
		shapes, fit = pdlShapes(local, pdlMaxWildcards)
		is.True(fit)
		is.True(len(shapes) <= pdlMaxWildcards)
	}
	shapes, _ = pdlShapes("aitanasaezgarcia", pdlMaxWildcards)
	for _, name := range []string{"aitana sáez garcía", "aitana sáez-garcía", "garcía aitana sáez", "aitanasáez garcía"} {
		if !lists(shapes, name) {
			t.Errorf("aitanasaezgarcia's shapes %q do not list %s", shapes, name)
		}
	}
	// A letter no diacritic sits on may follow a word boundary the address drops.
	shapes, _ = pdlShapes("hmedeirossiqueira", pdlMaxWildcards)
	is.True(lists(shapes, "heloísa medeiros siqueira"))
	shapes, _ = pdlShapes(strings.Repeat("a", enrich.MaxLocalPart+1), pdlMaxWildcards)
	is.Equal(len(shapes), 0)
}

// A second given name, which PDL keeps in middle_name or after a hyphen in first_name,
// is asked for with the surname: xochitl.ordonez lists Citlali Xóchitl Ordóñez.
func TestPDLOtherGivenNames(t *testing.T) {
	is := is.New(t)
	is.Equal(pdlOtherGiven("xochitl.ordonez"), []pdlGiven{{middle: "*x??*h???*", last: "*???????*"}, {middle: "*???????*", last: "*x??*h???*"}})
	is.True(wildcardMatches("*x??*h???*", "xóchitl"))
	// An initial: a given name beginning with a, or á, asked by its middle_initial.
	is.Equal(pdlOtherGiven("a.saez"), []pdlGiven{{middle: "?*", last: "*????*", initial: 'a'}})
	is.True(wildcardMatches("?*", "álvaro"))
	is.Equal(pdlOtherGiven("loncarv"), []pdlGiven{{middle: "?*", initial: 'l'}, {middle: "*v*", surnameInitial: 'l', rest: "oncarv"}}) // written first, or last
	clauses, fit := pdlNameClauses("aitanasaezgarcia")
	is.True(fit)
	raw, _ := json.Marshal(clauses)
	is.True(strings.Count(string(raw), `"wildcard"`) <= pdlMaxWildcards)
}

// A second given name known by its initial alone is asked by PDL's middle_initial,
// every form of the letter a term, not by a wildcard that stands for any letter a
// diacritic may sit on (?*, every middle name there is); and one written after the
// surname comes with the surname's first letter (last_initial, or a later word of a
// surname of several), so a joined address does not list, and pay for, everyone at
// the company with a middle name.
func TestPDLSecondGivenNamesAskedByTheirInitials(t *testing.T) {
	is := is.New(t)
	clauses, fit := pdlNameClauses("eloncar")
	is.True(fit)
	raw, _ := json.Marshal(clauses)
	var forms []string
	for _, r := range pdlInitials('e') {
		forms = append(forms, string(r))
	}
	want, _ := json.Marshal(map[string]any{"terms": map[string]any{"middle_initial": forms}})
	is.True(strings.Contains(string(raw), string(want)))
	is.True(!strings.Contains(string(raw), `"middle_name":"?*"`))
	written := map[string]any{"bool": map[string]any{"should": []any{
		map[string]any{"wildcard": map[string]any{"middle_name": "*?*"}},
		map[string]any{"wildcard": map[string]any{"first_name": "*-?*"}}}}}
	for _, c := range clauses {
		is.True(!reflect.DeepEqual(c, written)) // never alone
	}
	is.True(strings.Contains(string(raw), `"last_initial"`))
	// Or it follows a first given name in the address, and begins with one of its
	// letters: Thái Minh Nguyễn's thaiminhnguyen.
	is.Equal(strings.Count(string(raw), `"middle_initial"`), 2)
	var afterFirst []string
	for _, terms := range regexp.MustCompile(`"middle_initial":\[[^\]]*\]`).FindAllString(string(raw), -1) {
		if strings.Contains(terms, `"ñ"`) { // a form of n, a letter of the address
			afterFirst = append(afterFirst, terms)
		}
	}
	is.Equal(len(afterFirst), 1)
}

// wildcardMatches evaluates a pattern as PDL's wildcard query does: ? one character,
// * any run of them.
func wildcardMatches(pattern, s string) bool {
	re := "^" + strings.ReplaceAll(strings.ReplaceAll(regexp.QuoteMeta(pattern), `\*`, ".*"), `\?`, ".") + "$"
	return regexp.MustCompile(re).MatchString(s)
}
