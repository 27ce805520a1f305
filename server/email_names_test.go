package server_test

import (
	"encoding/json"
	"testing"

	"enrichd/server/servertest"

	"github.com/matryer/is"
)

// Names of cultures enrichd's lists do not hold, through the real handler: on the
// dataset, and on PDL answering in its published shapes (first_name, middle_name,
// last_name and full_name, the first and last names with a space; lower case, the
// diacritics kept).

// globexJSONL is Globex in the dataset, and people at it: name is a first and a last
// name, or a full name alone when last is "".
func globexJSONL(t *testing.T, people ...[3]string) []string {
	t.Helper()
	lines := []string{`{"type":"company","name":"Globex","domain":"globex.com","network_url":"https://www.linkedin.com/company/globex"}`}
	for _, p := range people {
		slug, first, last := p[0], p[1], p[2]
		rec := map[string]any{"type": "person", "network_url": "https://www.linkedin.com/in/" + slug,
			"positions": []any{map[string]any{"title": "Engineer", "company_name": "Globex",
				"company_network_url": "https://www.linkedin.com/company/globex", "is_current": true}}}
		if last == "" {
			rec["full_name"] = first
		} else {
			rec["first_name"], rec["last_name"], rec["full_name"] = first, last, first+" "+last
		}
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b))
	}
	return lines
}

// pdlName is a person at Globex as PDL writes them: given names split into first_name
// and middle_name, full_name the first and last names alone.
type pdlName struct{ slug, first, middle, last string }

func pdlNamed(slug, first, middle, last string) pdlName { return pdlName{slug, first, middle, last} }

// newNamedPDL is a fake PDL with these people at Globex.
func newNamedPDL(t *testing.T, people ...pdlName) *fakePDL {
	var staff []elPerson
	for _, p := range people {
		staff = append(staff, elPerson{p.slug, p.first, p.last})
	}
	f := newFakePDL(t, staff...)
	for _, p := range people {
		f.middle[p.slug] = p.middle
	}
	return f
}

// outcome is a settled email lookup as "the person's network URL", or "code n" for a
// failure (n the candidates of an ambiguous one).
func outcome(r *servertest.Response) string {
	if r.Str("task.status") == "succeeded" {
		return r.Str("data.network_url")
	}
	if r.Has("error.candidates") {
		b, _ := json.Marshal(r.Get("error.candidates"))
		return r.Str("error.code") + " " + string(b)
	}
	return r.Str("error.code")
}

const in = "https://www.linkedin.com/in/"

// Kim Ly Trần and Kim Ly Tô both work at Globex, first name Kim Ly. kimlyt@ fits both
// (first name, initial of the last): ambiguous, whether or not ktran@ was answered
// Kim Ly Trần before, and charged nothing. It was answered Kim Ly Trần, inferred and
// charged, once she was held: the search showed Tô as "Kim Ly Tô", read as Kim / Ly
// Tô, which kimlyt does not fit, and dropped her unretrieved.
func TestKimlytIsAmbiguousWhoeverIsHeld(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"dataset", "pdl"} {
		t.Run(src, func(t *testing.T) {
			for _, fresh := range []bool{false, true} {
				is := is.New(t)
				var e *servertest.Env
				if src == "dataset" {
					e = servertest.NewEnv(t)
					e.ImportJSONL(globexJSONL(t, [3]string{"kim-ly-tran", "Kim Ly", "Trần"}, [3]string{"kim-ly-to", "Kim Ly", "Tô"})...)
				} else {
					e = servertest.NewEnv(t, withPDL(t, newNamedPDL(t, pdlNamed("kim-ly-tran", "kim", "ly", "trần"), pdlNamed("kim-ly-to", "kim", "ly", "tô"))))
				}
				e.StartWorkers()
				if !fresh {
					_, ktran := e.EmailLookup("ktran@globex.com")
					is.Equal(outcome(ktran), in+"kim-ly-tran")
				}
				start := e.Balance("acme").Balance
				_, kimlyt := e.EmailLookup("kimlyt@globex.com")
				is.Equal(outcome(kimlyt), "ambiguous 2")
				is.Equal(e.Balance("acme").Balance, start) // refunded
			}
		})
	}
}

