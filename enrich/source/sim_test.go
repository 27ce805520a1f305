package source_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/matryer/is"

	"enrichd/enrich"
	"enrichd/enrich/source"
)

var simNow = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

func newSim() *source.Sim {
	return &source.Sim{Now: func() time.Time { return simNow }}
}

// simCall is one question asked of the sim source, by name.
type simCall struct {
	name   string
	target string
	ask    func(ctx context.Context, s *source.Sim, target string) (any, error)
}

func byDomain(ctx context.Context, s *source.Sim, t string) (any, error) {
	c, err := s.CompanyByDomain(ctx, nil, t)
	if c == nil {
		return nil, err
	}
	return c, err
}

func byCompanyURL(ctx context.Context, s *source.Sim, t string) (any, error) {
	c, err := s.CompanyByURL(ctx, nil, t)
	if c == nil {
		return nil, err
	}
	return c, err
}

func byPersonURL(ctx context.Context, s *source.Sim, t string) (any, error) {
	p, err := s.PersonByURL(ctx, nil, t)
	if p == nil {
		return nil, err
	}
	return p, err
}

var simHits = []simCall{
	{"domain", "acme.com", byDomain},
	{"domain co.uk", "acme.co.uk", byDomain},
	{"company url", "https://www.linkedin.com/company/acme-corp", byCompanyURL},
	{"person url", "https://www.linkedin.com/in/jane-doe-1a2b", byPersonURL},
	{"person url without names", "https://www.linkedin.com/in/x1234", byPersonURL},
}

func TestSimDeterministic(t *testing.T) {
	for _, c := range simHits {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			a, err := c.ask(ctx, newSim(), c.target)
			is.NoErr(err)
			b, err := c.ask(ctx, newSim(), c.target) // a separate Sim
			is.NoErr(err)
			s := newSim()
			_, err = c.ask(ctx, s, "https://www.linkedin.com/in/someone-else") // the order of questions does not matter
			is.NoErr(err)
			d, err := c.ask(ctx, s, c.target)
			is.NoErr(err)

			ja, err := json.Marshal(a)
			is.NoErr(err)
			jb, err := json.Marshal(b)
			is.NoErr(err)
			jd, err := json.Marshal(d)
			is.NoErr(err)
			is.Equal(string(ja), string(jb)) // same input, same result
			is.Equal(string(ja), string(jd))
		})
	}
}

func TestSimDifferentInputsDiffer(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := newSim()
	a, err := s.CompanyByDomain(ctx, nil, "acme.com")
	is.NoErr(err)
	b, err := s.CompanyByDomain(ctx, nil, "globex.com")
	is.NoErr(err)
	is.True(a.Name != b.Name)
	is.True(*a.NetworkID != *b.NetworkID) // derived from the domain, not constant
	is.True(*a.Domain != *b.Domain)
}

func TestSimCompany(t *testing.T) {
	tests := []struct {
		name       string
		ask        func(ctx context.Context, s *source.Sim) (*enrich.Company, error)
		host       string
		wantName   string
		wantDomain string
		wantURL    string
	}{
		{
			name: "by domain",
			ask: func(ctx context.Context, s *source.Sim) (*enrich.Company, error) {
				return s.CompanyByDomain(ctx, nil, "acme.com")
			},
			wantName:   "Acme",
			wantDomain: "acme.com",
			wantURL:    "https://www.linkedin.com/company/acme",
		},
		{
			name: "by url",
			ask: func(ctx context.Context, s *source.Sim) (*enrich.Company, error) {
				return s.CompanyByURL(ctx, nil, "https://www.linkedin.com/company/acme-corp")
			},
			wantName:   "Acme Corp",
			wantDomain: "acme-corp.com",
			wantURL:    "https://www.linkedin.com/company/acme-corp",
		},
		{
			name: "configured host",
			host: "network.example",
			ask: func(ctx context.Context, s *source.Sim) (*enrich.Company, error) {
				return s.CompanyByDomain(ctx, nil, "globex.co.uk")
			},
			wantName:   "Globex",
			wantDomain: "globex.co.uk",
			wantURL:    "https://network.example/company/globex",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			s := newSim()
			s.NetworkHost = tt.host
			c, err := tt.ask(context.Background(), s)
			is.NoErr(err)
			is.Equal(c.Name, tt.wantName)
			is.Equal(c.EnrichmentStatus, enrich.StatusEnriched)
			is.Equal(*c.Domain, tt.wantDomain)
			is.Equal(*c.NetworkURL, tt.wantURL)
			is.True(c.CreatedAt.Equal(simNow))
			is.True(c.UpdatedAt.Equal(simNow))
			is.True(c.Redirect == nil)
		})
	}
}

