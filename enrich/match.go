package enrich

import (
	"slices"
	"strings"
	"time"
)

// Employer is a company as positions are compared with it: whether a position is at
// the company an email's domain was identified as.
type Employer struct {
	NetworkURL string   // the company's network page, "" when unknown
	Domains    []string // its canonical domain and the domain of the address
	Name       string   // as the company record has it
}

// EmployerOf describes c, reached through the address domain emailDomain.
func EmployerOf(c *Company, emailDomain string) Employer {
	e := Employer{Name: c.Name}
	if c.NetworkURL != nil {
		e.NetworkURL = *c.NetworkURL
	}
	if c.Domain != nil {
		e.Domains = append(e.Domains, strings.ToLower(*c.Domain))
	}
	if emailDomain != "" && !slices.Contains(e.Domains, emailDomain) {
		e.Domains = append(e.Domains, emailDomain)
	}
	return e
}

// EmployerAt describes the company behind an address's domain: c when it is known,
// else a company named after the domain's first label (acme for acme.com) that the
// domain belongs to.
func EmployerAt(c *Company, emailDomain string) Employer {
	if c != nil {
		return EmployerOf(c, emailDomain)
	}
	label, _, _ := strings.Cut(emailDomain, ".")
	return Employer{Name: label, Domains: []string{emailDomain}}
}

// legalSuffixes are left out when company names are compared: "Acme, Inc." is Acme.
var legalSuffixes = map[string]bool{
	"inc": true, "incorporated": true, "llc": true, "llp": true, "lp": true, "ltd": true, "limited": true,
	"corp": true, "corporation": true, "co": true, "company": true, "plc": true, "gmbh": true, "ag": true,
	"kg": true, "se": true, "sa": true, "sas": true, "sarl": true, "srl": true, "spa": true, "bv": true,
	"nv": true, "oy": true, "ab": true, "as": true, "aps": true, "pty": true, "pte": true, "kk": true,
	"sl": true, "ug": true, "the": true,
}

// CompanyNameKey folds a company name for comparison: case, accents, punctuation and
// legal suffixes ignored ("ACME, Inc." and "Acme" give "acme").
func CompanyNameKey(name string) string {
	var words []string
	for _, w := range strings.FieldsFunc(Fold(strings.ReplaceAll(name, ".", "")), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127)
	}) {
		if !legalSuffixes[w] {
			words = append(words, w)
		}
	}
	return strings.Join(words, " ")
}

// Employs reports whether position p is at the company. The strongest identifier both
// sides have decides, and a mismatch on it is final:
//  1. both have a network company page: the pages must be the same;
//  2. else both have a domain: the position's company domain must be one of the
//     company's domains (canonical, or the address's);
//  3. else the company names must be equal once folded (CompanyNameKey), and a page
//     the position names must be named after the company.
//
// So a position at another company of the same name, with its own page, never counts.
func (e Employer) Employs(p Position) bool {
	if p.CompanyNetworkURL != nil && *p.CompanyNetworkURL != "" && e.NetworkURL != "" {
		return strings.EqualFold(*p.CompanyNetworkURL, e.NetworkURL)
	}
	if p.Company != nil && p.Company.Domain != nil && *p.Company.Domain != "" && len(e.Domains) > 0 {
		return slices.Contains(e.Domains, strings.ToLower(*p.Company.Domain))
	}
	// The position names its company's page and the company has none to compare with:
	// the page must at least be named after it (acme for Acme or acme.com), not after
	// another company of a similar name (acme-tools-uk).
	if p.CompanyNetworkURL != nil && *p.CompanyNetworkURL != "" && !e.namedBy(SlugOf(*p.CompanyNetworkURL)) {
		return false
	}
	var name string
	switch {
	case p.CompanyName != nil:
		name = *p.CompanyName
	case p.Company != nil && p.Company.Name != nil:
		name = *p.Company.Name
	}
	key := CompanyNameKey(name)
	return key != "" && key == CompanyNameKey(e.Name)
}

// namedBy reports whether a company page's slug names this company: its folded name
// or the first label of one of its domains, without separators.
func (e Employer) namedBy(slug string) bool {
	squash := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 {
				return r
			}
			return -1
		}, Fold(s))
	}
	key := squash(slug)
	if key == "" {
		return false
	}
	if key == squash(CompanyNameKey(e.Name)) {
		return true
	}
	for _, d := range e.Domains {
		label, _, _ := strings.Cut(d, ".")
		if key == squash(label) {
			return true
		}
	}
	return false
}

// CurrentPosition returns the person's current position at the company, nil when
// they hold none: a position that is current and has no end date. A former employee
// is not at the company, whatever the address says.
func (e Employer) CurrentPosition(person *Person) *Position {
	for i := range person.Positions {
		p := person.Positions[i]
		if p.IsCurrent && (p.EndDate == nil || *p.EndDate == "") && e.Employs(p) {
			return &person.Positions[i]
		}
	}
	return nil
}

