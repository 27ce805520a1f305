package enrich_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"enrichd/enrich"
	"enrichd/enrich/enrichtest"
	"enrichd/enrich/source"
)

// noneHeld holds nothing: every lookup goes to the sources.
type noneHeld struct{}

func (noneHeld) PersonByEmail(context.Context, string) (*enrich.HeldPerson, error) { return nil, nil }
func (noneHeld) CompanyByDomain(context.Context, string) (*enrich.HeldCompany, error) {
	return nil, nil
}
func (noneHeld) CurrentStaff(context.Context, enrich.Employer, int) ([]enrich.HeldPerson, error) {
	return nil, nil
}
func (noneHeld) Gathering(context.Context, string, time.Time) (*enrich.Gathering, error) {
	return nil, nil
}

// The sim network's staff can be resolved: a current employee whose name nobody else
// at the company shares resolves to their profile; one who left does not.
func TestResolveEmailOnTheSimNetwork(t *testing.T) {
	is := is.New(t)
	sim := &source.Sim{}
	p := &enrich.Pipeline{Sources: []enrich.Source{sim}, Held: noneHeld{}}
	staff := sim.Staff("acme")
	names := map[string]int{}
	for _, m := range staff {
		names[strings.ToLower(m.FirstName+"."+m.LastName)]++
	}
	var current, former int
	for _, m := range staff {
		local := strings.ToLower(m.FirstName + "." + m.LastName)
		if names[local] != 1 {
			continue
		}
		out := p.ResolveEmail(context.Background(), &enrich.Task{}, enrich.Input{Lookup: enrich.LookupEmail, Target: local + "@acme.com"})
		if m.Current {
			current++
			is.Equal(out.Err, nil)
			is.Equal(*out.Result.Person.NetworkURL, m.NetworkURL)
			is.Equal(out.Result.Person.EmailMatch.Method, enrich.MatchResolved)
			is.Equal(*out.Result.Person.EmailMatch.Pattern, enrich.PatternFirstDotLast)
		} else {
			former++
			is.True(out.Err != nil)
			is.Equal(out.Err.Code, enrich.CodeNotFound) // people who left are not confirmed
		}
	}
	is.True(current > 0)
}

func TestResolveEmailRefusesWithoutAsking(t *testing.T) {
	is := is.New(t)
	var asked []string
	p := &enrich.Pipeline{Sources: []enrich.Source{enrichtest.Source{SourceName: "a", Asked: &asked}}, Held: noneHeld{}}
	out := p.ResolveEmail(context.Background(), &enrich.Task{}, enrich.Input{Lookup: enrich.LookupEmail, Target: "jane@gmail.com"})
	is.Equal(out.Err.Code, enrich.CodeNotFound)
	is.Equal(len(asked), 0)
}

func TestResolveEmailWithoutStaffSearch(t *testing.T) {
	is := is.New(t)
	var asked []string
	src := enrichtest.Source{SourceName: "a", Company: &enrich.Company{Name: "Acme", Domain: enrich.Ptr("acme.com")}, Asked: &asked}
	p := &enrich.Pipeline{Sources: []enrich.Source{src}, Held: noneHeld{}}
	out := p.ResolveEmail(context.Background(), &enrich.Task{}, enrich.Input{Lookup: enrich.LookupEmail, Target: "jane@acme.com"})
	is.Equal(out.Err.Code, enrich.CodeNotFound) // no source can search staff: nothing confirms
	is.True(strings.Contains(out.Err.Message, "search"))
}

// The README's sim examples stay true.
func TestResolveEmailSimExamplesOfTheReadme(t *testing.T) {
	is := is.New(t)
	p := &enrich.Pipeline{Sources: []enrich.Source{&source.Sim{}}, Held: noneHeld{}}
	ask := func(address string, hints enrich.Hints) enrich.EmailOutcome {
		return p.ResolveEmail(context.Background(), &enrich.Task{}, enrich.Input{Lookup: enrich.LookupEmail, Target: address, Hints: hints})
	}
	out := ask("edsger.dijkstra@acme.com", enrich.Hints{})
	is.Equal(out.Err, nil)
	is.Equal(*out.Result.Person.FullName, "Edsger Dijkstra")

	out = ask("edsger@acme.com", enrich.Hints{})
	is.Equal(out.Err.Code, enrich.CodeAmbiguous)
	is.Equal(*out.Err.Candidates, 2)
	is.True(out.Gathered != nil && len(out.Gathered.Candidates) == 2)
	is.Equal(out.Err.HintsAccepted[0], enrich.HintFullName)

	out = ask("edsger@acme.com", enrich.Hints{FullName: "Edsger Torvalds"})
	is.Equal(out.Err, nil)
	is.Equal(*out.Result.Person.FullName, "Edsger Torvalds")
	is.True(out.TieBroken)
	is.Equal(*out.Result.Person.EmailMatch.Pattern, enrich.PatternFirst)
}