func TestSimMissing(t *testing.T) {
	tests := []simCall{
		{"domain", "missing.com", byDomain},
		{"domain with prefix", "missingco.co.uk", byDomain},
		{"company slug", "https://www.linkedin.com/company/missing-corp", byCompanyURL},
		{"person slug", "https://www.linkedin.com/in/missing-person-1a2b", byPersonURL},
		{"person slug exact", "https://www.linkedin.com/in/missing", byPersonURL},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			got, err := c.ask(context.Background(), newSim(), c.target)
			is.True(errors.Is(err, enrich.ErrNotFound))
			is.True(!errors.Is(err, enrich.ErrUnavailable))
			is.True(got == nil)
		})
	}
}

func TestSimMissingOnlyAsPrefixOfFirstLabelOrSlug(t *testing.T) {
	tests := []simCall{
		{"missing later in the label", "acme-missing.com", byDomain},
		{"missing in the second label", "shop.missing.com", byDomain},
		{"missing later in the slug", "https://www.linkedin.com/company/not-missing", byCompanyURL},
		{"missing later in the person slug", "https://www.linkedin.com/in/jane-missing", byPersonURL},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			got, err := c.ask(context.Background(), newSim(), c.target)
			is.NoErr(err)
			is.True(got != nil)
		})
	}
}

func TestSimFailureRate(t *testing.T) {
	for _, c := range simHits {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			s := newSim()
			s.FailureRate = 1
			for range 20 {
				got, err := c.ask(context.Background(), s, c.target)
				is.True(errors.Is(err, enrich.ErrUnavailable))
				is.True(!errors.Is(err, enrich.ErrNotFound))
				is.True(got == nil)
			}
			// A missing subject is an outage too while the source is down.
			_, err := byDomain(context.Background(), s, "missing.com")
			is.True(errors.Is(err, enrich.ErrUnavailable))
		})
	}
}

func TestSimNoFailuresAtRateZero(t *testing.T) {
	is := is.New(t)
	s := newSim()
	for i := range 200 {
		_, err := s.CompanyByDomain(context.Background(), nil, fmt.Sprintf("company%d.com", i))
		is.NoErr(err)
	}
}

func TestSimLatencyCancellable(t *testing.T) {
	tests := []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{
			name: "deadline",
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 20*time.Millisecond)
			},
			want: context.DeadlineExceeded,
		},
		{
			name: "canceled",
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx, cancel
			},
			want: context.Canceled,
		},
	}
	for _, tt := range tests {
		for _, c := range simHits {
			t.Run(tt.name+"/"+c.name, func(t *testing.T) {
				is := is.New(t)
				s := newSim()
				s.Latency = time.Hour // far longer than any test run: only the context can end the call
				ctx, cancel := tt.ctx()
				defer cancel()
				got, err := c.ask(ctx, s, c.target)
				is.True(errors.Is(err, tt.want))
				is.Equal(err, ctx.Err()) // the context's own error
				is.True(got == nil)
			})
		}
	}
}

func TestSimLatencyThenAnswer(t *testing.T) {
	is := is.New(t)
	s := newSim()
	s.Latency = time.Millisecond
	c, err := s.CompanyByDomain(context.Background(), nil, "acme.com")
	is.NoErr(err)
	is.Equal(c.Name, "Acme")
}