// Candidate is a person an email's local part fits who holds a current position at
// the address's company.
type Candidate struct {
	Person  *Person
	Method  string // MatchInferred or MatchResolved
	Pattern string
	// Source names the source that found the person (EmailMatch.Source), "" when
	// what is held did.
	Source string
	// MatchedBy names the vendor whose match by the address found them
	// (EmailMatch.MatchedBy), "" when the name did.
	MatchedBy string
	// Possible says the address fits them only if a word of their full name that may
	// be a surname is a given name (Confirm): they count among the people it fits, but
	// are never its answer alone.
	Possible bool
	// RetrievedAt is when the profile was retrieved from its source.
	RetrievedAt time.Time
}

// Confirm returns the person as a candidate when they hold a current position at the
// company and the local part fits their name, read every way it splits (NamesOf). A
// person the local part fits only by the initial of a word that may be a surname as
// well as a given name (ppuigdemont for Laia Pujol Puigdemont, known by her full name
// alone) is a candidate Possible: ruling them out would be a guess, and so would
// answering with them alone.
func (e Employer) Confirm(person *Person, local, method string) (Candidate, bool) {
	if person == nil || e.CurrentPosition(person) == nil {
		return Candidate{}, false
	}
	names := NamesOf(person)
	pattern := MatchNames(names, local)
	possible := false
	if pattern == "" {
		pattern, possible = MatchNames(leniently(names), local), true
	}
	if pattern == "" {
		return Candidate{}, false
	}
	return Candidate{Person: person, Method: method, Pattern: pattern, Possible: possible}, true
}

// Hint names, as a request sends them.
const (
	HintFullName = "fullName"
	HintTitle    = "title"
	HintLocation = "location"
)

func (h Hints) empty() bool {
	return strings.TrimSpace(h.FullName) == "" && strings.TrimSpace(h.Title) == "" && strings.TrimSpace(h.Location) == ""
}

// pick returns the candidates that agree with every hint sent. A fullName hint is
// first read as written; only when nobody has that name are nicknames allowed
// ("Bob Smith" then picks Robert Smith), so "John Smith" picks John over Jack.
func (e Employer) pick(cands []Candidate, h Hints) []Candidate {
	for _, nicknames := range []bool{false, true} {
		var out []Candidate
		for _, c := range cands {
			if (strings.TrimSpace(h.FullName) == "" || e.fullNameFits(h.FullName, c, nicknames)) &&
				(strings.TrimSpace(h.Title) == "" || e.hintFits(HintTitle, h.Title, c)) &&
				(strings.TrimSpace(h.Location) == "" || e.hintFits(HintLocation, h.Location, c)) {
				out = append(out, c)
			}
		}
		if len(out) > 0 || strings.TrimSpace(h.FullName) == "" {
			return out
		}
	}
	return nil
}

// fullNameFits: each word of the hint is one of the person's names; with nicknames,
// a nickname of the first name counts too.
func (e Employer) fullNameFits(hint string, c Candidate, nicknames bool) bool {
	words := nameWords(Fold(hint))
	if len(words) == 0 {
		return false
	}
	n := NameOf(c.Person)
	// The person's names, and the nickname groups they are on, as sets: the time is
	// linear in the hint and the name, not in their product.
	names := map[string]bool{}
	groups := map[int]bool{}
	for _, s := range []string{n.First, n.Last, deref(c.Person.FullName)} {
		for _, f := range foldings(s) {
			for _, w := range nameWords(f) {
				if !names[w] && nicknames {
					for _, g := range nicknameGroups()[w] {
						groups[g] = true
					}
				}
				names[w] = true
			}
		}
	}
	for _, w := range words {
		if names[w] {
			continue
		}
		// SameFirstName: a name and the word share a nickname group. Both are folded
		// already.
		if !nicknames || !slices.ContainsFunc(nicknameGroups()[w], func(g int) bool { return groups[g] }) {
			return false
		}
	}
	return true
}

// hintFits reports whether one hint describes the candidate:
//   - fullName: each of its words is one of the person's names, as written;
//   - title: each of its words is in the title of the current position at the company;
//   - location: one of its comma-separated parts names the person's city, the
//     position's location or the person's country (by code or name), and no part
//     names another country.
func (e Employer) hintFits(kind, hint string, c Candidate) bool {
	switch kind {
	case HintFullName:
		return e.fullNameFits(hint, c, false)
	case HintTitle:
		words := nameWords(Fold(hint))
		pos := e.CurrentPosition(c.Person)
		if len(words) == 0 || pos == nil || pos.Title == nil {
			return false
		}
		title := nameWords(Fold(*pos.Title))
		for _, w := range words {
			if !slices.Contains(title, w) {
				return false
			}
		}
		return true
	case HintLocation:
		return locationFits(hint, c.Person, e.CurrentPosition(c.Person))
	}
	return false
}

