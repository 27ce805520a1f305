package enrich_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/matryer/is"

	"enrichd/enrich"
	"enrichd/enrich/enrichtest"
)

const acmePage = "https://www.linkedin.com/company/acme"

func company(name, domain, page string) *enrich.Company {
	c := &enrich.Company{Name: name, EnrichmentStatus: enrich.StatusEnriched}
	if domain != "" {
		c.Domain = enrich.Ptr(domain)
	}
	if page != "" {
		c.NetworkURL = enrich.Ptr(page)
	}
	return c
}

// outcomes renders the task's `sources` as "name outcome[/reason] calls" lines.
func outcomes(calls []enrich.SourceCall) []string {
	var out []string
	for _, c := range calls {
		s := c.Name + " " + c.Outcome
		if c.Reason != "" {
			s += "/" + c.Reason
		}
		out = append(out, fmt.Sprintf("%s %d", s, c.VendorCalls))
	}
	return out
}

func TestLookupFillsFromTheNextSource(t *testing.T) {
	is := is.New(t)
	var asked []string
	first := company("Acme", "acme.com", acmePage)
	first.EmployeeCount = enrich.Ptr[int64](120)
	second := company("ACME Corporation", "acme.com", "")
	second.EmployeeCount = enrich.Ptr[int64](999) // never overwrites the first's
	second.Slogan = enrich.Ptr("Everything for coyotes")
	second.YearFounded = enrich.Ptr(1949) // not wanted, but null: filled all the same
	third := company("Acme", "acme.com", acmePage)
	third.About = enrich.Ptr("never asked")
	p := &enrich.Pipeline{Sources: []enrich.Source{
		enrichtest.Source{SourceName: "a", Company: first, Asked: &asked},
		enrichtest.Source{SourceName: "b", Company: second, Asked: &asked},
		enrichtest.Source{SourceName: "c", Company: third, Asked: &asked},
	}}

	res, tr, terr := p.Lookup(context.Background(), &enrich.Task{Fill: []string{"employee_count", "slogan"}}, enrich.Input{Lookup: enrich.LookupDomain, Target: "acme.com"})

	is.True(terr == nil)
	is.Equal(asked, []string{"a acme.com", "b acme.com"}) // c is not asked once the list is filled
	c := res.Company
	is.Equal(c.Name, "Acme")               // the first source's name is kept
	is.Equal(*c.EmployeeCount, int64(120)) // and its employee count
	is.Equal(*c.Slogan, "Everything for coyotes")
	is.Equal(*c.YearFounded, 1949)
	is.True(c.About == nil)
	is.Equal(*c.NetworkURL, acmePage)
	is.Equal(tr.Provenance, enrich.Provenance{
		"name": "a", "domain": "a", "network_url": "a", "employee_count": "a",
		"slogan": "b", "year_founded": "b",
	})
	is.Equal(outcomes(tr.Sources), []string{"a hit 1", "b hit 1", "c skipped/filled 0"})
	is.Equal(first.Slogan, nil) // the source's own record is not written to
}

func TestLookupFirstHitWinsWithNoFill(t *testing.T) {
	is := is.New(t)
	var asked []string
	first := company("Acme", "acme.com", "")
	second := company("Acme", "acme.com", "")
	second.Slogan = enrich.Ptr("Everything for coyotes")
	p := &enrich.Pipeline{Sources: []enrich.Source{
		enrichtest.Source{SourceName: "a", Err: enrich.ErrNotFound, Asked: &asked},
		enrichtest.Source{SourceName: "b", Company: first, Asked: &asked},
		enrichtest.Source{SourceName: "c", Company: second, Asked: &asked},
	}}

	res, tr, terr := p.Lookup(context.Background(), &enrich.Task{}, enrich.Input{Lookup: enrich.LookupDomain, Target: "acme.com"})

	is.True(terr == nil)
	is.Equal(asked, []string{"a acme.com", "b acme.com"})
	is.True(res.Company.Slogan == nil)
	is.Equal(tr.Provenance, enrich.Provenance{"name": "b", "domain": "b"})
	is.Equal(outcomes(tr.Sources), []string{"a miss 1", "b hit 1", "c skipped/filled 0"})
}

