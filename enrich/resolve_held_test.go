package enrich

import (
	"context"
	"testing"
	"time"
)

// profilesOnly is a network that retrieves profiles and companies but cannot search
// a company's staff.
type profilesOnly struct{ net revNet }

func (profilesOnly) Name() string { return "profiles-only" }
func (n profilesOnly) CompanyByDomain(ctx context.Context, tally *Tally, d string) (*Company, error) {
	return n.net.CompanyByDomain(ctx, tally, d)
}
func (n profilesOnly) CompanyByURL(ctx context.Context, tally *Tally, u string) (*Company, error) {
	return n.net.CompanyByURL(ctx, tally, u)
}
func (n profilesOnly) PersonByURL(ctx context.Context, tally *Tally, u string) (*Person, error) {
	return n.net.PersonByURL(ctx, tally, u)
}

// Held people never stand in for the staff search: a person held who fits the
// address is one of the people it fits, beside those the search confirms.
func TestAPersonHeldIsCountedBesideTheStaffSearched(t *testing.T) {
	now := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	jane := revPerson("jane-smith", "Jane", "Smith", "Engineer", "Berlin", "DE", "", false)
	john := revPerson("john-smith", "John", "Smith", "Sales", "London", "GB", "", false)
	net := revNet{company: revCompany(), people: map[string]*Person{*jane.NetworkURL: jane, *john.NetworkURL: john}}
	held := revHeld{staff: []HeldPerson{{Person: john, LastEnriched: now.Add(-time.Hour)}}}
	p := &Pipeline{Sources: []Source{net}, Held: held, Now: func() time.Time { return now }}
	out := revEmail(p, "jsmith@acme.com", Hints{})
	if out.Err == nil || out.Err.Code != CodeAmbiguous || *out.Err.Candidates != 2 {
		t.Fatalf("jsmith fits Jane and John Smith, John is held: got %+v", out)
	}

	// Someone held whom the search does not even list: the search cannot see the
	// form the address takes, so others it fits may be unseen too. Held Ada does not
	// decide alone: not_found, and ambiguous when two held people fit.
	ada := revPerson("ada-lovelace", "Ada", "Lovelace", "Engineer", "London", "GB", "", false)
	alan := revPerson("alan-lovelace", "Alan", "Lovelace", "Engineer", "Paris", "FR", "", false)
	p.Held = revHeld{staff: []HeldPerson{{Person: ada, LastEnriched: now.Add(-time.Hour)}}}
	out = revEmail(p, "alovelace@acme.com", Hints{})
	if out.Err == nil || out.Err.Code != CodeNotFound {
		t.Fatalf("alovelace: got %+v, want not_found: Ada is held but the search did not list her", out)
	}
	p.Held = revHeld{staff: []HeldPerson{{Person: ada, LastEnriched: now.Add(-time.Hour)}, {Person: alan, LastEnriched: now.Add(-time.Hour)}}}
	out = revEmail(p, "alovelace@acme.com", Hints{FullName: "Ada Lovelace"})
	if out.Err == nil || out.Err.Code != CodeAmbiguous || *out.Err.Candidates != 2 || len(out.Err.HintsAccepted) != 0 || out.Gathered != nil {
		t.Fatalf("alovelace: got %+v, want ambiguous with no hint accepted: others may be unseen", out)
	}
}

// Without a source that can search staff nobody is seen: a person held never decides
// an address alone.
func TestWithoutAStaffSearchThePeopleHeldNeverDecideAlone(t *testing.T) {
	now := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	john := revPerson("john-smith", "John", "Smith", "Sales", "London", "GB", "", false)
	net := profilesOnly{revNet{company: revCompany(), people: map[string]*Person{*john.NetworkURL: john}}}
	if _, ok := any(net).(StaffSearcher); ok {
		t.Fatal("profilesOnly must not search staff")
	}
	p := &Pipeline{Sources: []Source{net}, Now: func() time.Time { return now },
		Held: revHeld{staff: []HeldPerson{{Person: john, LastEnriched: now.Add(-time.Hour)}}}}
	out := revEmail(p, "jsmith@acme.com", Hints{})
	if out.Err == nil || out.Err.Code != CodeNotFound {
		t.Fatalf("got %+v, want not_found: John is held, but nobody else could be seen", out)
	}
	p.Held = revHeld{}
	out = p.ResolveEmail(context.Background(), &Task{}, Input{Lookup: LookupEmail, Target: "jsmith@acme.com"})
	if out.Err == nil || out.Err.Code != CodeNotFound {
		t.Fatalf("got %+v, want not_found", out)
	}
}