func locationFits(hint string, p *Person, pos *Position) bool {
	country := strings.ToLower(deref(p.CountryCode))
	var places [][]string
	for _, s := range []string{deref(p.City), countryNames[country]} {
		if w := nameWords(Fold(s)); len(w) > 0 {
			places = append(places, w)
		}
	}
	if pos != nil && pos.Location != nil {
		for _, part := range strings.Split(*pos.Location, ",") {
			if w := nameWords(Fold(part)); len(w) > 0 {
				places = append(places, w)
			}
		}
	}
	// Every part of the hint must describe the person: "Berlin, Germany" is not someone
	// in Munich, Germany.
	parts := 0
	for _, part := range strings.Split(hint, ",") {
		words := nameWords(Fold(part))
		if len(words) == 0 {
			continue
		}
		parts++
		joined := strings.Join(words, " ")
		if code, ok := countryCodes[joined]; ok && country != "" && code != country {
			return false // another country
		}
		if country != "" && joined == country {
			continue
		}
		found := false
		for _, place := range places {
			if strings.Join(place, " ") == joined {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return parts > 0
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// hintValues are the values of one hint field a candidate has: what, sent as that
// hint, could pick the candidate out.
func (e Employer) hintValues(kind string, c Candidate) []string {
	switch kind {
	case HintFullName:
		if c.Person.FullName != nil {
			return []string{*c.Person.FullName}
		}
		n := NameOf(c.Person)
		return []string{strings.TrimSpace(n.First + " " + n.Last)}
	case HintTitle:
		if pos := e.CurrentPosition(c.Person); pos != nil && pos.Title != nil {
			return []string{*pos.Title}
		}
	case HintLocation:
		var out []string
		if c.Person.City != nil {
			out = append(out, *c.Person.City)
		}
		if name := countryNames[strings.ToLower(deref(c.Person.CountryCode))]; name != "" {
			out = append(out, name)
		}
		if pos := e.CurrentPosition(c.Person); pos != nil && pos.Location != nil {
			// The whole location and each of its parts: "Berlin" may separate where
			// "Berlin, Germany" does too, or where only it does.
			out = append(out, *pos.Location)
			if parts := strings.Split(*pos.Location, ","); len(parts) > 1 {
				out = append(out, parts...)
			}
		}
		return out
	}
	return nil
}

// HintsAccepted lists the hints that would break a tie between these candidates: a
// hint field is accepted when some candidate has a value for it that describes that
// candidate alone. Hints that could not separate them are left out.
func (e Employer) HintsAccepted(cands []Candidate) []string {
	accepted := []string{}
	for _, kind := range []string{HintFullName, HintTitle, HintLocation} {
	field:
		for _, c := range cands {
			for _, v := range e.hintValues(kind, c) {
				if strings.TrimSpace(v) == "" {
					continue
				}
				n := 0
				for _, other := range cands {
					if e.hintFits(kind, v, other) {
						n++
					}
				}
				if n == 1 {
					accepted = append(accepted, kind)
					break field
				}
			}
		}
	}
	return accepted
}

// countryNames are the English names of the countries a location hint may name, by
// ISO 3166-1 alpha-2 code (lower-case).
var countryNames = map[string]string{
	"ar": "argentina", "at": "austria", "au": "australia", "be": "belgium", "bg": "bulgaria", "br": "brazil",
	"ca": "canada", "ch": "switzerland", "cl": "chile", "cn": "china", "co": "colombia", "cz": "czechia",
	"de": "germany", "dk": "denmark", "ee": "estonia", "eg": "egypt", "es": "spain", "fi": "finland",
	"fr": "france", "gb": "united kingdom", "gr": "greece", "hk": "hong kong", "hr": "croatia", "hu": "hungary",
	"id": "indonesia", "ie": "ireland", "il": "israel", "in": "india", "is": "iceland", "it": "italy",
	"jp": "japan", "ke": "kenya", "kr": "south korea", "lt": "lithuania", "lu": "luxembourg", "lv": "latvia",
	"ma": "morocco", "mx": "mexico", "my": "malaysia", "ng": "nigeria", "nl": "netherlands", "no": "norway",
	"nz": "new zealand", "pe": "peru", "ph": "philippines", "pk": "pakistan", "pl": "poland", "pt": "portugal",
	"ro": "romania", "rs": "serbia", "ru": "russia", "sa": "saudi arabia", "se": "sweden", "sg": "singapore",
	"si": "slovenia", "sk": "slovakia", "th": "thailand", "tr": "turkey", "tw": "taiwan", "ua": "ukraine",
	"us": "united states", "vn": "vietnam", "za": "south africa", "ae": "united arab emirates",
}

// countryCodes maps country names (and a few common other names) to their codes.
var countryCodes = func() map[string]string {
	m := map[string]string{"usa": "us", "united states of america": "us", "uk": "gb", "england": "gb",
		"great britain": "gb", "scotland": "gb", "wales": "gb", "holland": "nl", "the netherlands": "nl",
		"czech republic": "cz", "korea": "kr", "uae": "ae", "deutschland": "de", "espana": "es", "italia": "it"}
	for code, name := range countryNames {
		m[name] = code
	}
	return m
}()
