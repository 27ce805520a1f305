package enrich

// The promise of email lookups is that a guess is never returned, nor charged: each
// test here is a way a guess could slip through.

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"
	"testing"
	"time"
)

// revNet is a network with companies by domain, profiles by URL, a staff search that
// lists every profile in URL order up to the limit asked, as real searches do, and
// profiles that cannot be retrieved (down).
type revNet struct {
	company *Company
	people  map[string]*Person
	down    map[string]bool
	// alias lists, besides the people, URLs the search shows that retrieve the
	// person of another URL (alias -> that URL).
	alias map[string]string
	// hidden are people the search does not list.
	hidden map[string]bool
	// shownAs is the name the search shows for a URL, when not the person's.
	shownAs map[string]string
	// retrievals, when set, counts the profiles retrieved.
	retrievals *atomic.Int64
}

func (revNet) Name() string { return "rev" }
func (n revNet) CompanyByDomain(context.Context, *Tally, string) (*Company, error) {
	c := *n.company
	return &c, nil
}
func (n revNet) CompanyByURL(context.Context, *Tally, string) (*Company, error) {
	c := *n.company
	return &c, nil
}
func (n revNet) PersonByURL(_ context.Context, _ *Tally, u string) (*Person, error) {
	if n.retrievals != nil {
		n.retrievals.Add(1)
	}
	if n.down[u] {
		return nil, fmt.Errorf("rev: %w", ErrUnavailable)
	}
	if to, ok := n.alias[u]; ok {
		u = to
	}
	p, ok := n.people[u]
	if !ok {
		return nil, ErrNotFound
	}
	c := *p
	return &c, nil
}
func (n revNet) SearchStaff(_ context.Context, _ *Tally, q StaffQuery) ([]StaffMember, error) {
	var out []StaffMember
	for u, p := range n.people {
		if !n.hidden[u] {
			out = append(out, StaffMember{NetworkURL: u, FullName: *p.FullName})
		}
	}
	for a, u := range n.alias {
		out = append(out, StaffMember{NetworkURL: a, FullName: *n.people[u].FullName})
	}
	for i, m := range out {
		if name, ok := n.shownAs[m.NetworkURL]; ok {
			out[i].FullName = name
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NetworkURL < out[j].NetworkURL })
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

// revHeld: one address on record, a staff list, no gathering.
type revHeld struct {
	byEmail *HeldPerson
	staff   []HeldPerson
}

func (h revHeld) PersonByEmail(context.Context, string) (*HeldPerson, error)  { return h.byEmail, nil }
func (revHeld) CompanyByDomain(context.Context, string) (*HeldCompany, error) { return nil, nil }
func (h revHeld) CurrentStaff(context.Context, Employer, int) ([]HeldPerson, error) {
	return h.staff, nil
}
func (revHeld) Gathering(context.Context, string, time.Time) (*Gathering, error) { return nil, nil }

const revAcme = "https://www.linkedin.com/company/acme"

func revPerson(slug, first, last, title, city, cc, location string, ended bool) *Person {
	pos := Position{Title: Ptr(title), CompanyName: Ptr("Acme"), CompanyNetworkURL: Ptr(revAcme), IsCurrent: !ended}
	if location != "" {
		pos.Location = Ptr(location)
	}
	if ended {
		pos.EndDate = Ptr("2024-01-01")
	}
	return &Person{NetworkURL: Ptr("https://www.linkedin.com/in/" + slug), FullName: Ptr(first + " " + last),
		FirstName: Ptr(first), LastName: Ptr(last), City: Ptr(city), CountryCode: Ptr(cc), Positions: []Position{pos}}
}

func revCompany() *Company {
	return &Company{Name: "Acme", Domain: Ptr("acme.com"), NetworkURL: Ptr(revAcme)}
}

func revEmail(p *Pipeline, address string, h Hints) EmailOutcome {
	return p.ResolveEmail(context.Background(), &Task{}, Input{Lookup: LookupEmail, Target: address, Hints: h})
}

// a plausible profile that could not be retrieved is ignored, and the other one
// is returned (and charged) as the confirmed owner of jsmith@.
func TestACandidateThatCannotBeRetrievedLeavesNoAnswer(t *testing.T) {
	jane := revPerson("jane-smith", "Jane", "Smith", "Engineer", "Berlin", "DE", "", false)
	john := revPerson("john-smith", "John", "Smith", "Sales", "London", "GB", "", false)
	net := revNet{company: revCompany(), people: map[string]*Person{*jane.NetworkURL: jane, *john.NetworkURL: john},
		down: map[string]bool{*john.NetworkURL: true}}
	p := &Pipeline{Sources: []Source{net}, Held: revHeld{}}
	out := revEmail(p, "jsmith@acme.com", Hints{})
	if out.Err == nil {
		t.Fatalf("jsmith fits Jane and John Smith, John's profile could not be read, yet %s was returned as %s",
			*out.Result.Person.FullName, out.Result.Person.EmailMatch.Method)
	}
}

// the retrieval bound silently turns "several fit" into "one fits".
func TestFittingPeoplePastTheRetrievalBoundLeaveNoAnswer(t *testing.T) {
	jane := revPerson("jane-smith", "Jane", "Smith", "Engineer", "Berlin", "DE", "", false)
	john := revPerson("john-smith", "John", "Smith", "Sales", "London", "GB", "", false)
	net := revNet{company: revCompany(), people: map[string]*Person{*jane.NetworkURL: jane, *john.NetworkURL: john}}
	p := &Pipeline{Sources: []Source{net}, Held: revHeld{}, MaxRetrievals: 1}
	out := revEmail(p, "jsmith@acme.com", Hints{})
	if out.Err == nil {
		t.Fatalf("two shown names fit jsmith, only one was retrieved, and %s was returned as confirmed", *out.Result.Person.FullName)
	}
}

// inferred drops a held fitting person whose stale profile cannot be refreshed
// now, and returns the other held person as the only fit, with no search.
func TestAHeldCandidateThatCannotBeRefreshedStaysACandidate(t *testing.T) {
	now := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	jane := revPerson("jane-smith", "Jane", "Smith", "Engineer", "Berlin", "DE", "", false)
	john := revPerson("john-smith", "John", "Smith", "Sales", "London", "GB", "", false)
	net := revNet{company: revCompany(), people: map[string]*Person{*jane.NetworkURL: jane, *john.NetworkURL: john},
		down: map[string]bool{*john.NetworkURL: true}}
	held := revHeld{staff: []HeldPerson{{Person: jane, LastEnriched: now.Add(-time.Hour)}, {Person: john, LastEnriched: now.Add(-40 * 24 * time.Hour)}}}
	p := &Pipeline{Sources: []Source{net}, Held: held, Now: func() time.Time { return now }}
	out := revEmail(p, "jsmith@acme.com", Hints{})
	if out.Err == nil {
		t.Fatalf("held John Smith also fits jsmith (refresh failed), yet %s was returned as %s",
			*out.Result.Person.FullName, out.Result.Person.EmailMatch.Method)
	}
}

// exact refreshes a stale person, the refresh shows they left, and they are
// still returned (and charged) as the address's owner.
func TestAnAddressOnRecordOfAFormerEmployeeIsNotExact(t *testing.T) {
	now := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	was := revPerson("jane-smith", "Jane", "Smith", "Engineer", "Berlin", "DE", "", false)
	left := revPerson("jane-smith", "Jane", "Smith", "Engineer", "Berlin", "DE", "", true)
	net := revNet{company: revCompany(), people: map[string]*Person{*left.NetworkURL: left}}
	held := revHeld{byEmail: &HeldPerson{Person: was, LastEnriched: now.Add(-40 * 24 * time.Hour)}}
	p := &Pipeline{Sources: []Source{net}, Held: held, Now: func() time.Time { return now }}
	out := revEmail(p, "jane.smith@acme.com", Hints{})
	if out.Err == nil {
		t.Fatalf("refreshed profile shows the Acme position ended, yet returned as %s (current=%v)",
			out.Result.Person.EmailMatch.Method, out.Result.Person.Positions[0].IsCurrent)
	}
}

// the name fallback ignores a position's own company page when the employer's
// page is unknown: a person at another "Acme" (different page) is "at" acme.com.
func TestAPositionAtAnotherCompanysPageDoesNotCountByName(t *testing.T) {
	e := EmployerOf(&Company{Name: "Acme Inc.", Domain: Ptr("acme.com")}, "acme.com")
	other := Position{CompanyName: Ptr("ACME"), CompanyNetworkURL: Ptr("https://www.linkedin.com/company/acme-tools-uk"), IsCurrent: true}
	if e.Employs(other) {
		t.Fatal("a position at another company's page (acme-tools-uk) counts as at acme.com by name alone")
	}
}

// role addresses with a separator the list does not spell, or a digit suffix
// after a separator, are not refused (the source is asked, "no lookup" broken).
func TestRoleAddressesWithSeparatorsAreRefused(t *testing.T) {
	for _, a := range []string{"support-2@acme.com", "info_1@acme.com", "no.reply@acme.com", "do.not.reply@acme.com", "sales.eu@acme.com"} {
		if Refusal(a) == nil {
			t.Errorf("%s is a role address but is not refused", a)
		}
	}
}

// A location hint offered in hintsAccepted must work as people write it, and a hint
// that would separate must be offered.
func TestLocationHintsAcceptedAreTheOnesThatSeparate(t *testing.T) {
	e := EmployerOf(revCompany(), "acme.com")
	cands := func(jane, john *Person) []Candidate {
		return []Candidate{{Person: jane, Method: MatchResolved, Pattern: PatternFLast}, {Person: john, Method: MatchResolved, Pattern: PatternFLast}}
	}
	accepts := func(got []string) bool {
		for _, h := range got {
			if h == HintLocation {
				return true
			}
		}
		return false
	}

	// Same country, cities known: "Berlin, Germany" is Jane alone.
	both := cands(revPerson("jane-smith", "Jane", "Smith", "Engineer", "Berlin", "DE", "Berlin, Germany", false),
		revPerson("john-smith", "John", "Smith", "Engineer", "Munich", "DE", "Munich, Germany", false))
	if !accepts(e.HintsAccepted(both)) {
		t.Fatalf("hintsAccepted = %v, want location", e.HintsAccepted(both))
	}
	if got := e.pick(both, Hints{Location: "Berlin, Germany"}); len(got) != 1 || *got[0].Person.FirstName != "Jane" {
		t.Fatalf(`"Berlin, Germany" picks %d people`, len(got))
	}
	if got := e.pick(both, Hints{Location: "Germany"}); len(got) != 2 {
		t.Fatalf(`"Germany" picks %d people, want both`, len(got))
	}

	// Known only by their positions' locations: "Berlin" separates, so it is offered.
	jane := revPerson("jane-smith", "Jane", "Smith", "Engineer", "", "DE", "Berlin, Germany", false)
	john := revPerson("john-smith", "John", "Smith", "Engineer", "", "DE", "Munich, Germany", false)
	jane.City, john.City = nil, nil
	if !accepts(e.HintsAccepted(cands(jane, john))) {
		t.Fatalf("hintsAccepted = %v, want location", e.HintsAccepted(cands(jane, john)))
	}
}

// A profile known only by its full name is read every way it splits, so nobody is
// ruled out by a guess at where the given names end: María García López fits by her
// first surname as by her second, Kim Ly Trần by her given names joined, and John
// Michael Smith by Michael, since nothing in a full name tells a second given name from
// a first surname. What fits no reading fits nobody, and an initial stands only for
// the first word, the one given name every reading has: Laia Pujol Puigdemont is no
// ppuigdemont, Pujol being her first surname as likely as a second given name.
func TestAFullNameIsMatchedByEveryReading(t *testing.T) {
	for full, locals := range map[string][]string{
		"María García López":        {"maria.garcia", "mgarcia", "maria.lopez", "mariagarcialopez", "garcia.maria"},
		"Kim Ly Trần":               {"kimlyt", "ktran", "kimly.tran", "kim.tran", "lytran"},
		"Anna Maria van der Berg":   {"anna.vanderberg", "annamaria.berg", "aberg", "maria.berg"},
		"John Michael Smith":        {"john.smith", "michael.smith", "jsmith", "michael"},
		"Dr. Ana Laura Macedo, PhD": {"amacedo", "analaura.macedo", "laura.macedo"},
		"Laia Pujol Puigdemont":     {"laia.puigdemont", "laiapujol.puigdemont", "lpujol", "lpuigdemont"},
	} {
		names := NamesOf(&Person{FullName: Ptr(full)})
		for _, local := range locals {
			if MatchNames(names, local) == "" {
				t.Errorf("%s@ does not fit %s (readings %v)", local, full, names)
			}
		}
	}
	for full, local := range map[string]string{"María García López": "jgarcia", "Kim Ly Trần": "kto", "John Michael Smith": "jjones",
		"Laia Pujol Puigdemont": "ppuigdemont", "Anna Maria van der Berg": "mberg", "Ana Laura Macedo": "lmacedo"} {
		if got := MatchNames(NamesOf(&Person{FullName: Ptr(full)}), local); got != "" {
			t.Errorf("%s@ fits %s as %q", local, full, got)
		}
	}
}

// First and last names set are read as they are: the record knows where the given
// names end. A full name that holds a word neither has (a middle name a vendor keeps
// apart) is read every way too.
func TestFirstAndLastNamesAreReadAsTheyAre(t *testing.T) {
	kim := &Person{FirstName: Ptr("Kim Ly"), LastName: Ptr("Trần"), FullName: Ptr("Kim Ly Trần")}
	if names := NamesOf(kim); len(names) != 1 || names[0] != (PersonName{First: "Kim Ly", Last: "Trần"}) {
		t.Errorf("readings %v, want Kim Ly / Trần alone", names)
	}
	if got := MatchNames(NamesOf(kim), "kim.ly"); got != "" {
		t.Errorf("kim.ly@ fits Kim Ly / Trần as %q", got)
	}
	middle := &Person{FirstName: Ptr("kim"), LastName: Ptr("trần"), FullName: Ptr("kim ly trần")}
	for _, local := range []string{"kimlyt", "ktran", "ltran", "ly.tran"} { // the middle name a given name, its initial too
		if MatchNames(NamesOf(middle), local) == "" {
			t.Errorf("%s@: a middle name kept apart is not read: %v", local, NamesOf(middle))
		}
	}
}

// A person the address fits only by the initial of a word of their full name that may
// be a surname counts among the people it fits, and is never its answer alone: Laia
// Pujol Puigdemont, known by her full name alone, makes rpuigdemont@ ambiguous beside
// a Rosa Puigdemont, and ppuigdemont@ not_found alone.
func TestAFitOnAGuessedGivenNameIsNeverAnsweredAlone(t *testing.T) {
	laia := &Person{FullName: Ptr("Laia Pujol Puigdemont"), Positions: []Position{{IsCurrent: true, CompanyName: Ptr("Acme")}}}
	e := Employer{Name: "Acme"}
	c, ok := e.Confirm(laia, "ppuigdemont", MatchResolved)
	if !ok || !c.Possible {
		t.Fatalf("ppuigdemont: %+v %v, want a possible candidate", c, ok)
	}
	if c, ok := e.Confirm(laia, "lpuigdemont", MatchResolved); !ok || c.Possible {
		t.Fatalf("lpuigdemont: %+v %v, want a sure candidate", c, ok)
	}
	p := &Pipeline{}
	out := p.decide(context.Background(), &Task{}, Input{Target: "ppuigdemont@acme.com"}, e, &Company{Name: "Acme"}, []Candidate{c}, nil)
	if out.Err == nil || out.Err.Code != CodeNotFound {
		t.Fatalf("a possible candidate alone: %+v, want not_found", out)
	}
	rosa := &Person{FirstName: Ptr("Rosa"), LastName: Ptr("Puigdemont"), Positions: laia.Positions}
	r, _ := e.Confirm(rosa, "rpuigdemont", MatchResolved)
	l, _ := e.Confirm(&Person{FullName: Ptr("Laia Roser Puigdemont"), Positions: laia.Positions}, "rpuigdemont", MatchResolved)
	out = p.decide(context.Background(), &Task{}, Input{Target: "rpuigdemont@acme.com"}, e, &Company{Name: "Acme"}, []Candidate{r, l}, nil)
	if out.Err == nil || out.Err.Code != CodeAmbiguous {
		t.Fatalf("a sure and a possible candidate: %+v, want ambiguous", out)
	}
}