func TestLookupDiscardsAnotherSubject(t *testing.T) {
	for _, tt := range []struct {
		name   string
		in     enrich.Input
		first  enrich.Result
		other  enrich.Result
		same   enrich.Result
		filled func(enrich.Result) *string
	}{
		{
			name:  "company by another domain and page",
			in:    enrich.Input{Lookup: enrich.LookupDomain, Target: "acme.com"},
			first: enrich.Result{Company: company("Acme", "acme.com", acmePage)},
			other: enrich.Result{Company: func() *enrich.Company {
				c := company("Acme Bricks", "acmebricks.com", "https://www.linkedin.com/company/acme-bricks")
				c.Slogan = enrich.Ptr("Bricks")
				return c
			}()},
			same: enrich.Result{Company: func() *enrich.Company {
				c := company("Acme", "", acmePage) // the same page, no domain: the same company
				c.Slogan = enrich.Ptr("Everything for coyotes")
				return c
			}()},
			filled: func(r enrich.Result) *string { return r.Company.Slogan },
		},
		{
			name:  "company naming neither",
			in:    enrich.Input{Lookup: enrich.LookupDomain, Target: "acme.com"},
			first: enrich.Result{Company: company("Acme", "acme.com", "")},
			other: enrich.Result{Company: func() *enrich.Company {
				c := company("Acme", "", "")
				c.Slogan = enrich.Ptr("Bricks")
				return c
			}()},
			same: enrich.Result{Company: func() *enrich.Company {
				c := company("Acme", "ACME.com", "")
				c.Slogan = enrich.Ptr("Everything for coyotes")
				return c
			}()},
			filled: func(r enrich.Result) *string { return r.Company.Slogan },
		},
		{
			name:  "person at another profile",
			in:    enrich.Input{Lookup: enrich.LookupPersonURL, Target: "https://www.linkedin.com/in/jane-doe"},
			first: enrich.Result{Person: &enrich.Person{NetworkURL: enrich.Ptr("https://www.linkedin.com/in/jane-doe"), FullName: enrich.Ptr("Jane Doe")}},
			other: enrich.Result{Person: &enrich.Person{NetworkURL: enrich.Ptr("https://www.linkedin.com/in/jane-doe-2"), Headline: enrich.Ptr("Baker")}},
			same: enrich.Result{Person: &enrich.Person{NetworkURL: enrich.Ptr("https://www.linkedin.com/in/jane-doe/"),
				Headline: enrich.Ptr("CTO at Acme"), FullName: enrich.Ptr("J. Doe")}},
			filled: func(r enrich.Result) *string { return r.Person.Headline },
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			var asked []string
			var logs bytes.Buffer
			p := &enrich.Pipeline{
				Sources: []enrich.Source{
					enrichtest.Source{SourceName: "a", Company: tt.first.Company, Person: tt.first.Person, Asked: &asked},
					enrichtest.Source{SourceName: "b", Company: tt.other.Company, Person: tt.other.Person, Asked: &asked},
					enrichtest.Source{SourceName: "c", Company: tt.same.Company, Person: tt.same.Person, Asked: &asked},
				},
				Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			}
			fill := []string{"slogan"}
			if tt.in.Lookup == enrich.LookupPersonURL {
				fill = []string{"headline"}
			}

			res, tr, terr := p.Lookup(context.Background(), &enrich.Task{Fill: fill}, tt.in)

			is.True(terr == nil)
			is.Equal(len(asked), 3)
			is.Equal(*tt.filled(res), *tt.filled(tt.same)) // filled by c, not by b
			is.Equal(outcomes(tr.Sources), []string{"a hit 1", "b miss/other_subject 1", "c hit 1"})
			is.Equal(tr.Provenance[fill[0]], "c")
			for k, v := range tr.Provenance {
				is.True(v != "b") // nothing of b's record is kept
				_ = k
			}
			is.True(strings.Contains(logs.String(), "source=b")) // the discarded answer is logged
		})
	}
}

func TestLookupSkipsSourcesThatCannotAnswer(t *testing.T) {
	is := is.New(t)
	var asked []string
	profile := "https://www.linkedin.com/in/jane-doe"
	p := &enrich.Pipeline{Sources: []enrich.Source{
		enrichtest.Source{SourceName: "web", Only: []enrich.Lookup{enrich.LookupDomain}, Asked: &asked},
		enrichtest.Source{SourceName: "b", Person: &enrich.Person{NetworkURL: &profile, FullName: enrich.Ptr("Jane Doe")}, Asked: &asked},
	}}

	res, tr, terr := p.Lookup(context.Background(), &enrich.Task{}, enrich.Input{Lookup: enrich.LookupPersonURL, Target: profile})

	is.True(terr == nil)
	is.Equal(*res.Person.FullName, "Jane Doe")
	is.Equal(asked, []string{"b " + profile})
	is.Equal(outcomes(tr.Sources), []string{"web skipped/not_supported 0", "b hit 1"})
}

