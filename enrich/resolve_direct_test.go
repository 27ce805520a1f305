package enrich

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// searchCounter is a network whose staff search has a price and counts its calls.
type searchCounter struct {
	revNet
	price    Prices
	searches *atomic.Int64
}

func (n searchCounter) Name() string   { return "search" }
func (n searchCounter) Prices() Prices { return n.price }
func (n searchCounter) SearchStaff(ctx context.Context, tally *Tally, q StaffQuery) ([]StaffMember, error) {
	n.searches.Add(1)
	tally.Call()
	return n.revNet.SearchStaff(ctx, tally, q)
}

// emailVendor answers people by address only (a vendor's person match by email),
// counts what it is asked, and is asked nothing else.
type emailVendor struct {
	name    string
	byEmail map[string]*Person
	down    bool
	price   Prices
	asked   *atomic.Int64
}

func (v emailVendor) Name() string   { return v.name }
func (v emailVendor) Prices() Prices { return v.price }
func (v emailVendor) CompanyByDomain(context.Context, *Tally, string) (*Company, error) {
	return nil, ErrNotFound
}
func (v emailVendor) CompanyByURL(context.Context, *Tally, string) (*Company, error) {
	return nil, ErrNotFound
}
func (v emailVendor) PersonByURL(context.Context, *Tally, string) (*Person, error) {
	return nil, ErrNotFound
}
func (v emailVendor) PersonByEmail(_ context.Context, _ *Tally, address string) (*Person, error) {
	v.asked.Add(1)
	if v.down {
		return nil, fmt.Errorf("%s: %w", v.name, ErrUnavailable)
	}
	p, ok := v.byEmail[address]
	if !ok {
		return nil, ErrNotFound
	}
	c := *p
	return &c, nil
}

var _ EmailMatcher = emailVendor{}

func otherCompanyPerson(slug, first, last string) *Person {
	p := revPerson(slug, first, last, "Engineer", "Berlin", "DE", "", false)
	p.Positions[0].CompanyName = Ptr("Globex")
	p.Positions[0].CompanyNetworkURL = Ptr("https://www.linkedin.com/company/globex")
	return p
}

// directCase is a pipeline of a priced staff search over people and a direct email
// vendor answering with answer for every address.
type directCase struct {
	p                *Pipeline
	searches, direct *atomic.Int64
}

func newDirectCase(people []*Person, answer *Person, searchPrice, matchPrice int64, address string) directCase {
	c := directCase{searches: &atomic.Int64{}, direct: &atomic.Int64{}}
	byURL := map[string]*Person{}
	for _, p := range people {
		byURL[*p.NetworkURL] = p
	}
	net := searchCounter{revNet: revNet{company: revCompany(), people: byURL}, price: Prices{StaffSearch: searchPrice}, searches: c.searches}
	byEmail := map[string]*Person{}
	if answer != nil {
		byEmail[address] = answer
	}
	vendor := emailVendor{name: "vendor", byEmail: byEmail, price: Prices{EmailMatch: matchPrice}, asked: c.direct}
	c.p = &Pipeline{Sources: []Source{net, vendor}, Held: revHeld{}}
	return c
}

// A direct answer that confirms (a current position at the company, a name the
// address fits) answers the lookup: resolved, naming its source, with no staff
// search made.
func TestADirectEmailMatchThatConfirmsAnswersWithoutAStaffSearch(t *testing.T) {
	john := revPerson("john-smith", "John", "Smith", "Sales", "London", "GB", "", false)
	jane := revPerson("jane-smith", "Jane", "Smith", "Engineer", "Berlin", "DE", "", false)
	c := newDirectCase([]*Person{john, jane}, john, 10, 1, "john.smith@acme.com")
	out := revEmail(c.p, "john.smith@acme.com", Hints{})
	if out.Err != nil || *out.Result.Person.FullName != "John Smith" {
		t.Fatalf("got %s (err %+v), want John Smith", who(out), out.Err)
	}
	m := out.Result.Person.EmailMatch
	if m.Method != MatchResolved || *m.Pattern != "first.last" || m.Source == nil || *m.Source != "vendor" {
		t.Fatalf("email_match %+v, want resolved first.last from vendor", m)
	}
	if c.searches.Load() != 0 || c.direct.Load() != 1 {
		t.Fatalf("%d staff searches and %d direct matches, want 0 and 1", c.searches.Load(), c.direct.Load())
	}
}