// Laura Macedo and Ana Laura Macedo both work at Globex: lmacedo@ fits both (the
// initial of either of Ana Laura's given names), in any order of the lookups. It was
// Laura Macedo on a fresh store and ambiguous once Ana Laura was held.
func TestLmacedoIsTheSameAnswerInAnyOrder(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"dataset", "pdl"} {
		t.Run(src, func(t *testing.T) {
			for _, order := range [][]string{{"lmacedo", "amacedo", "lmacedo"}, {"amacedo", "lmacedo", "laura.macedo"}} {
				is := is.New(t)
				var e *servertest.Env
				if src == "dataset" {
					e = servertest.NewEnv(t)
					e.ImportJSONL(globexJSONL(t, [3]string{"laura-macedo", "Laura", "Macedo"}, [3]string{"ana-laura-macedo", "Ana Laura", "Macedo"})...)
				} else {
					e = servertest.NewEnv(t, withPDL(t, newNamedPDL(t, pdlNamed("laura-macedo", "laura", "", "macedo"), pdlNamed("ana-laura-macedo", "ana", "laura", "macedo"))))
				}
				e.StartWorkers()
				want := map[string]string{"lmacedo": "ambiguous 2", "amacedo": in + "ana-laura-macedo", "laura.macedo": "ambiguous 2"}
				for _, local := range order {
					_, done := e.EmailLookup(local + "@globex.com")
					is.Equal(outcome(done), want[local])
				}
			}
		})
	}
}

// Joined addresses of names no list holds are found, by every split of the local part:
// firstlast, lastfirst, and a second given name or the surname's particle joined in.
func TestJoinedAddressesNeedNoNameList(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"oluwaseunadeyemi":     "oluwaseun-adeyemi",
		"adeyemioluwaseun":     "oluwaseun-adeyemi",
		"oadeyemi":             "oluwaseun-adeyemi",
		"thaiminhnguyen":       "thai-minh-nguyen",
		"minhnguyen":           "thai-minh-nguyen",
		"gwenaelledossantos":   "gwenaelle-dos-santos",
		"gwenaelle_dossantos":  "gwenaelle-dos-santos",
		"santosgwenaelle":      "gwenaelle-dos-santos",
		"przemyslawwisniewski": "przemyslaw-wisniewski",
	}
	for _, src := range []string{"dataset", "pdl"} {
		t.Run(src, func(t *testing.T) {
			is := is.New(t)
			var e *servertest.Env
			if src == "dataset" {
				e = servertest.NewEnv(t)
				e.ImportJSONL(globexJSONL(t, [3]string{"oluwaseun-adeyemi", "Oluwaseun", "Adeyemi"}, [3]string{"thai-minh-nguyen", "Thái Minh", "Nguyễn"},
					[3]string{"gwenaelle-dos-santos", "Gwenaëlle", "dos Santos"}, [3]string{"przemyslaw-wisniewski", "Przemysław", "Wiśniewski"})...)
			} else {
				e = servertest.NewEnv(t, withPDL(t, newNamedPDL(t, pdlNamed("oluwaseun-adeyemi", "oluwaseun", "", "adeyemi"), pdlNamed("thai-minh-nguyen", "thái", "minh", "nguyễn"),
					pdlNamed("gwenaelle-dos-santos", "gwenaëlle", "", "dos santos"), pdlNamed("przemyslaw-wisniewski", "przemysław", "", "wiśniewski"))))
			}
			e.Key, _ = e.NewOrg("names", 1000)
			e.StartWorkers()
			for local, slug := range cases {
				_, done := e.EmailLookup(local + "@globex.com")
				is.Equal(local+": "+outcome(done), local+": "+in+slug)
			}
		})
	}
}