func TestLookupIgnoresFieldsTheRecordHasNot(t *testing.T) {
	is := is.New(t)
	var asked []string
	p := &enrich.Pipeline{Sources: []enrich.Source{
		enrichtest.Source{SourceName: "a", Company: company("Acme", "acme.com", ""), Asked: &asked},
		enrichtest.Source{SourceName: "b", Company: company("Acme", "acme.com", ""), Asked: &asked},
	}}

	// positions is a person's field: a company lookup does not wait for it.
	_, tr, terr := p.Lookup(context.Background(), &enrich.Task{Fill: []string{"positions"}}, enrich.Input{Lookup: enrich.LookupDomain, Target: "acme.com"})

	is.True(terr == nil)
	is.Equal(outcomes(tr.Sources), []string{"a hit 1", "b skipped/filled 0"})
}

func TestLookupSourceWithNothingNew(t *testing.T) {
	is := is.New(t)
	var asked []string
	p := &enrich.Pipeline{Sources: []enrich.Source{
		enrichtest.Source{SourceName: "a", Company: company("Acme", "acme.com", ""), Asked: &asked},
		enrichtest.Source{SourceName: "b", Company: company("Acme Inc", "acme.com", ""), Asked: &asked},
		enrichtest.Source{SourceName: "c", Err: fmt.Errorf("HTTP 503: %w", enrich.ErrUnavailable), Asked: &asked},
	}}

	res, tr, terr := p.Lookup(context.Background(), &enrich.Task{Fill: []string{"slogan"}}, enrich.Input{Lookup: enrich.LookupDomain, Target: "acme.com"})

	is.True(terr == nil) // an unavailable source after a hit does not fail the task
	is.Equal(res.Company.Name, "Acme")
	is.True(res.Company.Slogan == nil)
	is.Equal(outcomes(tr.Sources), []string{"a hit 1", "b miss/nothing_new 1", "c error 1"})
}

// budgets admits the sources named in allow, and keeps what it was told was spent.
type budgets struct {
	allow map[string]bool
	mu    sync.Mutex
	spent []enrich.SourceCall
	orgs  []string
}

func (b *budgets) Admit(_ context.Context, org, src string, own bool) (*enrich.Booking, string) {
	if b.allow[src] {
		return nil, ""
	}
	return nil, enrich.ReasonBudget
}

func (b *budgets) Book(context.Context, *enrich.Booking, int64, int64) error { return nil }

func (b *budgets) Spent(_ context.Context, org string, call enrich.SourceCall, _ *enrich.Booking) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.spent = append(b.spent, call)
	b.orgs = append(b.orgs, org)
}

func TestLookupBudgetSpent(t *testing.T) {
	is := is.New(t)
	var asked []string
	spend := &budgets{}
	p := &enrich.Pipeline{
		Sources: []enrich.Source{
			enrichtest.Source{SourceName: "a", Company: company("Acme", "acme.com", ""), Asked: &asked},
			enrichtest.Source{SourceName: "b", Company: company("Acme", "acme.com", ""), Asked: &asked},
		},
		Spend: spend,
	}

	_, tr, terr := p.Lookup(context.Background(), &enrich.Task{Org: "org-1"}, enrich.Input{Lookup: enrich.LookupDomain, Target: "acme.com"})

	is.True(terr != nil)
	is.Equal(terr.Code, enrich.CodeProviderUnavailable)
	is.True(strings.Contains(terr.Message, "budget")) // the message says the budgets are spent
	is.Equal(len(asked), 0)
	is.Equal(len(spend.spent), 0) // nothing asked, nothing spent
	is.Equal(outcomes(tr.Sources), []string{"a skipped/budget 0", "b skipped/budget 0"})
}