// A direct answer is a candidate, never the answer by itself: someone who does not
// hold a current position at the company behind the domain, or whose name the
// address does not fit, is dropped, and the staff search decides as it would have.
func TestADirectEmailMatchThatFailsConfirmationIsDropped(t *testing.T) {
	john := revPerson("john-smith", "John", "Smith", "Sales", "London", "GB", "", false)
	for _, tc := range []struct {
		name   string
		answer *Person
		staff  []*Person
		want   string // the person returned, or the error code
	}{
		{"at another company", otherCompanyPerson("john-smith-globex", "John", "Smith"), nil, CodeNotFound},
		{"a former employee", revPerson("john-smith-2", "John", "Smith", "Sales", "Paris", "FR", "", true), nil, CodeNotFound},
		{"a name the address does not fit", revPerson("mary-jones", "Mary", "Jones", "CEO", "Paris", "FR", "", false), nil, CodeNotFound},
		{"someone else; the search finds the owner", revPerson("mary-jones", "Mary", "Jones", "CEO", "Paris", "FR", "", false), []*Person{john}, "John Smith"},
		{"someone at another company; the search finds the owner", otherCompanyPerson("john-smith-globex", "John", "Smith"), []*Person{john}, "John Smith"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newDirectCase(tc.staff, tc.answer, 10, 1, "john.smith@acme.com")
			out := revEmail(c.p, "john.smith@acme.com", Hints{})
			got := ""
			switch {
			case out.Err != nil:
				got = out.Err.Code
			default:
				got = *out.Result.Person.FullName
				if *out.Result.Person.NetworkURL != *john.NetworkURL {
					t.Fatalf("returned %s", *out.Result.Person.NetworkURL)
				}
				if s := out.Result.Person.EmailMatch.Source; s == nil || *s != "search" {
					t.Errorf("email_match.source %v, want the search's source", s)
				}
			}
			if got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
			if c.direct.Load() != 1 || c.searches.Load() != 1 {
				t.Fatalf("%d direct matches and %d staff searches, want 1 and 1", c.direct.Load(), c.searches.Load())
			}
		})
	}
}