func TestSimPersonNames(t *testing.T) {
	tests := []struct {
		slug        string
		first, last string // "" when the slug carries no names
	}{
		{"jane-doe-1a2b", "Jane", "Doe"},
		{"jane-doe", "Jane", "Doe"},
		{"jane-mary-doe-42", "Jane", "Doe"},
		{"x1234", "", ""},
		{"jane", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.slug, func(t *testing.T) {
			is := is.New(t)
			url := "https://www.linkedin.com/in/" + tt.slug
			p, err := newSim().PersonByURL(context.Background(), nil, url)
			is.NoErr(err)
			is.Equal(*p.NetworkURL, url)
			is.Equal(p.EnrichmentStatus, enrich.StatusEnriched)
			is.True(p.LastEnrichedAt.Equal(simNow))
			is.True(*p.FirstName != "")
			is.True(*p.LastName != "")
			is.Equal(*p.FullName, *p.FirstName+" "+*p.LastName)
			if tt.first != "" {
				is.Equal(*p.FirstName, tt.first)
				is.Equal(*p.LastName, tt.last)
			}
		})
	}
}

func TestSimPersonPositions(t *testing.T) {
	date := regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
	for i := range 50 {
		slug := fmt.Sprintf("person-%d-x%d", i, i)
		t.Run(slug, func(t *testing.T) {
			is := is.New(t)
			p, err := newSim().PersonByURL(context.Background(), nil, "https://www.linkedin.com/in/"+slug)
			is.NoErr(err)

			// Check the JSON the API shows, not just the Go values.
			raw, err := json.Marshal(p)
			is.NoErr(err)
			var doc struct {
				Positions []map[string]any `json:"positions"`
			}
			is.NoErr(json.Unmarshal(raw, &doc))
			is.True(len(doc.Positions) > 0)

			current := 0
			for j, pos := range doc.Positions {
				end, hasEnd := pos["end_date"]
				is.True(hasEnd) // end_date is always present, null or a date
				start, _ := pos["start_date"].(string)
				is.True(date.MatchString(start))
				if pos["is_current"] == true {
					current++
					is.Equal(j, 0)     // current roles first
					is.Equal(end, nil) // end_date null for a current role
					is.Equal(pos["end_date_precision"], nil)
				} else {
					s, ok := end.(string)
					is.True(ok) // a past role has an end date
					is.True(date.MatchString(s))
					is.True(s >= start)
				}
			}
			is.Equal(current, 1) // exactly one current role
		})
	}
}

func TestSimEmployeeRange(t *testing.T) {
	is := is.New(t)
	form := regexp.MustCompile(`^(\d+)-(\d+)$`)
	s := newSim()
	// Enough domains that some headcounts fall on the edges of the buckets.
	for i := range 50000 {
		domain := fmt.Sprintf("company%d.com", i)
		c, err := s.CompanyByDomain(context.Background(), nil, domain)
		is.NoErr(err)
		m := form.FindStringSubmatch(*c.EmployeeRange)
		is.True(m != nil) // employee_range has the form low-high
		low, err := strconv.ParseInt(m[1], 10, 64)
		is.NoErr(err)
		high, err := strconv.ParseInt(m[2], 10, 64)
		is.NoErr(err)
		if low > high || *c.EmployeeCount < low || *c.EmployeeCount > high {
			t.Fatalf("%s: employee_count %d is outside employee_range %q", domain, *c.EmployeeCount, *c.EmployeeRange)
		}
	}
}

// The sim's cities and the countries they are in.
var simCountryOf = map[string]string{
	"Berlin": "DE", "London": "GB", "New York": "US", "San Francisco": "US",
	"Paris": "FR", "Toronto": "CA", "Amsterdam": "NL", "Sydney": "AU",
}

func TestSimCompanyHeadquartersConsistent(t *testing.T) {
	is := is.New(t)
	s := newSim()
	for i := range 50 {
		c, err := s.CompanyByDomain(context.Background(), nil, fmt.Sprintf("company%d.com", i))
		is.NoErr(err)
		city, _ := c.Headquarters["city"].(string)
		country, _ := c.Headquarters["country"].(string)
		want, known := simCountryOf[city]
		is.True(known)
		is.Equal(country, want) // the headquarters' country is the city's
	}
}

// A sim person's city and country_code come from one pick, so nobody lives in Sydney
// with country_code US.
func TestSimPersonCityMatchesCountry(t *testing.T) {
	s := newSim()
	for _, slug := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		t.Run(slug, func(t *testing.T) {
			is := is.New(t)
			p, err := s.PersonByURL(context.Background(), nil, "https://www.linkedin.com/in/"+slug)
			is.NoErr(err)
			want, known := simCountryOf[*p.City]
			is.True(known)
			is.Equal(*p.CountryCode, want) // the city's own country
		})
	}
}