func TestLookupSpendAndKeys(t *testing.T) {
	is := is.New(t)
	var asked []string
	spend := &budgets{allow: map[string]bool{"a": true, "b": true}}
	first := company("Acme", "acme.com", "")
	second := company("Acme", "acme.com", "")
	second.Slogan = enrich.Ptr("Everything for coyotes")
	p := &enrich.Pipeline{
		Sources: []enrich.Source{
			enrichtest.Source{SourceName: "a", Company: first, Asked: &asked},
			enrichtest.Source{SourceName: "b", Asked: &asked}, // the installation's b knows nothing
			enrichtest.Source{SourceName: "c", Asked: &asked},
		},
		Spend: spend,
		Keys: keys{
			own:     map[string]enrich.Source{"b": enrichtest.Source{SourceName: "b", Company: second, Asked: &asked}},
			failing: map[string]bool{"c": true},
		},
	}

	res, tr, terr := p.Lookup(context.Background(), &enrich.Task{Org: "org-1", Fill: []string{"slogan", "about"}}, enrich.Input{Lookup: enrich.LookupDomain, Target: "acme.com"})

	is.True(terr == nil)
	is.Equal(*res.Company.Slogan, "Everything for coyotes") // from the organization's own b
	is.True(tr.Private)                                     // so the record is the organization's alone
	is.Equal(outcomes(tr.Sources), []string{"a hit 1", "b hit 1", "c skipped/key_failing 0"})
	is.Equal(len(spend.spent), 2) // each ask admitted is recorded
	is.Equal(spend.spent[1].Name, "b")
	is.True(spend.spent[1].OwnKey)
	is.Equal(spend.orgs, []string{"org-1", "org-1"})
}

type keys struct {
	own     map[string]enrich.Source
	failing map[string]bool
}

func (k keys) For(_ context.Context, org string, src enrich.Source) (enrich.Source, bool, string) {
	if k.failing[src.Name()] {
		return nil, false, enrich.ReasonKeyFailing
	}
	if s, ok := k.own[src.Name()]; ok {
		return s, true, ""
	}
	return src, false, ""
}

// An email lookup asks through Enrich; its task's trace gathers what each source was
// asked and where the person it answered with came from.
func TestTheTaskTraceGathersEnrichCalls(t *testing.T) {
	is := is.New(t)
	var asked []string
	profile := "https://www.linkedin.com/in/jane-doe"
	jane := &enrich.Person{NetworkURL: &profile, FullName: enrich.Ptr("Jane Doe")}
	p := &enrich.Pipeline{Sources: []enrich.Source{
		enrichtest.Source{SourceName: "a", Err: enrich.ErrNotFound, Asked: &asked},
		enrichtest.Source{SourceName: "b", Company: company("Acme", "acme.com", acmePage), Person: jane, Asked: &asked},
	}}
	ctx, task := context.Background(), &enrich.Task{}

	_, terr := p.Enrich(ctx, task, enrich.Input{Lookup: enrich.LookupDomain, Target: "acme.com"})
	is.True(terr == nil)
	res, terr := p.Enrich(ctx, task, enrich.Input{Lookup: enrich.LookupPersonURL, Target: profile})
	is.True(terr == nil)

	tr := task.Trace(res)
	is.Equal(outcomes(tr.Sources), []string{"a miss 2", "b hit 2"})
	is.Equal(tr.Provenance, enrich.Provenance{"network_url": "b", "full_name": "b"})
}

// A task's own Spend takes the Pipeline's place for its asks: admitted and settled
// there, the Pipeline's told nothing.
func TestATasksOwnSpendTakesThePipelines(t *testing.T) {
	is := is.New(t)
	var asked []string
	pipelines, tasks := &budgets{allow: map[string]bool{"a": true}}, &budgets{allow: map[string]bool{"a": true}}
	p := &enrich.Pipeline{
		Sources: []enrich.Source{enrichtest.Source{SourceName: "a", Company: company("Acme", "acme.com", ""), Asked: &asked}},
		Spend:   pipelines,
	}

	_, _, terr := p.Lookup(context.Background(), &enrich.Task{Org: "org-1", Spend: tasks}, enrich.Input{Lookup: enrich.LookupDomain, Target: "acme.com"})

	is.True(terr == nil)
	is.Equal(asked, []string{"a acme.com"})
	is.Equal(len(tasks.spent), 1)
	is.Equal(tasks.orgs, []string{"org-1"})
	is.Equal(len(pipelines.spent), 0)
}