// The direct match is asked before the staff search when it costs no more than the
// search (a hit of the search must still be retrieved; a direct answer is the
// profile): at a higher price it is not asked while the search confirms someone, and
// is asked after a search that confirmed nobody.
func TestADirectEmailMatchIsAskedFirstOnlyWhenItCostsNoMoreThanTheSearch(t *testing.T) {
	john := revPerson("john-smith", "John", "Smith", "Sales", "London", "GB", "", false)
	for _, tc := range []struct {
		search, match int64
		first         bool
	}{
		{10, 1, true}, {1, 1, true}, {0, 0, true}, {0, 1, false}, {1, 3, false},
	} {
		c := newDirectCase([]*Person{john}, john, tc.search, tc.match, "john.smith@acme.com")
		out := revEmail(c.p, "john.smith@acme.com", Hints{})
		if out.Err != nil || *out.Result.Person.FullName != "John Smith" {
			t.Fatalf("search %d, match %d: got %s (err %+v)", tc.search, tc.match, who(out), out.Err)
		}
		source := *out.Result.Person.EmailMatch.Source
		if tc.first && (c.direct.Load() != 1 || c.searches.Load() != 0 || source != "vendor") {
			t.Errorf("search %d, match %d: %d direct, %d searches, source %s; want the direct match alone",
				tc.search, tc.match, c.direct.Load(), c.searches.Load(), source)
		}
		if !tc.first && (c.direct.Load() != 0 || c.searches.Load() != 1 || source != "search") {
			t.Errorf("search %d, match %d: %d direct, %d searches, source %s; want the search alone",
				tc.search, tc.match, c.direct.Load(), c.searches.Load(), source)
		}
	}

	// The search, cheaper, confirms nobody: the direct match is asked after it.
	c := newDirectCase(nil, john, 0, 1, "john.smith@acme.com")
	out := revEmail(c.p, "john.smith@acme.com", Hints{})
	if out.Err != nil || *out.Result.Person.EmailMatch.Source != "vendor" || c.searches.Load() != 1 || c.direct.Load() != 1 {
		t.Fatalf("got %s (err %+v), %d searches, %d direct; want John Smith from the vendor after one search", who(out), out.Err, c.searches.Load(), c.direct.Load())
	}

	// Without any source that can search staff, the direct match is asked whatever it
	// costs.
	asked := &atomic.Int64{}
	vendor := emailVendor{name: "vendor", byEmail: map[string]*Person{"john.smith@acme.com": john}, price: Prices{EmailMatch: 100}, asked: asked}
	p := &Pipeline{Sources: []Source{profilesOnly{net: revNet{company: revCompany()}}, vendor}, Held: revHeld{}}
	if out := revEmail(p, "john.smith@acme.com", Hints{}); out.Err != nil || asked.Load() != 1 {
		t.Fatalf("no staff search: got %s (err %+v), %d direct matches", who(out), out.Err, asked.Load())
	}
}

// Direct matches asked before the search cost, together, no more than it: a second
// vendor that would take the total past the search's price waits for it.
func TestDirectEmailMatchesAskedFirstCostNoMoreThanTheSearchTogether(t *testing.T) {
	john := revPerson("john-smith", "John", "Smith", "Sales", "London", "GB", "", false)
	searches := &atomic.Int64{}
	net := searchCounter{revNet: revNet{company: revCompany(), people: map[string]*Person{}}, price: Prices{StaffSearch: 10}, searches: searches}
	a, b := &atomic.Int64{}, &atomic.Int64{}
	first := emailVendor{name: "first", byEmail: map[string]*Person{}, price: Prices{EmailMatch: 6}, asked: a}
	second := emailVendor{name: "second", byEmail: map[string]*Person{"john.smith@acme.com": john}, price: Prices{EmailMatch: 6}, asked: b}
	p := &Pipeline{Sources: []Source{net, first, second}, Held: revHeld{}}
	out := revEmail(p, "john.smith@acme.com", Hints{})
	if out.Err != nil || *out.Result.Person.EmailMatch.Source != "second" {
		t.Fatalf("got %s (err %+v), want John Smith from second", who(out), out.Err)
	}
	if a.Load() != 1 || searches.Load() != 1 || b.Load() != 1 {
		t.Fatalf("asked first %d, searched %d, asked second %d times; want 1 each, in that order", a.Load(), searches.Load(), b.Load())
	}
}

// A direct match that cannot be made leaves the lookup to the staff search.
func TestADirectEmailMatchThatFailsLeavesTheLookupToTheSearch(t *testing.T) {
	john := revPerson("john-smith", "John", "Smith", "Sales", "London", "GB", "", false)
	c := newDirectCase([]*Person{john}, john, 10, 1, "john.smith@acme.com")
	vendor := c.p.Sources[1].(emailVendor)
	vendor.down = true
	c.p.Sources[1] = vendor
	out := revEmail(c.p, "john.smith@acme.com", Hints{})
	if out.Err != nil || *out.Result.Person.EmailMatch.Source != "search" || c.searches.Load() != 1 {
		t.Fatalf("got %s (err %+v), %d searches; want John Smith from the search", who(out), out.Err, c.searches.Load())
	}
}