// A sim person's headline names their current role.
func TestSimPersonHeadlineIsTheCurrentRole(t *testing.T) {
	s := newSim()
	for _, slug := range []string{"a", "b", "c", "d", "jane-doe"} {
		t.Run(slug, func(t *testing.T) {
			is := is.New(t)
			p, err := s.PersonByURL(context.Background(), nil, "https://www.linkedin.com/in/"+slug)
			is.NoErr(err)
			current := p.Positions[0]
			is.True(current.IsCurrent)
			is.Equal(*p.Headline, *current.Title+" at "+*current.CompanyName)
		})
	}
}

// A staff member's profile shows the name the staff list shows, capitals inside a
// name included (McCarthy), as a real network's search and profile do.
func TestSimStaffProfileNamedAsListed(t *testing.T) {
	is := is.New(t)
	s := newSim()
	seen := 0
	for _, company := range []string{"acme", "umbrella", "globex", "initech"} {
		for _, m := range s.Staff(company) {
			p, err := s.PersonByURL(context.Background(), nil, m.NetworkURL)
			is.NoErr(err)
			if *p.FullName != m.FirstName+" "+m.LastName {
				t.Errorf("%s is listed as %s %s and its profile says %s", m.NetworkURL, m.FirstName, m.LastName, *p.FullName)
			}
			seen++
		}
	}
	is.True(seen > 40)
}

// Sample lists people whose first.last address fits one current employee alone, the
// same ones for the same count, a company at a time.
func TestSimSample(t *testing.T) {
	is := is.New(t)
	s := newSim()
	people := s.Sample(20)
	is.Equal(len(people), 20)
	is.Equal(s.Sample(20), people)
	is.Equal(s.Sample(5), people[:5])
	companies := map[string]bool{}
	for _, p := range people {
		companies[p.Domain] = true
		label := p.Domain[:len(p.Domain)-len(".com")]
		fits := 0
		for _, m := range s.Staff(label) {
			if m.FirstName+" "+m.LastName == p.FullName {
				fits++
				is.True(m.Current)
			}
		}
		is.Equal(fits, 1) // nobody else on the staff, current or former, has the name
	}
	is.Equal(len(companies), 16) // every company before any gives a second person
	is.True(len(s.Sample(1000)) < 1000)
}

// With the held-out names, a sim company's staff are named as 21 Latin-script cultures
// name people, none of it on enrichd's lists: a profile the staff search lists is the
// person as the staff has them, diacritics and all, and a joined address of theirs is
// found by the search without a list.
func TestSimHeldOutNames(t *testing.T) {
	is := is.New(t)
	s := &source.Sim{Now: func() time.Time { return simNow }, Names: source.SimNamesHeldOut}
	lists := &source.Sim{Now: func() time.Time { return simNow }}
	staff := s.Staff("company-7")
	is.Equal(len(staff), len(lists.Staff("company-7"))) // the same companies, other names
	company, err := s.CompanyByDomain(context.Background(), nil, "company-7.com")
	is.NoErr(err)
	for _, m := range staff {
		is.True(m.Name.Locale != "")
		is.Equal(m.FirstName+" "+m.LastName, m.Name.Full())
		p, err := s.PersonByURL(context.Background(), nil, m.NetworkURL)
		is.NoErr(err)
		is.Equal(*p.FullName, m.Name.Full()) // as written, not as the slug spells it
		is.Equal(*p.Positions[0].CompanyNetworkURL == *company.NetworkURL, m.Current)
		local := m.Name.Renderings("firstlast")[0]
		hits, err := s.SearchStaff(context.Background(), nil, enrich.StaffQuery{Company: company,
			Names: enrich.LocalPartNames(local), Local: local, Splits: enrich.LocalPartSplits(local)})
		is.NoErr(err)
		found := false
		for _, h := range hits {
			found = found || h.NetworkURL == m.NetworkURL
		}
		is.True(found) // m.Name.Renderings("firstlast")[0]@ finds them
	}
}
