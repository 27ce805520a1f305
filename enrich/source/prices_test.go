package source_test

import (
	"context"
	"errors"
	"sync"
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
		ask     func(ctx context.Context, tally *enrich.Tally, el *source.EnrichLayer, p *source.PDL, a *source.Apollo) error
		calls   int64
		credits int64
		// booked is what the ask is on the books at once it is done: each request at the
		// most it can cost, beyond the one request of one credit it was admitted at.
		booked [2]int64
	}{
		{"enrichlayer company by page", map[string][]reply{"/api/v2/company": {{status: 200, fixture: "enrichlayer/company_full.json"}}},
			func(ctx context.Context, tally *enrich.Tally, el *source.EnrichLayer, _ *source.PDL, _ *source.Apollo) error {
				_, err := el.CompanyByURL(ctx, tally, company)
				return err
			}, 1, 1, [2]int64{1, 1}},
		{"enrichlayer company by domain: resolve 2 and the page 1", map[string][]reply{
			"/api/v2/company/resolve": {{status: 200, fixture: "enrichlayer/resolve.json"}},
			"/api/v2/company":         {{status: 200, fixture: "enrichlayer/company_full.json"}}},
			func(ctx context.Context, tally *enrich.Tally, el *source.EnrichLayer, _ *source.PDL, _ *source.Apollo) error {
				_, err := el.CompanyByDomain(ctx, tally, "acme.com")
				return err
			}, 2, 3, [2]int64{2, 3}},
		{"enrichlayer person", map[string][]reply{"/api/v2/profile": {{status: 200, fixture: "enrichlayer/profile.json"}}},
			func(ctx context.Context, tally *enrich.Tally, el *source.EnrichLayer, _ *source.PDL, _ *source.Apollo) error {
				_, err := el.PersonByURL(ctx, tally, profile)
				return err
			}, 1, 1, [2]int64{1, 1}},
		{"enrichlayer staff search", map[string][]reply{"/api/v2/company/employee/search/": {{status: 200, fixture: "enrichlayer/employee_search.json"}}},
			func(ctx context.Context, tally *enrich.Tally, el *source.EnrichLayer, _ *source.PDL, _ *source.Apollo) error {
				_, err := el.SearchStaff(ctx, tally, staff)
				return err
			}, 1, 10, [2]int64{1, 10}},
		{"enrichlayer 404 is free", map[string][]reply{"/api/v2/profile": {{status: 404, fixture: "enrichlayer/error_404.json"}}},
			func(ctx context.Context, tally *enrich.Tally, el *source.EnrichLayer, _ *source.PDL, _ *source.Apollo) error {
				_, err := el.PersonByURL(ctx, tally, profile)
				return err
			}, 1, 0, [2]int64{1, 1}},
		{"enrichlayer 503 is free", map[string][]reply{"/api/v2/profile": {{status: 503, fixture: "enrichlayer/error_503.json"}}},
			func(ctx context.Context, tally *enrich.Tally, el *source.EnrichLayer, _ *source.PDL, _ *source.Apollo) error {
				_, err := el.PersonByURL(ctx, tally, profile)
				return err
			}, 3, 0, [2]int64{3, 3}},
		{"pdl company match", map[string][]reply{"/v5/company/enrich": {{status: 200, fixture: "pdl/company_full.json"}}},
			func(ctx context.Context, tally *enrich.Tally, _ *source.EnrichLayer, p *source.PDL, _ *source.Apollo) error {
				_, err := p.CompanyByDomain(ctx, tally, "acme.com")
				return err
			}, 1, 1, [2]int64{1, 1}},
		{"pdl person match", map[string][]reply{"/v5/person/enrich": {{status: 200, fixture: "pdl/person.json"}}},
			func(ctx context.Context, tally *enrich.Tally, _ *source.EnrichLayer, p *source.PDL, _ *source.Apollo) error {
				_, err := p.PersonByURL(ctx, tally, profile)
				return err
			}, 1, 1, [2]int64{1, 1}},
		{"pdl 404 is free", map[string][]reply{"/v5/person/enrich": {{status: 404, fixture: "pdl/error_404.json"}}},
			func(ctx context.Context, tally *enrich.Tally, _ *source.EnrichLayer, p *source.PDL, _ *source.Apollo) error {
				_, err := p.PersonByURL(ctx, tally, profile)
				return err
			}, 1, 0, [2]int64{1, 1}},
		{"pdl search: per record returned", map[string][]reply{"/v5/person/search": {{status: 200, fixture: "pdl/search.json"}}},
			func(ctx context.Context, tally *enrich.Tally, _ *source.EnrichLayer, p *source.PDL, _ *source.Apollo) error {
				_, err := p.SearchStaff(ctx, tally, staff)
				return err
			}, 1, 2, [2]int64{1, 3}},
		{"apollo organization", map[string][]reply{apolloOrgPath: {{status: 200, fixture: "apollo/organization_full.json"}}},
			func(ctx context.Context, tally *enrich.Tally, _ *source.EnrichLayer, _ *source.PDL, a *source.Apollo) error {
				_, err := a.CompanyByDomain(ctx, tally, "acme.com")
				return err
			}, 1, 1, [2]int64{1, 1}},
		{"apollo organization none is free", map[string][]reply{apolloOrgPath: {{status: 200, fixture: "apollo/organization_none.json"}}},
			func(ctx context.Context, tally *enrich.Tally, _ *source.EnrichLayer, _ *source.PDL, a *source.Apollo) error {
				_, err := a.CompanyByDomain(ctx, tally, "acme.com")
				return err
			}, 1, 0, [2]int64{1, 1}},
		{"apollo person match", map[string][]reply{apolloMatchPath: {{status: 200, fixture: "apollo/person.json"}}},
			func(ctx context.Context, tally *enrich.Tally, _ *source.EnrichLayer, _ *source.PDL, a *source.Apollo) error {
				_, err := a.PersonByURL(ctx, tally, profile)
				return err
			}, 1, 1, [2]int64{1, 1}},
		{"apollo person none is free", map[string][]reply{apolloMatchPath: {{status: 200, fixture: "apollo/person_none.json"}}},
			func(ctx context.Context, tally *enrich.Tally, _ *source.EnrichLayer, _ *source.PDL, a *source.Apollo) error {
				_, err := a.PersonByURL(ctx, tally, profile)
				return err
			}, 1, 0, [2]int64{1, 1}},
		{"apollo company by page asks nothing", map[string][]reply{},
			func(ctx context.Context, tally *enrich.Tally, _ *source.EnrichLayer, _ *source.PDL, a *source.Apollo) error {
				_, err := a.CompanyByURL(ctx, tally, company)
				return err
			}, 0, 0, [2]int64{1, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			el, elVendor, _ := newEnrichLayer(t, c.routes)
			p, pdlVendor, _ := newPDL(t, c.routes)
			a, apolloVendor, _ := newApollo(t, c.routes)
			books := &books{calls: 1, credits: 1} // as Admit books an ask
			ctx, tally := context.Background(), enrich.NewTally(books, &enrich.Booking{Calls: 1, Credits: 1})
			for _, f := range []*fakeVendor{elVendor, pdlVendor, apolloVendor} {
				f.arrived = func(n int) {
					if calls, _ := books.now(); calls < int64(n) {
						t.Errorf("request %d arrived with %d on the books", n, calls)
					}
				}
			}
			_ = c.ask(ctx, tally, el, p, a) // the outcome is the adapters' own tests'
			if tally.Calls() != c.calls || tally.Credits() != c.credits {
				t.Fatalf("calls %d, credits %d; want %d and %d", tally.Calls(), tally.Credits(), c.calls, c.credits)
			}
			if b := tally.Booking(); b.Calls != c.booked[0] || b.Credits != c.booked[1] {
				t.Fatalf("booked %d calls and %d credits, want %v", b.Calls, b.Credits, c.booked)
			}
		})
	}
}