// Held data keeps its rules: an address on record is exact, and a retry decided
// against what was gathered asks nothing; neither asks a direct match.
func TestHeldDataIsServedWithoutADirectEmailMatch(t *testing.T) {
	now := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	john := revPerson("john-smith", "John", "Smith", "Sales", "London", "GB", "", false)
	c := newDirectCase([]*Person{john}, john, 10, 1, "john.smith@acme.com")
	c.p.Now = func() time.Time { return now }
	c.p.Held = revHeld{byEmail: &HeldPerson{Person: john, LastEnriched: now.Add(-time.Hour)}}
	out := revEmail(c.p, "john.smith@acme.com", Hints{})
	if out.Err != nil || out.Result.Person.EmailMatch.Method != MatchExact || out.Result.Person.EmailMatch.Source != nil {
		t.Fatalf("got %s (err %+v), want John Smith exact, no source", who(out), out.Err)
	}
	if c.direct.Load() != 0 || c.searches.Load() != 0 {
		t.Fatalf("%d direct matches and %d searches for an address on record", c.direct.Load(), c.searches.Load())
	}

	jane := revPerson("jane-smith", "Jane", "Smith", "Engineer", "Berlin", "DE", "", false)
	c = newDirectCase(nil, john, 10, 1, "jsmith@acme.com")
	c.p.Held = gatheredHeld{revHeld: revHeld{}, g: &Gathering{Address: "jsmith@acme.com", Company: revCompany(), GatheredAt: now,
		Candidates: []Candidate{{Person: john, Method: MatchResolved, Pattern: "flast", Source: "search"}, {Person: jane, Method: MatchResolved, Pattern: "flast"}}}}
	out = revEmail(c.p, "jsmith@acme.com", Hints{FullName: "John Smith"})
	if out.Err != nil || *out.Result.Person.FullName != "John Smith" || *out.Result.Person.EmailMatch.Source != "search" {
		t.Fatalf("got %s (err %+v), want John Smith picked among those gathered, found by the search", who(out), out.Err)
	}
	if c.direct.Load() != 0 || c.searches.Load() != 0 {
		t.Fatalf("%d direct matches and %d searches for a retry against what was gathered", c.direct.Load(), c.searches.Load())
	}
}

type gatheredHeld struct {
	revHeld
	g *Gathering
}

func (h gatheredHeld) Gathering(context.Context, string, time.Time) (*Gathering, error) {
	return h.g, nil
}

// A direct match that could not be made, where the search confirmed nobody, leaves
// the lookup provider_unavailable, not not_found: a retry may find the person.
func TestADirectEmailMatchThatFailsWhereTheSearchFindsNobodyIsUnavailable(t *testing.T) {
	c := newDirectCase(nil, nil, 10, 1, "john.smith@acme.com")
	vendor := c.p.Sources[1].(emailVendor)
	vendor.down = true
	c.p.Sources[1] = vendor
	out := revEmail(c.p, "john.smith@acme.com", Hints{})
	if out.Err == nil || out.Err.Code != CodeProviderUnavailable {
		t.Fatalf("got %s (err %+v), want provider_unavailable", who(out), out.Err)
	}

	// The vendor up and knowing nobody: not_found.
	c = newDirectCase(nil, nil, 10, 1, "john.smith@acme.com")
	if out := revEmail(c.p, "john.smith@acme.com", Hints{}); out.Err == nil || out.Err.Code != CodeNotFound {
		t.Fatalf("got %s (err %+v), want not_found", who(out), out.Err)
	}
}

