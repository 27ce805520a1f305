package source_test

import (
	"context"
	"testing"

	"enrichd/enrich"
	"enrichd/enrich/source"
)

// Each adapter charges the Tally of the ask by its vendor's published price of what
// answered: what an organization's spend and budgets count. Failed calls and misses
// a vendor does not bill cost nothing.
func TestVendorPrices(t *testing.T) {
	company := "https://www.linkedin.com/company/acme"
	profile := "https://www.linkedin.com/in/wile-e-coyote"
	staff := enrich.StaffQuery{Company: &enrich.Company{Name: "Acme", Domain: strp("acme.com"), NetworkURL: strp(company)}, Names: []string{"wile", "coyote"}, Limit: 3}
	cases := []struct {
		name    string
		routes  map[string][]reply
		ask     func(ctx context.Context, el *source.EnrichLayer, p *source.PDL, a *source.Apollo) error
		calls   int64
		credits int64
	}{
		{"enrichlayer company by page", map[string][]reply{"/api/v2/company": {{status: 200, fixture: "enrichlayer/company_full.json"}}},
			func(ctx context.Context, el *source.EnrichLayer, _ *source.PDL, _ *source.Apollo) error {
				_, err := el.CompanyByURL(ctx, company)
				return err
			}, 1, 1},
		{"enrichlayer company by domain: resolve 2 and the page 1", map[string][]reply{
			"/api/v2/company/resolve": {{status: 200, fixture: "enrichlayer/resolve.json"}},
			"/api/v2/company":         {{status: 200, fixture: "enrichlayer/company_full.json"}}},
			func(ctx context.Context, el *source.EnrichLayer, _ *source.PDL, _ *source.Apollo) error {
				_, err := el.CompanyByDomain(ctx, "acme.com")
				return err
			}, 2, 3},
		{"enrichlayer person", map[string][]reply{"/api/v2/profile": {{status: 200, fixture: "enrichlayer/profile.json"}}},
			func(ctx context.Context, el *source.EnrichLayer, _ *source.PDL, _ *source.Apollo) error {
				_, err := el.PersonByURL(ctx, profile)
				return err
			}, 1, 1},
		{"enrichlayer staff search", map[string][]reply{"/api/v2/company/employee/search/": {{status: 200, fixture: "enrichlayer/employee_search.json"}}},
			func(ctx context.Context, el *source.EnrichLayer, _ *source.PDL, _ *source.Apollo) error {
				_, err := el.SearchStaff(ctx, staff)
				return err
			}, 1, 10},
		{"enrichlayer 404 is free", map[string][]reply{"/api/v2/profile": {{status: 404, fixture: "enrichlayer/error_404.json"}}},
			func(ctx context.Context, el *source.EnrichLayer, _ *source.PDL, _ *source.Apollo) error {
				_, err := el.PersonByURL(ctx, profile)
				return err
			}, 1, 0},
		{"enrichlayer 503 is free", map[string][]reply{"/api/v2/profile": {{status: 503, fixture: "enrichlayer/error_503.json"}}},
			func(ctx context.Context, el *source.EnrichLayer, _ *source.PDL, _ *source.Apollo) error {
				_, err := el.PersonByURL(ctx, profile)
				return err
			}, 3, 0},
		{"pdl company match", map[string][]reply{"/v5/company/enrich": {{status: 200, fixture: "pdl/company_full.json"}}},
			func(ctx context.Context, _ *source.EnrichLayer, p *source.PDL, _ *source.Apollo) error {
				_, err := p.CompanyByDomain(ctx, "acme.com")
				return err
			}, 1, 1},
		{"pdl person match", map[string][]reply{"/v5/person/enrich": {{status: 200, fixture: "pdl/person.json"}}},
			func(ctx context.Context, _ *source.EnrichLayer, p *source.PDL, _ *source.Apollo) error {
				_, err := p.PersonByURL(ctx, profile)
				return err
			}, 1, 1},
		{"pdl 404 is free", map[string][]reply{"/v5/person/enrich": {{status: 404, fixture: "pdl/error_404.json"}}},
			func(ctx context.Context, _ *source.EnrichLayer, p *source.PDL, _ *source.Apollo) error {
				_, err := p.PersonByURL(ctx, profile)
				return err
			}, 1, 0},
		{"pdl search: per record returned", map[string][]reply{"/v5/person/search": {{status: 200, fixture: "pdl/search.json"}}},
			func(ctx context.Context, _ *source.EnrichLayer, p *source.PDL, _ *source.Apollo) error {
				_, err := p.SearchStaff(ctx, staff)
				return err
			}, 1, 2},
		{"apollo organization", map[string][]reply{apolloOrgPath: {{status: 200, fixture: "apollo/organization_full.json"}}},
			func(ctx context.Context, _ *source.EnrichLayer, _ *source.PDL, a *source.Apollo) error {
				_, err := a.CompanyByDomain(ctx, "acme.com")
				return err
			}, 1, 1},
		{"apollo organization none is free", map[string][]reply{apolloOrgPath: {{status: 200, fixture: "apollo/organization_none.json"}}},
			func(ctx context.Context, _ *source.EnrichLayer, _ *source.PDL, a *source.Apollo) error {
				_, err := a.CompanyByDomain(ctx, "acme.com")
				return err
			}, 1, 0},
		{"apollo person match", map[string][]reply{apolloMatchPath: {{status: 200, fixture: "apollo/person.json"}}},
			func(ctx context.Context, _ *source.EnrichLayer, _ *source.PDL, a *source.Apollo) error {
				_, err := a.PersonByURL(ctx, profile)
				return err
			}, 1, 1},
		{"apollo person none is free", map[string][]reply{apolloMatchPath: {{status: 200, fixture: "apollo/person_none.json"}}},
			func(ctx context.Context, _ *source.EnrichLayer, _ *source.PDL, a *source.Apollo) error {
				_, err := a.PersonByURL(ctx, profile)
				return err
			}, 1, 0},
		{"apollo company by page asks nothing", map[string][]reply{},
			func(ctx context.Context, _ *source.EnrichLayer, _ *source.PDL, a *source.Apollo) error {
				_, err := a.CompanyByURL(ctx, company)
				return err
			}, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			el, _, _ := newEnrichLayer(t, c.routes)
			p, _, _ := newPDL(t, c.routes)
			a, _, _ := newApollo(t, c.routes)
			ctx, tally := enrich.WithTally(context.Background())
			_ = c.ask(ctx, el, p, a) // the outcome is the adapters' own tests'
			if tally.Calls() != c.calls || tally.Credits() != c.credits {
				t.Fatalf("calls %d, credits %d; want %d and %d", tally.Calls(), tally.Credits(), c.calls, c.credits)
			}
		})
	}
}

// sim charges what it is set to for each answer that knows the subject; a miss is free.
func TestSimCredits(t *testing.T) {
	s := &source.Sim{Credits: 3}
	ctx, tally := enrich.WithTally(context.Background())
	if _, err := s.CompanyByDomain(ctx, "acme.com"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CompanyByDomain(ctx, "missing.com"); err == nil {
		t.Fatal("missing.com was found")
	}
	if tally.Calls() != 2 || tally.Credits() != 3 {
		t.Fatalf("calls %d, credits %d; want 2 and 3", tally.Calls(), tally.Credits())
	}
}