// A record with only a full name is read every way it splits: a Spanish or Portuguese
// name by either surname and both, a particle with the surname after it, a compound
// given name by either. Only its last word was a surname before. An initial stands
// only for a word known to be a given name.
func TestAFullNameAloneIsReadEveryWay(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.ImportJSONL(globexJSONL(t, [3]string{"maria-garcia-lopez", "María García López", ""}, [3]string{"joao-dos-santos-silva", "João dos Santos Silva", ""},
		[3]string{"ana-julia-ferraz", "Ana Júlia Ferraz", ""}, [3]string{"laia-pujol-puigdemont", "Laia Pujol Puigdemont", ""},
		[3]string{"rosa-puigdemont", "Rosa", "Puigdemont"}, [3]string{"laia-roser-puigdemont", "Laia Roser Puigdemont", ""})...)
	e.StartWorkers()
	// Pujol and Roser may be given names or first surnames: an initial of theirs makes
	// a possible fit, counted but never answered alone.
	for local, want := range map[string]string{"ppuigdemont": "not_found", "rpuigdemont": "ambiguous 2"} {
		_, done := e.EmailLookup(local + "@globex.com")
		is.Equal(local+": "+outcome(done), local+": "+want)
	}
	for local, slug := range map[string]string{
		"maria.garcia": "maria-garcia-lopez", "mgarcia": "maria-garcia-lopez", "maria.lopez": "maria-garcia-lopez", "mariagarcialopez": "maria-garcia-lopez",
		"joao.santos": "joao-dos-santos-silva", "joao.dossantos": "joao-dos-santos-silva", "jsilva": "joao-dos-santos-silva",
		"julia.ferraz": "ana-julia-ferraz", "anajulia.ferraz": "ana-julia-ferraz", "aferraz": "ana-julia-ferraz",
	} {
		_, done := e.EmailLookup(local + "@globex.com")
		is.Equal(local+": "+outcome(done), local+": "+in+slug)
	}
}

// PDL keeps a name's diacritics (it lower-cases its data and searches it as the query
// writes it), so josé núñez is no term "jose" or "nunez": the search asks both forms.
// A namesake pair where only the plain one would be listed is never answered alone,
// and the one written with diacritics is found alone.
func TestPDLIsAskedForNamesWithTheirDiacritics(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pdl := newNamedPDL(t, pdlNamed("jose-nunez", "jose", "", "nunez"), pdlNamed("jose-nunez-2", "josé", "", "núñez"),
		pdlNamed("lukasz-krol", "łukasz", "", "król"), pdlNamed("ozlem-sahin", "özlem", "", "şahin"))
	e := servertest.NewEnv(t, withPDL(t, pdl))
	e.StartWorkers()
	start := e.Balance("acme").Balance
	for local, want := range map[string]string{
		"jose.nunez": "ambiguous 2", "jnunez": "ambiguous 2", "nunezjose": "ambiguous 2",
		"lukasz.krol": in + "lukasz-krol", "lkrol": in + "lukasz-krol", "lukaszkrol": in + "lukasz-krol",
		"ozlem.sahin": in + "ozlem-sahin", "sahinozlem": in + "ozlem-sahin",
	} {
		_, done := e.EmailLookup(local + "@globex.com")
		is.Equal(local+": "+outcome(done), local+": "+want)
	}
	is.Equal(e.Balance("acme").Balance, start-5*3) // the five answers, the ambiguous ones refunded
	pdl.mu.Lock()
	defer pdl.mu.Unlock()
	for _, s := range pdl.searches {
		raw, _ := json.Marshal(s.query)
		if why := pdlRefuses(s.query); why != "" {
			t.Errorf("PDL would refuse %s: %s", raw, why)
		}
	}
}