// books is an enrich.Spend that keeps what an ask's requests were booked at, or
// refuses to (fail), as books that cannot be written do.
type books struct {
	mu             sync.Mutex
	calls, credits int64
	fail           bool
}

func (b *books) Admit(context.Context, string, string, bool) (*enrich.Booking, string) {
	return nil, ""
}

func (b *books) Book(_ context.Context, bk *enrich.Booking, calls, credits int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fail {
		return errors.New("the books cannot be written")
	}
	b.calls, b.credits = calls, credits
	bk.Calls, bk.Credits = calls, credits
	return nil
}

func (b *books) Spent(context.Context, string, enrich.SourceCall, *enrich.Booking) {}

func (b *books) now() (calls, credits int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls, b.credits
}

// A request that cannot be put on the books is not sent: the vendor sees nothing, the
// ask fails as unavailable, and the vendor's meter counts neither a call nor an error.
func TestARequestOffTheBooksIsNotSent(t *testing.T) {
	el, vendor, _ := newEnrichLayer(t, map[string][]reply{
		"/api/v2/company/resolve": {{status: 200, fixture: "enrichlayer/resolve.json"}},
		"/api/v2/company":         {{status: 200, fixture: "enrichlayer/company_full.json"}}})
	ctx, tally := context.Background(), enrich.NewTally(&books{fail: true}, &enrich.Booking{Calls: 1, Credits: 1})
	// The resolve, 2 credits, is more than the ask was admitted at: it must be booked.
	_, err := el.CompanyByDomain(ctx, tally, "acme.com")
	if !errors.Is(err, enrich.ErrUnavailable) {
		t.Fatalf("err = %v, want one wrapping ErrUnavailable", err)
	}
	if n := len(vendor.requests()); n != 0 {
		t.Fatalf("the vendor got %d requests", n)
	}
	st := el.Stats()
	if tally.Calls() != 0 || *st.Calls != 0 || *st.Errors != 0 {
		t.Fatalf("tally calls %d, meter calls %d and errors %d; want none", tally.Calls(), *st.Calls, *st.Errors)
	}
}

// sim charges what it is set to for each answer that knows the subject; a miss is free.
func TestSimCredits(t *testing.T) {
	s := &source.Sim{Credits: 3}
	ctx, tally := context.Background(), &enrich.Tally{}
	if _, err := s.CompanyByDomain(ctx, tally, "acme.com"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CompanyByDomain(ctx, tally, "missing.com"); err == nil {
		t.Fatal("missing.com was found")
	}
	if tally.Calls() != 2 || tally.Credits() != 3 {
		t.Fatalf("calls %d, credits %d; want 2 and 3", tally.Calls(), tally.Credits())
	}
}
