package enrich

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
)

// filler knows every profile it is asked for, with an about, and records the URLs
// it was asked.
type filler struct {
	mu    sync.Mutex
	asked []string
}

func (*filler) Name() string { return "filler" }
func (*filler) CompanyByDomain(context.Context, *Tally, string) (*Company, error) {
	return nil, ErrNotFound
}
func (*filler) CompanyByURL(context.Context, *Tally, string) (*Company, error) {
	return nil, ErrNotFound
}
func (f *filler) PersonByURL(_ context.Context, _ *Tally, u string) (*Person, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, u)
	return &Person{NetworkURL: Ptr(u), FullName: Ptr("Someone Else"), About: Ptr("Filled in.")}, nil
}

// An email lookup fills the person it confirms with the person fill list, and only
// them: of two Jane Smiths the search lists, the one who left Acme is retrieved to be
// ruled out, but no source is asked to fill her. A profile held fresh is read as it
// is held, and filled by nobody.
func TestAnEmailLookupFillsOnlyThePersonItConfirms(t *testing.T) {
	is := is.New(t)
	jane := revPerson("jane-smith", "Jane", "Smith", "Engineer", "Berlin", "DE", "", false)
	left := revPerson("jane-smith-2", "Jane", "Smith", "Engineer", "Berlin", "DE", "", true)
	net := revNet{company: revCompany(), people: map[string]*Person{*jane.NetworkURL: jane, *left.NetworkURL: left}}
	f := &filler{}
	p := &Pipeline{Sources: []Source{net, f}, Held: revHeld{}}
	task := &Task{Fill: []string{"about"}}
	out := p.ResolveEmail(context.Background(), task, Input{Lookup: LookupEmail, Target: "jane.smith@acme.com"})
	is.Equal(out.Err, nil)
	is.Equal(*out.Result.Person.NetworkURL, *jane.NetworkURL)
	is.Equal(*out.Result.Person.FullName, "Jane Smith") // rev's, not overwritten
	is.Equal(*out.Result.Person.About, "Filled in.")
	is.Equal(f.asked, []string{*jane.NetworkURL}) // not the one ruled out
	tr := task.Trace(out.Result)
	is.Equal(tr.Provenance["full_name"], "rev")
	is.Equal(tr.Provenance["about"], "filler")
	is.True(slices.ContainsFunc(tr.Sources, func(c SourceCall) bool { return c.Name == "filler" && c.Outcome == OutcomeHit }))

	// Held fresh: read as it is held, no source asked for the profile.
	f.asked = nil
	held := revHeld{staff: []HeldPerson{{Person: jane, LastEnriched: time.Now().Add(-time.Hour)}}}
	p = &Pipeline{Sources: []Source{net, f}, Held: held}
	task = &Task{Fill: []string{"about"}}
	out = p.ResolveEmail(context.Background(), task, Input{Lookup: LookupEmail, Target: "jane.smith@acme.com"})
	is.Equal(out.Err, nil)
	is.Equal(out.Result.Person.About, nil)
	is.Equal(len(f.asked), 0)
}

// twoSmiths is a pipeline whose network knows Jane and John Smith at Acme, both of
// whom jsmith@acme.com fits, and a filler source after it.
func twoSmiths() (*Pipeline, *filler, *Person) {
	jane := revPerson("jane-smith", "Jane", "Smith", "Engineer", "Berlin", "DE", "", false)
	john := revPerson("john-smith", "John", "Smith", "Sales", "London", "GB", "", false)
	net := revNet{company: revCompany(), people: map[string]*Person{*jane.NetworkURL: jane, *john.NetworkURL: john}}
	f := &filler{}
	return &Pipeline{Sources: []Source{net, f}, Held: revHeld{}}, f, john
}

// An email lookup the address fits two people for fills neither: until one fits
// alone, none of them is known to be the one the address belongs to.
func TestAnAmbiguousEmailLookupFillsNobody(t *testing.T) {
	is := is.New(t)
	p, f, _ := twoSmiths()
	task := &Task{Fill: []string{"about"}}
	out := p.ResolveEmail(context.Background(), task, Input{Lookup: LookupEmail, Target: "jsmith@acme.com"})
	is.True(out.Err != nil)
	is.Equal(out.Err.Code, CodeAmbiguous)
	is.Equal(len(f.asked), 0) // neither Jane nor John
}

// A search that could not see everyone confirms Ada, yet settles on nobody: she is
// not filled.
func TestAnEmailLookupThatCouldNotSeeEveryoneFillsNobody(t *testing.T) {
	is := is.New(t)
	f := &filler{}
	ada := revPerson("ada-lovelace", "Ada", "Lovelace", "Engineer", "London", "GB", "", false)
	net := revNet{company: revCompany(), people: map[string]*Person{*ada.NetworkURL: ada}}
	p := &Pipeline{Sources: []Source{partialSearch{net}, f}, Held: revHeld{}}
	task := &Task{Fill: []string{"about"}}
	out := p.ResolveEmail(context.Background(), task, Input{Lookup: LookupEmail, Target: "alovelace@acme.com"})
	is.True(out.Err != nil)
	is.Equal(out.Err.Code, CodeNotFound)
	is.Equal(len(f.asked), 0)
}

// A hint that picks one of the people the address fits fills that person alone.
func TestAHintedPickFillsOnlyThePersonPicked(t *testing.T) {
	is := is.New(t)
	p, f, john := twoSmiths()
	task := &Task{Fill: []string{"about"}}
	out := p.ResolveEmail(context.Background(), task, Input{Lookup: LookupEmail, Target: "jsmith@acme.com", Hints: Hints{FullName: "John Smith"}})
	is.Equal(out.Err, nil)
	is.True(out.TieBroken)
	is.Equal(*out.Result.Person.NetworkURL, *john.NetworkURL)
	is.Equal(*out.Result.Person.About, "Filled in.")
	is.Equal(f.asked, []string{*john.NetworkURL})
	is.Equal(task.Trace(out.Result).Provenance["about"], "filler")
	// What is kept for retries with other hints is as confirmed, not filled.
	is.True(out.Gathered != nil)
	for _, c := range out.Gathered.Candidates {
		is.Equal(c.Person.About, nil)
	}
}
