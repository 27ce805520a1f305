// Package enrichtest holds what tests of the pipeline and of the source adapters share:
// a Source that answers as it is told and records what it was asked. It is imported by
// tests only.
package enrichtest

import (
	"context"
	"slices"

	"enrichd/enrich"
)

// Source answers every lookup with the same company or person and error, and records
// each question in Asked as "<SourceName> <target>".
type Source struct {
	SourceName string
	Company    *enrich.Company
	Person     *enrich.Person
	Err        error
	Asked      *[]string
	// IgnoreCtx makes the source answer as configured even after its context is done.
	IgnoreCtx bool
	// Only, when set, are the kinds of lookup it answers; the others it does not
	// support (enrich.LookupSupporter).
	Only []enrich.Lookup
}

func (f Source) Supports(l enrich.Lookup) bool {
	return len(f.Only) == 0 || slices.Contains(f.Only, l)
}

func (f Source) Name() string { return f.SourceName }

func (f Source) answer(ctx context.Context, tally *enrich.Tally, target string) error {
	*f.Asked = append(*f.Asked, f.SourceName+" "+target)
	tally.Call() // one request upstream, as an adapter counts it
	if err := ctx.Err(); err != nil && !f.IgnoreCtx {
		return err
	}
	return f.Err
}

func (f Source) CompanyByDomain(ctx context.Context, tally *enrich.Tally, domain string) (*enrich.Company, error) {
	if err := f.answer(ctx, tally, domain); err != nil {
		return nil, err
	}
	return f.Company, nil
}

func (f Source) CompanyByURL(ctx context.Context, tally *enrich.Tally, networkURL string) (*enrich.Company, error) {
	if err := f.answer(ctx, tally, networkURL); err != nil {
		return nil, err
	}
	return f.Company, nil
}

func (f Source) PersonByURL(ctx context.Context, tally *enrich.Tally, networkURL string) (*enrich.Person, error) {
	if err := f.answer(ctx, tally, networkURL); err != nil {
		return nil, err
	}
	return f.Person, nil
}
