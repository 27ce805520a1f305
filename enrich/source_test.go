package enrich_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/matryer/is"

	"enrichd/enrich"
	"enrichd/enrich/enrichtest"
)

// spec describes one fake source of a test case.
type spec struct {
	name      string
	hit       bool  // answers with a result named after the source
	err       error // answers this error
	ignoreCtx bool
}

func TestPipelineEnrich(t *testing.T) {
	inputs := []enrich.Input{
		{Lookup: enrich.LookupDomain, Target: "acme.com"},
		{Lookup: enrich.LookupCompanyURL, Target: "https://www.linkedin.com/company/acme"},
		{Lookup: enrich.LookupPersonURL, Target: "https://www.linkedin.com/in/jane-doe"},
	}
	unavailable := fmt.Errorf("vendor: HTTP 503: %w", enrich.ErrUnavailable)
	tests := []struct {
		name     string
		sources  []spec
		winner   string   // source whose result is returned; "" when the task fails
		wantCode string   // TaskError code when the task fails
		asked    []string // sources asked, in order
	}{
		{
			name:    "first hit wins",
			sources: []spec{{name: "a", hit: true}, {name: "b", hit: true}},
			winner:  "a",
			asked:   []string{"a"},
		},
		{
			name:    "not found is skipped",
			sources: []spec{{name: "a", err: enrich.ErrNotFound}, {name: "b", hit: true}, {name: "c", hit: true}},
			winner:  "b",
			asked:   []string{"a", "b"},
		},
		{
			name:    "wrapped not found is skipped",
			sources: []spec{{name: "a", err: fmt.Errorf("a: acme.com: %w", enrich.ErrNotFound)}, {name: "b", hit: true}},
			winner:  "b",
			asked:   []string{"a", "b"},
		},
		{
			name:    "nil result with nil error is a miss",
			sources: []spec{{name: "a"}, {name: "b", hit: true}},
			winner:  "b",
			asked:   []string{"a", "b"},
		},
		{
			name:    "unavailable then a hit",
			sources: []spec{{name: "a", err: unavailable}, {name: "b", hit: true}},
			winner:  "b",
			asked:   []string{"a", "b"},
		},
		{
			name:     "all miss",
			sources:  []spec{{name: "a", err: enrich.ErrNotFound}, {name: "b"}, {name: "c", err: enrich.ErrNotFound}},
			wantCode: enrich.CodeNotFound,
			asked:    []string{"a", "b", "c"},
		},
		{
			name:     "no sources",
			wantCode: enrich.CodeNotFound,
		},
		{
			name:     "one unavailable, none hit",
			sources:  []spec{{name: "a", err: enrich.ErrNotFound}, {name: "b", err: unavailable}, {name: "c"}},
			wantCode: enrich.CodeProviderUnavailable,
			asked:    []string{"a", "b", "c"},
		},
		{
			name:     "unavailable first, then misses",
			sources:  []spec{{name: "a", err: unavailable}, {name: "b", err: enrich.ErrNotFound}},
			wantCode: enrich.CodeProviderUnavailable,
			asked:    []string{"a", "b"},
		},
		{
			name:     "an unexpected error counts as unavailable",
			sources:  []spec{{name: "a", err: errors.New("connection reset by peer")}},
			wantCode: enrich.CodeProviderUnavailable,
			asked:    []string{"a"},
		},
	}
	for _, in := range inputs {
		for _, tt := range tests {
			t.Run(string(in.Lookup)+"/"+tt.name, func(t *testing.T) {
				is := is.New(t)
				var asked []string
				p := &enrich.Pipeline{}
				for _, s := range tt.sources {
					f := enrichtest.Source{SourceName: s.name, Err: s.err, Asked: &asked}
					if s.hit {
						f.Company = &enrich.Company{Name: s.name, EnrichmentStatus: enrich.StatusEnriched}
						f.Person = &enrich.Person{FullName: enrich.Ptr(s.name), EnrichmentStatus: enrich.StatusEnriched}
					}
					p.Sources = append(p.Sources, f)
				}

				res, terr := p.Enrich(context.Background(), &enrich.Task{}, in)

				var wantAsked []string
				for _, name := range tt.asked {
					wantAsked = append(wantAsked, name+" "+in.Target)
				}
				is.Equal(asked, wantAsked) // sources asked, in order, with the target
				if tt.winner == "" {
					is.True(terr != nil) // want a TaskError
					is.Equal(terr.Code, tt.wantCode)
					is.True(terr.Message != "")
					is.Equal(res, enrich.Result{})
					return
				}
				is.True(terr == nil) // want no TaskError
				if in.Lookup.ObjectType() == enrich.ObjectCompany {
					is.True(res.Person == nil)
					is.True(res.Company != nil)
					is.Equal(res.Company.Name, tt.winner)
				} else {
					is.True(res.Company == nil)
					is.True(res.Person != nil)
					is.Equal(*res.Person.FullName, tt.winner)
				}
			})
		}
	}
}

