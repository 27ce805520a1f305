package source_test

import (
	"context"

	"enrichd/enrich"
)

// fakeSource stands for the network sources the web source asks: it answers every
// lookup with the same company or person and error, and records that it was asked.
type fakeSource struct {
	name    string
	company *enrich.Company
	person  *enrich.Person
	err     error
	asked   *[]string
}

func (f fakeSource) Name() string { return f.name }

func (f fakeSource) answer(ctx context.Context, target string) error {
	*f.asked = append(*f.asked, f.name+" "+target)
	if err := ctx.Err(); err != nil {
		return err
	}
	return f.err
}

func (f fakeSource) CompanyByDomain(ctx context.Context, domain string) (*enrich.Company, error) {
	if err := f.answer(ctx, domain); err != nil {
		return nil, err
	}
	return f.company, nil
}

func (f fakeSource) CompanyByURL(ctx context.Context, networkURL string) (*enrich.Company, error) {
	if err := f.answer(ctx, networkURL); err != nil {
		return nil, err
	}
	return f.company, nil
}

func (f fakeSource) PersonByURL(ctx context.Context, networkURL string) (*enrich.Person, error) {
	if err := f.answer(ctx, networkURL); err != nil {
		return nil, err
	}
	return f.person, nil
}
