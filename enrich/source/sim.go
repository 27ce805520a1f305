package source

import (
	"context"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
	"unicode"

	"enrichd/enrich"
	"enrichd/enrich/namecorpus"
)

// Sim is the `sim` source: a synthetic network, not real data. Every company and
// person it returns is derived from a hash of the domain or URL asked for, so the same
// question always gets the same answer. Domains whose first label starts with
// "missing" and URLs whose slug does are not found. Latency is added to every call,
// and FailureRate (0 to 1) of the calls fail at random as unavailable.
type Sim struct {
	NetworkHost string
	Latency     time.Duration
	FailureRate float64
	// Credits is what each answer that knows its subject costs, in vendor credits, for
	// trying budgets and spend without a vendor; a miss or a failure costs nothing.
	Credits int64
	// Now stamps the records it makes; time.Now when nil.
	Now func() time.Time
	// Names is where its companies' staff draw their names from: SimNamesLists (the
	// default), names enrichd's lists of given names hold, or SimNamesHeldOut, names
	// of 21 Latin-script cultures that no list of enrichd holds (enrich/namecorpus),
	// with compound given names, double surnames, particles and diacritics.
	Names string
}

// The name sets the sim draws its staff from (Sim.Names).
const (
	SimNamesLists   = "lists"
	SimNamesHeldOut = "heldout"
)

var (
	_ enrich.Source        = (*Sim)(nil)
	_ enrich.StaffSearcher = (*Sim)(nil)
)

// Prices makes sim a priced source (enrich.Priced), held to budgets and counted in
// spend: an answer costs Credits, which no call kind of enrich.Prices names, so both
// are 0 and an email lookup weighs its calls as free.
func (s *Sim) Prices() enrich.Prices { return enrich.Prices{} }

func (s *Sim) Name() string { return "sim" }

func (s *Sim) CompanyByDomain(ctx context.Context, tally *enrich.Tally, domain string) (*enrich.Company, error) {
	if err := s.call(ctx, tally); err != nil {
		return nil, err
	}
	label, _, _ := strings.Cut(domain, ".")
	if strings.HasPrefix(label, "missing") {
		return nil, fmt.Errorf("sim: %s: %w", domain, enrich.ErrNotFound)
	}
	s.charge(ctx, tally)
	return s.company(label, domain), nil
}

func (s *Sim) CompanyByURL(ctx context.Context, tally *enrich.Tally, networkURL string) (*enrich.Company, error) {
	if err := s.call(ctx, tally); err != nil {
		return nil, err
	}
	slug := enrich.SlugOf(networkURL)
	if strings.HasPrefix(slug, "missing") {
		return nil, fmt.Errorf("sim: %s: %w", networkURL, enrich.ErrNotFound)
	}
	s.charge(ctx, tally)
	domain, err := enrich.Normalizer{}.Domain(slug + ".com")
	if err != nil {
		domain = strings.Map(domainRune, slug) + ".com"
	}
	return s.company(slug, domain), nil
}