// A cheaper search that could not be made leaves the direct match to answer.
func TestADirectEmailMatchAnswersWhereACheaperSearchFailed(t *testing.T) {
	john := revPerson("john-smith", "John", "Smith", "Sales", "London", "GB", "", false)
	jane := revPerson("jane-smith", "Jane", "Smith", "Engineer", "Berlin", "DE", "", false)
	c := newDirectCase([]*Person{john, jane}, john, 0, 1, "john.smith@acme.com")
	net := c.p.Sources[0].(searchCounter)
	net.down = map[string]bool{*john.NetworkURL: true} // the profile the search lists cannot be read
	c.p.Sources[0] = net
	out := revEmail(c.p, "john.smith@acme.com", Hints{})
	if out.Err != nil || *out.Result.Person.EmailMatch.Source != "vendor" || c.searches.Load() != 1 || c.direct.Load() != 1 {
		t.Fatalf("got %s (err %+v), %d searches, %d direct; want John Smith from the vendor after the search", who(out), out.Err, c.searches.Load(), c.direct.Load())
	}
}

// A direct match is part of the task's trace as any source asked is: a confirmed
// answer a hit whose fields come from it, a dropped one a miss for another subject.
func TestADirectEmailMatchIsInTheTasksTrace(t *testing.T) {
	john := revPerson("john-smith", "John", "Smith", "Sales", "London", "GB", "", false)
	mary := revPerson("mary-jones", "Mary", "Jones", "CEO", "Paris", "FR", "", false)
	for _, tc := range []struct {
		answer  *Person
		outcome string
	}{{john, OutcomeHit + "/"}, {mary, OutcomeMiss + "/" + ReasonOtherSubject}} {
		c := newDirectCase(nil, tc.answer, 10, 1, "john.smith@acme.com")
		task := &Task{Org: "acme"}
		out := c.p.ResolveEmail(context.Background(), task, Input{Lookup: LookupEmail, Target: "john.smith@acme.com"})
		tr := task.Trace(out.Result)
		got := "not asked"
		for _, s := range tr.Sources {
			if s.Name == "vendor" {
				got = s.Outcome + "/" + s.Reason
			}
		}
		if got != tc.outcome {
			t.Errorf("answer %s: the vendor's part is %s, want %s", *tc.answer.FullName, got, tc.outcome)
		}
		if tc.answer == john && (tr.Provenance["full_name"] != "vendor" || tr.Provenance["positions"] != "vendor") {
			t.Errorf("provenance %v, want the vendor's fields", tr.Provenance)
		}
	}
}

// refusingSpend holds every source named in over to its spent budget, and keeps what
// the others were asked.
type refusingSpend struct {
	over  map[string]bool
	spent *[]SourceCall
}

func (s refusingSpend) Admit(_ context.Context, _, src string, _ bool) (*Booking, string) {
	if s.over[src] {
		return nil, ReasonBudget
	}
	return nil, ""
}
func (s refusingSpend) Book(context.Context, *Booking, int64, int64) error { return nil }
func (s refusingSpend) Spent(_ context.Context, _ string, call SourceCall, _ *Booking) {
	*s.spent = append(*s.spent, call)
}

// A direct match is held to the organization's budget as any source is: over it, the
// vendor is not asked and the search decides; within it, the ask is spent.
func TestADirectEmailMatchKeepsToTheBudget(t *testing.T) {
	john := revPerson("john-smith", "John", "Smith", "Sales", "London", "GB", "", false)
	for _, over := range []bool{true, false} {
		var spent []SourceCall
		c := newDirectCase([]*Person{john}, john, 10, 1, "john.smith@acme.com")
		c.p.Spend = refusingSpend{over: map[string]bool{"vendor": over}, spent: &spent}
		out := revEmail(c.p, "john.smith@acme.com", Hints{})
		if out.Err != nil {
			t.Fatalf("over %v: %+v", over, out.Err)
		}
		want, asked := "search", int64(0)
		if !over {
			want, asked = "vendor", 1
		}
		if *out.Result.Person.EmailMatch.Source != want || c.direct.Load() != asked {
			t.Errorf("over budget %v: found by %s, vendor asked %d times; want %s, %d", over, *out.Result.Person.EmailMatch.Source, c.direct.Load(), want, asked)
		}
		vendorSpent := 0
		for _, call := range spent {
			if call.Name == "vendor" {
				vendorSpent++
			}
		}
		if vendorSpent != int(asked) {
			t.Errorf("over budget %v: the vendor's asks spent %d times, want %d", over, vendorSpent, asked)
		}
	}
}