func TestPipelineEnrichTimedOut(t *testing.T) {
	tests := []struct {
		name    string
		sources []spec
		asked   []string
	}{
		// Past the deadline no source is asked at all, not even one that would answer.
		{name: "source honors the context", sources: []spec{{name: "a", hit: true}, {name: "b", hit: true}}},
		{name: "miss after the deadline", sources: []spec{{name: "a", err: enrich.ErrNotFound, ignoreCtx: true}, {name: "b", hit: true}}},
		{name: "nil result after the deadline", sources: []spec{{name: "a", ignoreCtx: true}, {name: "b", hit: true}}},
		{name: "unavailable after the deadline", sources: []spec{{name: "a", err: enrich.ErrUnavailable, ignoreCtx: true}, {name: "b", hit: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			var asked []string
			p := &enrich.Pipeline{}
			for _, s := range tt.sources {
				f := enrichtest.Source{SourceName: s.name, Err: s.err, Asked: &asked, IgnoreCtx: s.ignoreCtx}
				if s.hit {
					f.Company = &enrich.Company{Name: s.name}
				}
				p.Sources = append(p.Sources, f)
			}
			ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
			defer cancel()

			res, terr := p.Enrich(ctx, &enrich.Task{}, enrich.Input{Lookup: enrich.LookupDomain, Target: "acme.com"})

			is.True(terr != nil) // want a TaskError
			is.Equal(terr.Code, enrich.CodeTimedOut)
			is.Equal(res, enrich.Result{})
			var wantAsked []string
			for _, name := range tt.asked {
				wantAsked = append(wantAsked, name+" acme.com")
			}
			is.Equal(asked, wantAsked) // no source is asked after the deadline
		})
	}
}

// Email lookups take several questions and read the held data: Enrich does not do
// them, ResolveEmail does.
func TestPipelineEnrichLeavesEmailToResolveEmail(t *testing.T) {
	is := is.New(t)
	var asked []string
	p := &enrich.Pipeline{Sources: []enrich.Source{enrichtest.Source{
		SourceName: "a",
		Company:    &enrich.Company{Name: "Acme"},
		Person:     &enrich.Person{FullName: enrich.Ptr("Jane Doe")},
		Asked:      &asked,
	}}}

	res, terr := p.Enrich(context.Background(), &enrich.Task{}, enrich.Input{Lookup: enrich.LookupEmail, Target: "jane@acme.com"})

	is.True(terr != nil)
	is.Equal(terr.Code, enrich.CodeInternalError)
	is.True(terr.Message != "")
	is.Equal(res, enrich.Result{})
	is.Equal(len(asked), 0) // no source asked
}

func TestPipelineLogsUnavailableSource(t *testing.T) {
	is := is.New(t)
	var buf bytes.Buffer
	var asked []string
	p := &enrich.Pipeline{
		Sources: []enrich.Source{enrichtest.Source{SourceName: "vendor-x", Err: fmt.Errorf("boom: %w", enrich.ErrUnavailable), Asked: &asked}},
		Logger:  slog.New(slog.NewTextHandler(&buf, nil)),
	}

	_, terr := p.Enrich(context.Background(), &enrich.Task{}, enrich.Input{Lookup: enrich.LookupDomain, Target: "acme.com"})

	is.True(terr != nil)
	is.Equal(terr.Code, enrich.CodeProviderUnavailable)
	is.True(bytes.Contains(buf.Bytes(), []byte("source=vendor-x"))) // the failing source is named in the log
}
