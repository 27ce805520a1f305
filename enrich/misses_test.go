package enrich_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"enrichd/enrich"
	"enrichd/enrich/enrichtest"
)

// priced is a test source that states vendor prices: its misses are remembered.
type priced struct{ enrichtest.Source }

func (priced) Prices() enrich.Prices { return enrich.Prices{} }

// memMisses is an enrich.Misses in memory, on a clock the test moves.
type memMisses struct {
	mu        sync.Mutex
	now       time.Time
	at        map[string]time.Time // "subject source scope"
	forgotten []string             // "source subject"
	reads     int
}

func newMemMisses(now time.Time) *memMisses {
	return &memMisses{now: now, at: map[string]time.Time{}}
}

func subjectOf(in enrich.Input) string { return string(in.Lookup) + ":" + in.Target }

func (m *memMisses) Of(_ context.Context, in enrich.Input, since time.Time) map[string][]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	out := map[string][]string{}
	for k, at := range m.at {
		var subject, source, scope string
		fmt.Sscanf(k, "%s %s %s", &subject, &source, &scope)
		if subject == subjectOf(in) && !at.Before(since) {
			out[source] = append(out[source], scopeOf(scope))
		}
	}
	return out
}

func key(in enrich.Input, source, scope string) string {
	if scope == "" {
		scope = "*"
	}
	return subjectOf(in) + " " + source + " " + scope
}

func scopeOf(s string) string {
	if s == "*" {
		return ""
	}
	return s
}

func (m *memMisses) Remember(_ context.Context, in enrich.Input, source, scope string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.at[key(in, source, scope)] = m.now
}

func (m *memMisses) Forget(_ context.Context, in enrich.Input, source string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forgotten = append(m.forgotten, source+" "+subjectOf(in))
	for k := range m.at {
		var subject, src string
		fmt.Sscanf(k, "%s %s", &subject, &src)
		if subject == subjectOf(in) && src == source {
			delete(m.at, k)
		}
	}
}

