package enrich

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// countingSearch counts the staff searches a network answers and what each asked for.
type countingSearch struct {
	revNet
	limits *[]int
}

func (c countingSearch) SearchStaff(ctx context.Context, tally *Tally, q StaffQuery) ([]StaffMember, error) {
	*c.limits = append(*c.limits, q.Limit)
	return c.revNet.SearchStaff(ctx, tally, q)
}

// staffOf puts n people the address barbara.lee cannot stand for on the network, and
// Barbara Berners-Lee, whom it fits.
func staffOf(n int) revNet {
	people := map[string]*Person{}
	for i := range n {
		p := revPerson(fmt.Sprintf("a-lee-%03d", i), "Alan", "Lee", "Engineer", "Berlin", "DE", "", false)
		people[*p.NetworkURL] = p
	}
	barbara := revPerson("barbara-berners-lee", "Barbara", "Berners-Lee", "Engineer", "Berlin", "DE", "", false)
	people[*barbara.NetworkURL] = barbara
	return revNet{company: revCompany(), people: people}
}

// A search is cut off only when people the address fits may lie beyond it: a first
// page full of names that do not fit is asked again as a whole page, and the names
// that cannot fit are dropped before anything is counted.
func TestASearchIsCutOffAfterFittingNotBefore(t *testing.T) {
	now := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	var limits []int
	p := &Pipeline{Sources: []Source{countingSearch{staffOf(30), &limits}}, Held: revHeld{}, Now: func() time.Time { return now }}
	out := revEmail(p, "barbara.lee@acme.com", Hints{})
	if out.Err != nil || *out.Result.Person.FullName != "Barbara Berners-Lee" || out.Result.Person.EmailMatch.Method != MatchResolved {
		t.Fatalf("barbara.lee fits Barbara Berners-Lee alone among 31: got %+v", out)
	}
	if fmt.Sprint(limits) != fmt.Sprint([]int{DefaultMaxRetrievals + 1, StaffSearchMax}) {
		t.Fatalf("the searches asked for %v hits: a full first page is asked again whole", limits)
	}

	// A whole page full: people the address fits may be beyond it, so nobody is
	// confirmed, whatever is held.
	limits = nil
	big := staffOf(StaffSearchMax + 5)
	p.Sources = []Source{countingSearch{big, &limits}}
	p.Held = revHeld{staff: []HeldPerson{{Person: big.people["https://www.linkedin.com/in/barbara-berners-lee"], LastEnriched: now}}}
	out = revEmail(p, "barbara.lee@acme.com", Hints{})
	if out.Err == nil || out.Err.Code != CodeNotFound {
		t.Fatalf("a whole page of hits is cut off: got %+v", out)
	}
}

// partialSearch answers like revNet but could not ask for every name.
type partialSearch struct{ revNet }

func (s partialSearch) SearchStaff(ctx context.Context, tally *Tally, q StaffQuery) ([]StaffMember, error) {
	hits, _ := s.revNet.SearchStaff(ctx, tally, q)
	return hits, fmt.Errorf("too many names: %w", ErrSearchIncomplete)
}

// A search that could not ask for every name leaves the people held unable to decide
// alone, while what it did find is still confirmed against the profiles.
func TestASearchThatCouldNotAskForEveryNameLetsNobodyHeldDecide(t *testing.T) {
	now := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	ada := revPerson("ada-lovelace", "Ada", "Lovelace", "Engineer", "London", "GB", "", false)
	net := revNet{company: revCompany(), people: map[string]*Person{}}
	p := &Pipeline{Sources: []Source{partialSearch{net}}, Now: func() time.Time { return now },
		Held: revHeld{staff: []HeldPerson{{Person: ada, LastEnriched: now.Add(-time.Hour)}}}}
	out := revEmail(p, "alovelace@acme.com", Hints{})
	if out.Err == nil || out.Err.Code != CodeNotFound {
		t.Fatalf("got %+v, want not_found: Ada is held, but the search could not ask for every name", out)
	}
	net.people[*ada.NetworkURL] = ada
	p.Held = revHeld{}
	out = revEmail(p, "alovelace@acme.com", Hints{})
	if out.Err == nil || out.Err.Code != CodeNotFound {
		t.Fatalf("got %+v, want not_found: the search found Ada, but may have missed others", out)
	}
}
