package enrich

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// A staff search stops at the limit it is asked for, as every real one does. When it
// shows more people the address may stand for than one lookup retrieves, nobody can
// be confirmed, whether or not some of them are held: the answer must not depend on
// what was looked up before, and a person is never returned on a guess.
func TestAStaffSearchCutOffByTheBoundLeavesNoAnswerWhateverIsHeld(t *testing.T) {
	now := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	jane := revPerson("jane-smith", "Jane", "Smith", "Engineer", "Berlin", "DE", "", false)
	john := revPerson("john-smith", "John", "Smith", "Sales", "London", "GB", "", false)
	jack := revPerson("jack-smith", "Jack", "Smith", "Sales", "Paris", "FR", "", false)
	people := map[string]*Person{*jane.NetworkURL: jane, *john.NetworkURL: john, *jack.NetworkURL: jack}
	for _, limit := range []int{1, 2} {
		for _, held := range [][]*Person{nil, {john}, {jane, john, jack}} {
			var retrievals atomic.Int64
			net := revNet{company: revCompany(), people: people, retrievals: &retrievals}
			h := revHeld{}
			for _, p := range held {
				h.staff = append(h.staff, HeldPerson{Person: p, LastEnriched: now.Add(-time.Hour)})
			}
			p := &Pipeline{Sources: []Source{net}, Held: h, MaxRetrievals: limit, Now: func() time.Time { return now }}
			out := revEmail(p, "jsmith@acme.com", Hints{})
			if out.Err == nil || out.Err.Code != CodeNotFound {
				t.Errorf("limit %d, %d held: three Smiths fit jsmith, got %s (err %+v), want not_found", limit, len(held), who(out), out.Err)
			}
			if got := retrievals.Load(); got > int64(limit) {
				t.Errorf("limit %d, %d held: %d profiles retrieved", limit, len(held), got)
			}
		}
	}

	// With room for all three, they are all confirmed.
	p := &Pipeline{Sources: []Source{revNet{company: revCompany(), people: people}}, Held: revHeld{}, MaxRetrievals: 3}
	if out := revEmail(p, "jsmith@acme.com", Hints{}); out.Err == nil || out.Err.Code != CodeAmbiguous || *out.Err.Candidates != 3 {
		t.Fatalf("limit 3: got %+v, want ambiguous 3", out.Err)
	}
}

// The search shows a profile under an alias URL; the profile retrieved names its own
// URL, under which the person is also held. They are one person, not two.
func TestAPersonShownUnderAnotherURLIsCountedOnce(t *testing.T) {
	now := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	john := revPerson("john-smith", "John", "Smith", "Sales", "London", "GB", "", false)
	alias := "https://www.linkedin.com/in/jsmith-1234"
	net := revNet{company: revCompany(), people: map[string]*Person{*john.NetworkURL: john},
		alias: map[string]string{alias: *john.NetworkURL}, hidden: map[string]bool{*john.NetworkURL: true}}
	held := revHeld{staff: []HeldPerson{{Person: john, LastEnriched: now.Add(-time.Hour)}}}
	p := &Pipeline{Sources: []Source{net}, Held: held, Now: func() time.Time { return now }}
	out := revEmail(p, "jsmith@acme.com", Hints{})
	if out.Err != nil || *out.Result.Person.FullName != "John Smith" || out.Result.Person.EmailMatch.Method != MatchResolved {
		t.Fatalf("held John Smith, shown by the search under an alias: got %+v, want John Smith resolved", out.Err)
	}

	// Two sources, one showing the alias and the other the person's own URL.
	own := revNet{company: revCompany(), people: map[string]*Person{*john.NetworkURL: john}}
	p = &Pipeline{Sources: []Source{net, own}, Held: revHeld{}, Now: func() time.Time { return now }}
	out = revEmail(p, "jsmith@acme.com", Hints{})
	if out.Err != nil || *out.Result.Person.FullName != "John Smith" {
		t.Fatalf("John Smith shown under two URLs: got %+v, want John Smith", out.Err)
	}
}

// The search shows a name cut short ("Jonathan S."), which rules nobody out: the
// person, held under their whole name, still counts, so Jane Smith is not returned
// alone.
func TestAHeldPersonTheSearchShowsUnderAShortNameStillCounts(t *testing.T) {
	now := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	jane := revPerson("jane-smith", "Jane", "Smith", "Engineer", "Berlin", "DE", "", false)
	jon := revPerson("jonathan-smith", "Jonathan", "Smith", "Sales", "London", "GB", "", false)
	net := revNet{company: revCompany(), people: map[string]*Person{*jane.NetworkURL: jane, *jon.NetworkURL: jon},
		shownAs: map[string]string{*jon.NetworkURL: "Jonathan S."}}
	held := revHeld{staff: []HeldPerson{{Person: jon, LastEnriched: now.Add(-time.Hour)}}}
	p := &Pipeline{Sources: []Source{net}, Held: held, Now: func() time.Time { return now }}
	out := revEmail(p, "jsmith@acme.com", Hints{})
	if out.Err == nil || out.Err.Code != CodeAmbiguous || *out.Err.Candidates != 2 {
		t.Fatalf("jsmith fits Jane Smith and held Jonathan Smith: got %s (err %+v), want ambiguous 2", who(out), out.Err)
	}
}