// ownKeys gives every source the organization's own key.
type ownKeys struct{}

func (ownKeys) For(_ context.Context, _ string, src Source) (Source, bool, string) {
	return src, true, ""
}

// A staff search is one of the sources' asks of an email lookup: it is in the task's
// trace, and it is spent on the key it went out with, the organization's own here.
func TestAStaffSearchIsInTheTasksTraceAndSpentOnItsKey(t *testing.T) {
	john := revPerson("john-smith", "John", "Smith", "Sales", "London", "GB", "", false)
	var spent []SourceCall
	c := newDirectCase([]*Person{john}, nil, 1, 10, "john.smith@acme.com")
	c.p.Spend = refusingSpend{spent: &spent}
	c.p.Keys = ownKeys{}
	task := &Task{Org: "acme"}
	out := c.p.ResolveEmail(context.Background(), task, Input{Lookup: LookupEmail, Target: "john.smith@acme.com"})
	if out.Err != nil {
		t.Fatalf("%+v", out.Err)
	}
	if c.searches.Load() != 1 {
		t.Fatalf("searched %d times, want 1", c.searches.Load())
	}
	var traced *SourceCall
	tr := task.Trace(out.Result)
	for i, s := range tr.Sources {
		if s.Name == "search" {
			traced = &tr.Sources[i]
		}
	}
	if traced == nil || traced.Outcome != OutcomeHit || traced.VendorCalls != 1 {
		t.Errorf("the search's part in the trace is %+v, want a hit with its one vendor call", traced)
	}
	for _, call := range spent {
		if call.Name == "search" && !call.OwnKey {
			t.Errorf("the search was spent on the installation's key: %+v", call)
		}
	}
}

// What an ambiguous lookup gathered is read for KeepGathered only: within it a retry
// with a hint is decided against the people gathered; past it, though the gathering
// is still held, the retry searches again, as a first lookup does.
func TestAGatheringIsReadForKeepGatheredOnly(t *testing.T) {
	john := revPerson("john-smith", "John", "Smith", "Sales", "London", "GB", "", false)
	jane := revPerson("jane-smith", "Jane", "Smith", "Engineer", "Berlin", "DE", "", false)
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		age      time.Duration
		searches int64
	}{{6 * 24 * time.Hour, 0}, {8 * 24 * time.Hour, 1}} {
		c := newDirectCase([]*Person{john, jane}, nil, 10, 1, "jsmith@acme.com")
		c.p.Now = func() time.Time { return now }
		c.p.KeepGathered = 7 * 24 * time.Hour
		c.p.Held = windowHeld{gatheredHeld{g: &Gathering{Address: "jsmith@acme.com", Company: revCompany(), GatheredAt: now.Add(-tt.age),
			Candidates: []Candidate{{Person: john, Method: MatchResolved, Pattern: "flast"}, {Person: jane, Method: MatchResolved, Pattern: "flast"}}}}}
		out := revEmail(c.p, "jsmith@acme.com", Hints{FullName: "John Smith"})
		if out.Err != nil || *out.Result.Person.FullName != "John Smith" || c.searches.Load() != tt.searches {
			t.Errorf("gathered %s ago: got %s (err %+v) after %d searches, want John Smith after %d", tt.age, who(out), out.Err, c.searches.Load(), tt.searches)
		}
	}
}

// windowHeld holds a gathering and answers it only to a read since before it was made.
type windowHeld struct{ gatheredHeld }

func (h windowHeld) Gathering(_ context.Context, _ string, since time.Time) (*Gathering, error) {
	if h.g.GatheredAt.Before(since) {
		return nil, nil
	}
	return h.g, nil
}