func (s *Sim) PersonByURL(ctx context.Context, tally *enrich.Tally, networkURL string) (*enrich.Person, error) {
	if err := s.call(ctx, tally); err != nil {
		return nil, err
	}
	slug := enrich.SlugOf(networkURL)
	if strings.HasPrefix(slug, "missing") {
		return nil, fmt.Errorf("sim: %s: %w", networkURL, enrich.ErrNotFound)
	}
	s.charge(ctx, tally)
	r := seeded(networkURL)
	first, last := namesFromSlug(slug)
	if first == "" {
		first, last = simFirstNames[r.IntN(len(simFirstNames))], simLastNames[r.IntN(len(simLastNames))]
	}
	now := s.now()
	host := s.host()
	employer := simCompanies[r.IntN(len(simCompanies))]
	previous := simCompanies[r.IntN(len(simCompanies))]
	employerURL := "https://" + host + "/company/" + strings.ToLower(employer)
	previousURL := "https://" + host + "/company/" + strings.ToLower(previous)
	// A profile a staff search pointed at works, or worked, at the company searched.
	if m, ok := parseStaffSlug(slug); ok {
		first, last = m.first, m.last
		if staff := s.Staff(m.company); s.Names == SimNamesHeldOut && m.n >= 1 && m.n <= len(staff) {
			first, last = staff[m.n-1].FirstName, staff[m.n-1].LastName // as written, not as the slug spells them
		}
		name, url := titleCase(strings.ReplaceAll(m.company, "-", " ")), "https://"+host+"/company/"+m.company
		if m.current {
			employer, employerURL = name, url
		} else {
			previous, previousURL = name, url
		}
	}
	startYear := 2012 + r.IntN(12)
	city := simCities[r.IntN(len(simCities))]
	title := simTitles[r.IntN(len(simTitles))]
	p := &enrich.Person{
		NetworkURL:         enrich.Ptr("https://" + host + "/in/" + slug),
		FullName:           enrich.Ptr(first + " " + last),
		FirstName:          enrich.Ptr(first),
		LastName:           enrich.Ptr(last),
		Headline:           enrich.Ptr(title + " at " + employer),
		City:               enrich.Ptr(city[0]),
		CountryCode:        enrich.Ptr(city[1]),
		NetworkFollowers:   enrich.Ptr(int64(r.IntN(5000))),
		NetworkConnections: enrich.Ptr(int64(r.IntN(500))),
		Memorialized:       enrich.Ptr(false),
		EnrichmentStatus:   enrich.StatusEnriched,
		LastEnrichedAt:     &now,
		Positions: []enrich.Position{
			{
				Title:              enrich.Ptr(title),
				CompanyName:        enrich.Ptr(employer),
				CompanyNetworkURL:  enrich.Ptr(employerURL),
				EmploymentType:     enrich.Ptr("Full-time"),
				StartDate:          enrich.Ptr(fmt.Sprintf("%d-%02d-01", startYear, 1+r.IntN(12))),
				StartDatePrecision: enrich.Ptr("month"),
				IsCurrent:          true,
			},
			{
				Title:              enrich.Ptr(simTitles[r.IntN(len(simTitles))]),
				CompanyName:        enrich.Ptr(previous),
				CompanyNetworkURL:  enrich.Ptr(previousURL),
				StartDate:          enrich.Ptr(fmt.Sprintf("%d-01-01", startYear-3)),
				StartDatePrecision: enrich.Ptr("year"),
				EndDate:            enrich.Ptr(fmt.Sprintf("%d-01-01", startYear)),
				EndDatePrecision:   enrich.Ptr("year"),
			},
		},
	}
	return p, nil
}

// SearchStaff lists the synthetic staff of the company (derived from a hash of its
// page's slug, or of its domain's first label) whose names may be among q.Names. As on
// a real network, a few of the people listed have left the company: their profiles
// show the position ended.
func (s *Sim) SearchStaff(ctx context.Context, tally *enrich.Tally, q enrich.StaffQuery) ([]enrich.StaffMember, error) {
	if err := s.call(ctx, tally); err != nil {
		return nil, err
	}
	slug := s.companySlug(q.Company)
	if slug == "" || strings.HasPrefix(slug, "missing") {
		return nil, fmt.Errorf("sim: staff of %q: %w", slug, enrich.ErrNotFound)
	}
	var out []enrich.StaffMember
	for _, m := range s.Staff(slug) {
		if q.MayBe(&enrich.Person{FirstName: &m.FirstName, LastName: &m.LastName}) {
			out = append(out, enrich.StaffMember{NetworkURL: m.NetworkURL, FullName: m.FirstName + " " + m.LastName})
			if q.Limit > 0 && len(out) >= q.Limit {
				break
			}
		}
	}
	return out, nil
}

func (s *Sim) companySlug(c *enrich.Company) string {
	if c == nil {
		return ""
	}
	if c.NetworkURL != nil {
		if u, err := (enrich.Normalizer{NetworkHost: s.NetworkHost}).CompanyURL(*c.NetworkURL); err == nil {
			return enrich.SlugOf(u)
		}
	}
	if c.Domain != nil {
		label, _, _ := strings.Cut(*c.Domain, ".")
		return label
	}
	return ""
}

// SimStaffMember is one person of a sim company's staff.
type SimStaffMember struct {
	FirstName, LastName string
	NetworkURL          string
	Current             bool // false: they have left the company
	// Name is the name as its culture writes it, for staff drawn from the held-out
	// names (SimNamesHeldOut); zero otherwise.
	Name namecorpus.Name
}