// remembered lists the misses held, sorted.
func (m *memMisses) remembered() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []string{}
	for k := range m.at {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

var nobody = enrich.Input{Lookup: enrich.LookupDomain, Target: "nobody.example"}

// A priced source that did not know the subject is not asked for it again within the
// freshness window: it is listed skipped, known_miss, and the lookup fails not_found
// as a miss does. A source that costs nothing is asked every time. Past the window,
// the priced source is asked again.
func TestLookupSkipsAKnownMiss(t *testing.T) {
	is := is.New(t)
	var asked []string
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	misses := newMemMisses(now)
	p := &enrich.Pipeline{
		Sources: []enrich.Source{
			enrichtest.Source{SourceName: "dataset", Err: enrich.ErrNotFound, Asked: &asked},
			priced{enrichtest.Source{SourceName: "a", Err: enrich.ErrNotFound, Asked: &asked}},
			priced{enrichtest.Source{SourceName: "b", Err: fmt.Errorf("b: %w", enrich.ErrNotFound), Asked: &asked}},
		},
		Misses: misses,
		Now:    func() time.Time { return misses.now },
	}
	lookup := func() ([]string, *enrich.TaskError) {
		_, tr, terr := p.Lookup(context.Background(), &enrich.Task{Org: "org-1"}, nobody)
		return outcomes(tr.Sources), terr
	}

	got, terr := lookup()
	is.Equal(terr.Code, enrich.CodeNotFound)
	is.Equal(got, []string{"dataset miss 1", "a miss 1", "b miss 1"})
	is.Equal(misses.remembered(), []string{"domain:nobody.example a *", "domain:nobody.example b *"}) // not the dataset's

	asked = nil
	misses.now = misses.now.Add(30*24*time.Hour - time.Millisecond)
	got, terr = lookup()
	is.Equal(terr.Code, enrich.CodeNotFound) // every source missed or is a known miss: not found
	is.Equal(got, []string{"dataset miss 1", "a skipped/known_miss 0", "b skipped/known_miss 0"})
	is.Equal(asked, []string{"dataset nobody.example"}) // neither vendor is asked, nor paid

	// Another subject is another question.
	asked = nil
	_, _, _ = p.Lookup(context.Background(), &enrich.Task{Org: "org-1"}, enrich.Input{Lookup: enrich.LookupCompanyURL, Target: "nobody.example"})
	is.Equal(len(asked), 3)

	// Past the window, the vendors are asked again.
	asked = nil
	misses.now = misses.now.Add(2 * time.Millisecond)
	got, _ = lookup()
	is.Equal(got, []string{"dataset miss 1", "a miss 1", "b miss 1"})
}

// Only a miss that went upstream is remembered: not an error, a budget or key skip,
// an answer about another subject, nor a miss that sent nothing.
func TestLookupRemembersOnlyRealMisses(t *testing.T) {
	is := is.New(t)
	var asked []string
	misses := newMemMisses(time.Now())
	first := company("Acme", "acme.com", acmePage)
	p := &enrich.Pipeline{
		Sources: []enrich.Source{
			priced{enrichtest.Source{SourceName: "first", Company: first, Asked: &asked}},
			priced{enrichtest.Source{SourceName: "other", Company: company("Other", "other.com", "https://www.linkedin.com/company/other"), Asked: &asked}},
			priced{enrichtest.Source{SourceName: "down", Err: fmt.Errorf("down: %w", enrich.ErrUnavailable), Asked: &asked}},
			priced{enrichtest.Source{SourceName: "broke", Err: enrich.ErrNotFound, Asked: &asked}},
			priced{enrichtest.Source{SourceName: "keyless", Err: enrich.ErrNotFound, Asked: &asked}},
			noCall{SourceName: "sent-nothing"},
		},
		Spend:  &budgets{allow: map[string]bool{"first": true, "other": true, "down": true, "keyless": true, "sent-nothing": true}},
		Keys:   keys{failing: map[string]bool{"keyless": true}},
		Misses: misses,
	}
	_, tr, terr := p.Lookup(context.Background(), &enrich.Task{Org: "org-1", Fill: []string{"slogan"}}, enrich.Input{Lookup: enrich.LookupDomain, Target: "acme.com"})
	is.True(terr == nil)
	is.Equal(outcomes(tr.Sources), []string{"first hit 1", "other miss/other_subject 1", "down error 1",
		"broke skipped/budget 0", "keyless skipped/key_failing 0", "sent-nothing miss 0"})
	is.Equal(misses.remembered(), []string{})
}

// noCall is a priced source that answers not found without asking upstream (a lookup
// its vendor cannot take).
type noCall struct{ SourceName string }

func (n noCall) Name() string        { return n.SourceName }
func (noCall) Prices() enrich.Prices { return enrich.Prices{} }
func (noCall) CompanyByDomain(context.Context, *enrich.Tally, string) (*enrich.Company, error) {
	return nil, enrich.ErrNotFound
}
func (noCall) CompanyByURL(context.Context, *enrich.Tally, string) (*enrich.Company, error) {
	return nil, enrich.ErrNotFound
}
func (noCall) PersonByURL(context.Context, *enrich.Tally, string) (*enrich.Person, error) {
	return nil, enrich.ErrNotFound
}

// A miss found with an organization's own key is that organization's: another
// organization still asks the source. One found with the installation's key counts
// for every organization, whichever key it asks with.
func TestLookupKnownMissScopes(t *testing.T) {
	is := is.New(t)
	var asked []string
	misses := newMemMisses(time.Now())
	installation := priced{enrichtest.Source{SourceName: "a", Err: enrich.ErrNotFound, Asked: &asked}}
	own := priced{enrichtest.Source{SourceName: "a", Err: enrich.ErrNotFound, Asked: &asked}}
	p := &enrich.Pipeline{
		Sources: []enrich.Source{installation},
		Keys:    orgKeys{"org-own": own, "org-other-own": own},
		Misses:  misses,
	}
	lookup := func(org string, in enrich.Input) []string {
		_, tr, _ := p.Lookup(context.Background(), &enrich.Task{Org: org}, in)
		return outcomes(tr.Sources)
	}

	is.Equal(lookup("org-own", nobody), []string{"a miss 1"})
	is.Equal(misses.remembered(), []string{"domain:nobody.example a org-own"})
	is.Equal(lookup("org-own", nobody), []string{"a skipped/known_miss 0"})       // its own
	is.Equal(lookup("org-other-own", nobody), []string{"a miss 1"})               // not another's, with its own key
	is.Equal(lookup("org-shared", nobody), []string{"a miss 1"})                  // nor with the installation's
	is.Equal(lookup("org-other-own", nobody), []string{"a skipped/known_miss 0"}) // the shared one now counts for it too
	is.Equal(misses.remembered(), []string{"domain:nobody.example a *", "domain:nobody.example a org-other-own", "domain:nobody.example a org-own"})
}

type orgKeys map[string]enrich.Source

func (k orgKeys) For(_ context.Context, org string, src enrich.Source) (enrich.Source, bool, string) {
	if s, ok := k[org]; ok {
		return s, true, ""
	}
	return src, false, ""
}

// A source that answers for the subject deletes its misses of it, in every scope. A
// watch's check (Fresh) asks a source remembered not to know the subject all the same.
func TestLookupAnswerSupersedesAMiss(t *testing.T) {
	is := is.New(t)
	var asked []string
	misses := newMemMisses(time.Now())
	misses.Remember(context.Background(), nobody, "a", "org-9") // another organization's, with its own key
	misses.Remember(context.Background(), nobody, "b", "")
	b := priced{enrichtest.Source{SourceName: "b", Company: company("Nobody", "nobody.example", ""), Asked: &asked}}
	p := &enrich.Pipeline{
		Sources: []enrich.Source{
			priced{enrichtest.Source{SourceName: "a", Company: company("Nobody", "nobody.example", ""), Asked: &asked}},
			b,
		},
		Misses: misses,
	}
	_, tr, terr := p.Lookup(context.Background(), &enrich.Task{Org: "org-1", Fill: []string{"slogan"}}, nobody)
	is.True(terr == nil)
	is.Equal(outcomes(tr.Sources), []string{"a hit 1", "b skipped/known_miss 0"})
	is.Equal(misses.forgotten, []string{"a domain:nobody.example"}) // a knows it now, for org-9 too
	is.Equal(misses.remembered(), []string{"domain:nobody.example b *"})

	fresh := *p
	fresh.Fresh = true
	_, tr, _ = fresh.Lookup(context.Background(), &enrich.Task{Org: "org-1", Fill: []string{"slogan"}}, nobody)
	is.Equal(outcomes(tr.Sources), []string{"a hit 1", "b miss/nothing_new 1"})
	is.Equal(misses.remembered(), []string{}) // b answered for it: its miss goes
}

// site is a source that asks another for the company page its site links to, as the
// web source does, through AskWithin.
type site struct {
	network enrich.Source
	page    string
}

func (s site) Name() string { return "site" }
func (s site) CompanyByDomain(ctx context.Context, tally *enrich.Tally, domain string) (*enrich.Company, error) {
	c := company("Nobody", domain, s.page)
	if nc, err := enrich.AskWithin(ctx, tally, s.network, enrich.Input{Lookup: enrich.LookupCompanyURL, Target: s.page},
		func(ctx context.Context, tally *enrich.Tally) (*enrich.Company, error) {
			return s.network.CompanyByURL(ctx, tally, s.page)
		}); err == nil {
		c.Slogan = nc.Slogan
	}
	return c, nil
}
func (site) CompanyByURL(context.Context, *enrich.Tally, string) (*enrich.Company, error) {
	return nil, enrich.ErrNotFound
}
func (site) PersonByURL(context.Context, *enrich.Tally, string) (*enrich.Person, error) {
	return nil, enrich.ErrNotFound
}

// A source another asks from inside its own ask is remembered not to know the page
// it was asked for, and not asked for it again, as in its own turn.
func TestAskWithinSkipsAKnownMiss(t *testing.T) {
	is := is.New(t)
	var asked []string
	misses := newMemMisses(time.Now())
	vendor := priced{enrichtest.Source{SourceName: "a", Err: enrich.ErrNotFound, Asked: &asked}}
	page := "https://www.linkedin.com/company/nobody"
	p := &enrich.Pipeline{Sources: []enrich.Source{site{network: vendor, page: page}}, Misses: misses}

	_, tr, terr := p.Lookup(context.Background(), &enrich.Task{Org: "org-1"}, nobody)
	is.True(terr == nil)
	is.Equal(outcomes(tr.Sources), []string{"site hit 0", "a miss 1"})
	is.Equal(misses.remembered(), []string{"company_url:" + page + " a *"})

	asked = nil
	_, tr, _ = p.Lookup(context.Background(), &enrich.Task{Org: "org-1"}, nobody)
	is.Equal(outcomes(tr.Sources), []string{"site hit 0", "a skipped/known_miss 0"})
	is.Equal(len(asked), 0)
}

// The misses are read once a lookup, when a priced source is first about to be asked:
// not at all when a free source answers alone.
func TestLookupReadsMissesOncePricedSourceIsDue(t *testing.T) {
	is := is.New(t)
	var asked []string
	misses := newMemMisses(time.Now())
	p := &enrich.Pipeline{
		Sources: []enrich.Source{
			enrichtest.Source{SourceName: "dataset", Company: company("Acme", "acme.com", ""), Asked: &asked},
			priced{enrichtest.Source{SourceName: "a", Err: enrich.ErrNotFound, Asked: &asked}},
			priced{enrichtest.Source{SourceName: "b", Err: enrich.ErrNotFound, Asked: &asked}},
		},
		Misses: misses,
	}
	acme := enrich.Input{Lookup: enrich.LookupDomain, Target: "acme.com"}
	_, _, terr := p.Lookup(context.Background(), &enrich.Task{Org: "org-1"}, acme)
	is.True(terr == nil)
	is.Equal(misses.reads, 0) // the dataset answered, first hit wins

	_, _, _ = p.Lookup(context.Background(), &enrich.Task{Org: "org-1", Fill: []string{"slogan"}}, acme)
	is.Equal(misses.reads, 1) // once, for both vendors
}

// An answer with no miss read writes nothing: a priced source answering is the common
// case, and a delete for each would cost the writer a transaction a task.
func TestAnAnswerWithNoMissReadWritesNothing(t *testing.T) {
	is := is.New(t)
	var asked []string
	a := priced{enrichtest.Source{SourceName: "a", Company: company("Nobody", "nobody.example", ""), Asked: &asked}}
	misses := newMemMisses(time.Now())
	p := &enrich.Pipeline{Sources: []enrich.Source{a}, Misses: misses}
	_, tr, terr := p.Lookup(context.Background(), &enrich.Task{Org: "org-1"}, nobody)
	is.True(terr == nil)
	is.Equal(outcomes(tr.Sources), []string{"a hit 1"})
	is.Equal(misses.reads, 1)
	is.Equal(len(misses.forgotten), 0)
}