// One lookup retrieves at most MaxRetrievals profiles in all: those the search shows
// and the stale people held it refreshes share the bound. A stale person held whom
// the bound leaves unrefreshed stays a candidate as held.
func TestOneLookupRetrievesAtMostTheBoundInAll(t *testing.T) {
	now := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	jane := revPerson("jane-smith", "Jane", "Smith", "Engineer", "Berlin", "DE", "", false)
	john := revPerson("john-smith", "John", "Smith", "Sales", "London", "GB", "", false)
	jim := revPerson("jim-smith", "Jim", "Smith", "Sales", "London", "GB", "", false)
	joe := revPerson("joe-smith", "Joe", "Smith", "Sales", "London", "GB", "", false)
	jill := revPerson("jill-smith", "Jill", "Smith", "Sales", "London", "GB", "", false)
	var retrievals atomic.Int64
	net := revNet{company: revCompany(), retrievals: &retrievals,
		people: map[string]*Person{*jane.NetworkURL: jane, *john.NetworkURL: john, *jim.NetworkURL: jim, *joe.NetworkURL: joe, *jill.NetworkURL: jill},
		hidden: map[string]bool{*jim.NetworkURL: true, *joe.NetworkURL: true, *jill.NetworkURL: true}}
	stale := now.Add(-40 * 24 * time.Hour)
	held := revHeld{staff: []HeldPerson{{Person: jim, LastEnriched: stale}, {Person: joe, LastEnriched: stale}, {Person: jill, LastEnriched: stale}}}
	p := &Pipeline{Sources: []Source{net}, Held: held, MaxRetrievals: 3, Now: func() time.Time { return now }}
	out := revEmail(p, "jsmith@acme.com", Hints{})
	if got := retrievals.Load(); got != 3 {
		t.Errorf("%d profiles retrieved, want 3 (the bound)", got)
	}
	if out.Err == nil || out.Err.Code != CodeAmbiguous || *out.Err.Candidates != 5 {
		t.Fatalf("got %+v, want ambiguous 5", out.Err)
	}
}

// who names the person an outcome returned, for messages.
func who(out EmailOutcome) string {
	if out.Result.Person == nil || out.Result.Person.FullName == nil {
		return "nobody"
	}
	return *out.Result.Person.FullName + " (" + out.Result.Person.EmailMatch.Method + ")"
}

// A name shown shortened ("Jonathan S.", or a first name alone) cannot rule the
// person out: their profile is read, so the answer is the same whether or not they
// were held before. Otherwise jsmith@ would be Jane's, charged, on a fresh store.
func TestAShortenedShownNameIsRetrievedWhetherHeldOrNot(t *testing.T) {
	for _, shown := range []string{"Jonathan S.", "Jonathan S", "Jonathan"} {
		jane := revPerson("jane-smith", "Jane", "Smith", "Engineer", "Berlin", "DE", "", false)
		jon := revPerson("jonathan-smith", "Jonathan", "Smith", "Sales", "London", "GB", "", false)
		net := revNet{company: revCompany(), people: map[string]*Person{*jane.NetworkURL: jane, *jon.NetworkURL: jon},
			shownAs: map[string]string{*jon.NetworkURL: shown}}
		p := &Pipeline{Sources: []Source{net}, Held: revHeld{}}
		out := revEmail(p, "jsmith@acme.com", Hints{})
		if out.Err == nil || out.Err.Code != CodeAmbiguous || *out.Err.Candidates != 2 {
			t.Errorf("shown as %q, nothing held: got %s (err %+v), want ambiguous 2", shown, who(out), out.Err)
		}
	}
}

// goneNet answers like revNet, but the profiles gone are not found any more, though
// its search still lists them.
type goneNet struct {
	revNet
	gone map[string]bool
}

func (n goneNet) PersonByURL(ctx context.Context, tally *Tally, u string) (*Person, error) {
	if n.gone[u] {
		if n.retrievals != nil {
			n.retrievals.Add(1)
		}
		return nil, ErrNotFound
	}
	return n.revNet.PersonByURL(ctx, tally, u)
}

// A profile the search lists but its source no longer has is nobody's answer, held
// or not: a stale copy held does not answer for it (which a fresh store would not
// do), and it is asked for once.
func TestAProfileGoneIsNoAnswerWhetherHeldOrNot(t *testing.T) {
	now := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	jane := revPerson("jane-smith", "Jane", "Smith", "Engineer", "Berlin", "DE", "", false)
	var retrievals atomic.Int64
	net := goneNet{revNet{company: revCompany(), people: map[string]*Person{*jane.NetworkURL: jane}, retrievals: &retrievals},
		map[string]bool{*jane.NetworkURL: true}}
	for _, held := range []revHeld{{}, {staff: []HeldPerson{{Person: jane, LastEnriched: now.Add(-40 * 24 * time.Hour)}}}} {
		retrievals.Store(0)
		p := &Pipeline{Sources: []Source{net}, Held: held, Now: func() time.Time { return now }}
		out := revEmail(p, "jane.smith@acme.com", Hints{})
		if out.Err == nil || out.Err.Code != CodeNotFound {
			t.Errorf("%d held: got %s (err %+v), want not_found", len(held.staff), who(out), out.Err)
		}
		if n := retrievals.Load(); n != 1 {
			t.Errorf("%d held: %d retrievals of the one profile, want 1", len(held.staff), n)
		}
	}
}