// Staff is the synthetic staff of the sim company with this page slug: 12 to 40
// people, about one in eight of whom has left. Names repeat, as they do in real
// companies, so some addresses fit several people.
//
// With the held-out names (SimNamesHeldOut), most of a company's staff share a culture
// (the company's), the rest come from any of the 21, and the names are written as
// their culture writes them.
func (s *Sim) Staff(companySlug string) []SimStaffMember {
	r := seeded("staff:" + companySlug)
	n := 12 + r.IntN(29)
	heldOut := s.Names == SimNamesHeldOut
	var culture string
	if heldOut {
		// Drawn from a source of its own: the staff of the lists' names stay as they were.
		cultures := namecorpus.Locales()
		culture = cultures[seeded("culture:"+companySlug).IntN(len(cultures))]
	}
	out := make([]SimStaffMember, 0, n)
	names := seeded("names:" + companySlug)
	for i := range n {
		m := SimStaffMember{
			FirstName: simFirstNames[r.IntN(len(simFirstNames))],
			LastName:  simLastNames[r.IntN(len(simLastNames))],
			Current:   r.IntN(8) != 0,
		}
		if heldOut {
			from := culture
			if names.IntN(10) >= 6 {
				from = ""
			}
			m.Name = namecorpus.Draw(names, from)
			m.FirstName, m.LastName = m.Name.First(), m.Name.Last()
		}
		marker := staffAt
		if !m.Current {
			marker = staffFormer
		}
		m.NetworkURL = fmt.Sprintf("https://%s/in/%s-%s-%s%s-%d", s.host(), slugWords(m.FirstName), slugWords(m.LastName),
			marker, hex.EncodeToString([]byte(companySlug)), i+1)
		out = append(out, m)
	}
	return out
}

// slugWords writes a name as a profile slug does: folded, words joined by hyphens.
func slugWords(name string) string {
	return strings.Join(strings.FieldsFunc(enrich.Fold(name), func(r rune) bool { return !unicode.IsLetter(r) }), "-")
}

// A staff profile's slug is first-last-<marker><hex of the company slug>-<n>: the
// marker says whether they work there now.
const (
	staffAt     = "at"
	staffFormer = "ex"
)

type staffSlug struct {
	first, last, company string
	current              bool
	n                    int // the person's place in the company's staff, from 1
}

func parseStaffSlug(slug string) (staffSlug, bool) {
	parts := strings.Split(slug, "-")
	k := len(parts) - 2
	if k < 2 || strings.Trim(parts[k+1], "0123456789") != "" || parts[k+1] == "" {
		return staffSlug{}, false
	}
	marker, encoded := parts[k][:min(2, len(parts[k]))], parts[k][min(2, len(parts[k])):]
	company, err := hex.DecodeString(encoded)
	if (marker != staffAt && marker != staffFormer) || err != nil || len(company) == 0 ||
		strings.Trim(string(company), "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
		return staffSlug{}, false
	}
	n, _ := strconv.Atoi(parts[k+1])
	return staffSlug{
		first:   asListed(simFirstNames, titleCase(parts[0])),
		last:    asListed(simLastNames, strings.ReplaceAll(titleCase(strings.Join(parts[1:k], " ")), " ", "-")),
		company: string(company),
		current: marker == staffAt,
		n:       n,
	}, true
}

// asListed is name as the staff list writes it ("McCarthy"), which a slug's lower
// case loses: a profile shows the name its listing shows.
func asListed(names []string, name string) string {
	for _, n := range names {
		if strings.EqualFold(n, name) {
			return n
		}
	}
	return name
}

func (s *Sim) company(slug, domain string) *enrich.Company {
	r := seeded(domain)
	now := s.now()
	employees := int64(5 + r.IntN(20000))
	city := simCities[r.IntN(len(simCities))]
	return &enrich.Company{
		Name:             titleCase(strings.ReplaceAll(slug, "-", " ")),
		EnrichmentStatus: enrich.StatusEnriched,
		Domain:           enrich.Ptr(domain),
		NetworkURL:       enrich.Ptr("https://" + s.host() + "/company/" + slug),
		NetworkID:        enrich.Ptr(fmt.Sprint(1000000 + r.IntN(90000000))),
		NetworkFollowers: enrich.Ptr(int64(r.IntN(100000))),
		EmployeeCount:    enrich.Ptr(employees),
		EmployeeRange:    enrich.Ptr(employeeRange(employees)),
		PrimaryIndustry:  enrich.Ptr(simIndustries[r.IntN(len(simIndustries))]),
		OrganizationType: enrich.Ptr("Privately Held"),
		YearFounded:      enrich.Ptr(1950 + r.IntN(74)),
		About:            enrich.Ptr("A synthetic company of the sim network."),
		Headquarters:     map[string]any{"city": city[0], "country": city[1]},
		CreatedAt:        &now,
		UpdatedAt:        &now,
	}
}

func (s *Sim) call(ctx context.Context, tally *enrich.Tally) error {
	// On the ask's books at its full price before it is made, as a vendor's request is.
	if err := tally.Book(ctx, s.Credits); err != nil {
		return err
	}
	if s.Latency > 0 {
		t := time.NewTimer(s.Latency)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	tally.Call()
	if s.FailureRate > 0 && rand.Float64() < s.FailureRate {
		return fmt.Errorf("sim: simulated outage: %w", enrich.ErrUnavailable)
	}
	return nil
}

// charge counts one answer's credits on the ask's Tally.
func (s *Sim) charge(ctx context.Context, tally *enrich.Tally) {
	if s.Credits > 0 {
		tally.Charge(s.Credits)
	}
}

func (s *Sim) host() string { return enrich.Normalizer{NetworkHost: s.NetworkHost}.Host() }

func (s *Sim) now() time.Time {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	return now().UTC().Truncate(time.Millisecond)
}

func seeded(key string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(key))
	return rand.New(rand.NewPCG(h.Sum64(), 0x656e72696368))
}

// namesFromSlug reads "jane-doe-1a2b" as Jane Doe; it gives "" when the slug has no
// two alphabetic parts.
func namesFromSlug(slug string) (first, last string) {
	var words []string
	for _, w := range strings.Split(slug, "-") {
		if w != "" && strings.IndexFunc(w, func(r rune) bool { return !unicode.IsLetter(r) }) < 0 {
			words = append(words, titleCase(w))
		}
	}
	if len(words) < 2 {
		return "", ""
	}
	return words[0], words[len(words)-1]
}

func titleCase(s string) string {
	words := strings.Fields(s)
	for i, w := range words {
		r := []rune(w)
		r[0] = unicode.ToUpper(r[0])
		words[i] = string(r)
	}
	return strings.Join(words, " ")
}

func domainRune(r rune) rune {
	if r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r) {
		return r
	}
	return -1
}

func employeeRange(n int64) string {
	for _, b := range [][2]int64{{1, 10}, {11, 50}, {51, 200}, {201, 500}, {501, 1000}, {1001, 5000}, {5001, 10000}} {
		if n <= b[1] {
			return fmt.Sprintf("%d-%d", b[0], b[1])
		}
	}
	return "10001-50000"
}

var (
	simFirstNames = []string{"Ada", "Alan", "Grace", "Linus", "Barbara", "Ken", "Margaret", "Dennis", "Frances", "John", "Radia", "Tim", "Hedy", "Vint", "Katherine", "Edsger"}
	simLastNames  = []string{"Lovelace", "Turing", "Hopper", "Torvalds", "Liskov", "Thompson", "Hamilton", "Ritchie", "Allen", "McCarthy", "Perlman", "Berners-Lee", "Lamarr", "Cerf", "Johnson", "Dijkstra"}
	simCompanies  = []string{"Northwind", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay", "Soylent", "Stark", "Wayne", "Acme", "Cyberdyne", "Tyrell", "Wonka", "Gringotts", "Oscorp", "Aperture"}
	simTitles     = []string{"Software Engineer", "Product Manager", "Head of Sales", "Designer", "Data Scientist", "Account Executive", "CTO", "Marketing Lead", "Support Engineer", "Recruiter"}
	simIndustries = []string{"Software Development", "Financial Services", "Manufacturing", "Retail", "Hospital & Health Care", "Logistics", "Education", "Media"}
	simCities     = [][2]string{{"Berlin", "DE"}, {"London", "GB"}, {"New York", "US"}, {"San Francisco", "US"}, {"Paris", "FR"}, {"Toronto", "CA"}, {"Amsterdam", "NL"}, {"Sydney", "AU"}}
)

// SimSample is a person of the sim network whom a work email finds: the one current
// employee of their company under their name.
type SimSample struct {
	Email, FullName, Company, Domain string
}

// Sample lists up to n people whose first.last address at their company's domain the
// sim resolves to them alone: current employees whose full name nobody else on their
// company's staff has, current or former, one company at a time in turn, in the order
// of the sim's company names. The same n gives the same people.
func (s *Sim) Sample(n int) []SimSample {
	eligible := make([][]SimSample, len(simCompanies))
	for i, name := range simCompanies {
		slug := strings.ToLower(name)
		staff := s.Staff(slug)
		named := map[string]int{}
		for _, m := range staff {
			named[m.FirstName+" "+m.LastName]++
		}
		for _, m := range staff {
			full := m.FirstName + " " + m.LastName
			// A hyphenated name has addresses of several shapes; the sample keeps to the plain ones.
			if !m.Current || named[full] > 1 || strings.ContainsRune(full, '-') {
				continue
			}
			domain := slug + ".com"
			eligible[i] = append(eligible[i], SimSample{Email: strings.ToLower(m.FirstName + "." + m.LastName + "@" + domain),
				FullName: full, Company: titleCase(slug), Domain: domain})
		}
	}
	var out []SimSample
	for round := 0; len(out) < n; round++ {
		added := false
		for _, people := range eligible {
			if round < len(people) && len(out) < n {
				out, added = append(out, people[round]), true
			}
		}
		if !added {
			break
		}
	}
	return out
}
