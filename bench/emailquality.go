package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"enrichd/enrich"
	"enrichd/enrich/namecorpus"
	"enrichd/enrich/source"
	"enrichd/server"
)

// The email-quality scenario answers, through the real server on the sim source, an
// address for every current and former employee of EmailCompanies sim companies in
// each common corporate pattern, and addresses that fit nobody, and scores the
// answers against the sim's own staff lists. Its truth does not come from the code it
// measures: an address belongs to the people whose name renders to it in one of the
// patterns below (written out here, nicknames left out).
//
// It runs on each name set the sim draws its staff from (Options.EmailNames): the
// names enrichd's lists of given names hold, whose coverage the lists flatter, and
// names of 21 Latin-script cultures that no list holds (source.SimNamesHeldOut,
// enrich/namecorpus), written as their cultures write them, whose addresses render as
// namecorpus's truth says (Name.Renderings).

// emailPatterns are the corporate local-part patterns the scenario writes addresses in.
var emailPatterns = []struct {
	name   string
	render func(first, last string) string
}{
	{"first.last", func(f, l string) string { return f + "." + l }},
	{"first_last", func(f, l string) string { return f + "_" + l }},
	{"firstlast", func(f, l string) string { return f + l }},
	{"flast", func(f, l string) string { return f[:1] + l }},
	{"f.last", func(f, l string) string { return f[:1] + "." + l }},
	{"last.first", func(f, l string) string { return l + "." + f }},
	{"lastf", func(f, l string) string { return l + f[:1] }},
	{"first", func(f, l string) string { return f }},
}

// nobodyNames are names no sim employee has: their addresses fit nobody.
var (
	nobodyFirst = []string{"zora", "ivo", "nell", "otto", "pia", "rex"}
	nobodyLast  = []string{"quill", "fenwick", "brandt", "okafor", "sato", "vance"}
)

// EmailQuality is the email-quality scenario's figures, for one name set.
type EmailQuality struct {
	// Names is the name set the staff are drawn from: lists or heldout.
	Names     string `json:"names"`
	Companies int    `json:"companies"`
	Current   int    `json:"current_employees"`
	Former    int    `json:"former_employees"`
	// Runs: "in order" on a fresh database, then "random order" on another fresh one,
	// its cache warmed by the same addresses asked in a shuffled order.
	Runs []EmailQualityRun `json:"runs"`
	// Changed lists the addresses whose answer (the person, or the failure's code)
	// differs between the runs; MethodChanged counts those answered with the same
	// person found another way (resolved in one run, inferred from a profile held
	// fresh in the other), which the order decides by design.
	Changed       []string `json:"changed"`
	MethodChanged int      `json:"method_changed"`
	// HeldOut is the same on the held-out names, when the scenario ran on both.
	HeldOut *EmailQuality `json:"held_out,omitempty"`
}

// EmailQualityRun is one pass over every address.
type EmailQualityRun struct {
	Order      string                 `json:"order"`
	Total      EmailQualityRow        `json:"total"`
	PerPattern []EmailQualityRow      `json:"per_pattern"`
	Wrong      []string               `json:"wrong"` // address -> who was answered, and who it is
	Seconds    float64                `json:"seconds"`
	answers    map[string]emailAnswer // by address
}

// EmailQualityRow is the score of a set of addresses.
type EmailQualityRow struct {
	Pattern   string `json:"pattern"`
	Addresses int    `json:"addresses"`
	// Fitting: addresses that fit at least one current employee; UniqueFit: exactly one.
	Fitting   int `json:"fitting"`
	UniqueFit int `json:"unique_fit"`
	Succeeded int `json:"succeeded"`
	Right     int `json:"right"`
	// RightUnique: right answers among the unique fits.
	RightUnique int `json:"right_unique"`
	Ambiguous   int `json:"ambiguous"`
	NotFound    int `json:"not_found"`
	Other       int `json:"other"` // any other failure (provider_unavailable, ...)
}

func (r EmailQualityRow) precision() float64 { return share(r.Right, r.Succeeded) }
func (r EmailQualityRow) coverage() float64  { return share(r.Right, r.Fitting) }
func (r EmailQualityRow) uniqueCoverage() float64 {
	return share(r.RightUnique, r.UniqueFit)
}
func (r EmailQualityRow) wrong() int { return r.Succeeded - r.Right }

func share(a, b int) float64 {
	if b == 0 {
		return 1
	}
	return float64(a) / float64(b)
}

// emailCase is one address and whom it belongs to.
type emailCase struct {
	company string // the sim company's slug
	address string
	pattern string   // the pattern it was written in; "nobody" for the addresses of nobody
	current []string // profile URLs of the current employees it belongs to
	former  []string
}

type emailAnswer struct {
	code   string // "" when it succeeded
	person string // profile URL
	method string
}

func (a emailAnswer) String() string {
	if a.code != "" {
		return a.code
	}
	return a.person + " (" + a.method + ")"
}

// emailCases writes the addresses of n sim companies, company by company, their staff
// drawn from the name set names.
func emailCases(n int, names string) (cases []emailCase, current, former int) {
	if names == source.SimNamesHeldOut {
		return heldOutCases(n)
	}
	sim := &source.Sim{NetworkHost: enrich.DefaultNetworkHost}
	for i := 1; i <= n; i++ {
		slug := fmt.Sprintf("company-%d", i)
		byAddress := map[string]*emailCase{}
		var order []string
		add := func(local, pattern, url string, isCurrent bool) {
			address := local + "@" + slug + ".com"
			c := byAddress[address]
			if c == nil {
				c = &emailCase{company: slug, address: address, pattern: pattern}
				byAddress[address] = c
				order = append(order, address)
			}
			list := &c.former
			if isCurrent {
				list = &c.current
			}
			if url != "" && !slices.Contains(*list, url) {
				*list = append(*list, url)
			}
		}
		staff := sim.Staff(slug)
		for _, m := range staff {
			if m.Current {
				current++
			} else {
				former++
			}
			first := strings.ToLower(m.FirstName)
			// A compound surname is written joined (bernerslee) in every pattern, and
			// with its hyphen (berners-lee) in the dotted ones too.
			last := strings.ToLower(m.LastName)
			joined := strings.ReplaceAll(last, "-", "")
			for _, p := range emailPatterns {
				add(p.render(first, joined), p.name, m.NetworkURL, m.Current)
				if joined != last && strings.Contains(p.name, ".") {
					add(p.render(first, last), p.name, m.NetworkURL, m.Current)
				}
			}
		}
		// An address a person's name renders to in another pattern belongs to them
		// too: written once, it carries every owner.
		for _, m := range staff {
			first, last := strings.ToLower(m.FirstName), strings.ToLower(m.LastName)
			for _, l := range []string{last, strings.ReplaceAll(last, "-", "")} {
				for _, p := range emailPatterns {
					if c := byAddress[p.render(first, l)+"@"+slug+".com"]; c != nil {
						list := &c.former
						if m.Current {
							list = &c.current
						}
						if !slices.Contains(*list, m.NetworkURL) {
							*list = append(*list, m.NetworkURL)
						}
					}
				}
			}
		}
		for k := range 6 {
			f, l := nobodyFirst[(i+k)%len(nobodyFirst)], nobodyLast[(i*7+k)%len(nobodyLast)]
			add(emailPatterns[k%len(emailPatterns)].render(f, l), "nobody", "", false)
		}
		for _, a := range order {
			cases = append(cases, *byAddress[a])
		}
	}
	return cases, current, former
}

// heldOutCases writes the addresses of n sim companies whose staff are drawn from the
// held-out names: each person's usual address in each pattern (namecorpus's
// Name.Usual), and six of names nobody there has; an address belongs to everyone
// whose name renders to it in any pattern (Name.Renderings).
func heldOutCases(n int) (cases []emailCase, current, former int) {
	sim := &source.Sim{NetworkHost: enrich.DefaultNetworkHost, Names: source.SimNamesHeldOut}
	for i := 1; i <= n; i++ {
		slug := fmt.Sprintf("company-%d", i)
		staff := sim.Staff(slug)
		byAddress := map[string]*emailCase{}
		var order []string
		add := func(local, pattern string) {
			address := local + "@" + slug + ".com"
			if byAddress[address] == nil {
				byAddress[address] = &emailCase{company: slug, address: address, pattern: pattern}
				order = append(order, address)
			}
		}
		for _, m := range staff {
			if m.Current {
				current++
			} else {
				former++
			}
			for _, p := range emailPatterns {
				add(m.Name.Usual(p.name), p.name)
			}
		}
		for _, m := range staff {
			for _, p := range namecorpus.Patterns {
				for _, local := range m.Name.Renderings(p) {
					c := byAddress[local+"@"+slug+".com"]
					if c == nil {
						continue
					}
					list := &c.former
					if m.Current {
						list = &c.current
					}
					if !slices.Contains(*list, m.NetworkURL) {
						*list = append(*list, m.NetworkURL)
					}
				}
			}
		}
		r := namecorpus.Seeded("nobody:" + slug)
		for k := 0; k < 6; {
			local := namecorpus.Draw(r, "").Usual(emailPatterns[k%len(emailPatterns)].name)
			if byAddress[local+"@"+slug+".com"] != nil {
				continue
			}
			taken := false
			for _, m := range staff {
				for _, p := range namecorpus.Patterns {
					taken = taken || slices.Contains(m.Name.Renderings(p), local)
				}
			}
			if taken {
				continue
			}
			add(local, "nobody")
			k++
		}
		for _, a := range order {
			cases = append(cases, *byAddress[a])
		}
	}
	return cases, current, former
}

func emailQuality(ctx context.Context, opt Options) (Result, error) {
	n := opt.EmailCompanies
	if n <= 0 {
		n = 50
	}
	sets := opt.EmailNames
	if len(sets) == 0 {
		sets = []string{source.SimNamesLists, source.SimNamesHeldOut}
	}
	var q *EmailQuality
	for _, names := range sets {
		set, err := emailQualitySet(ctx, opt, n, names)
		if err != nil {
			return Result{}, err
		}
		if q == nil {
			q = set
		} else {
			q.HeldOut = set
		}
	}
	// The figure is the held-out names' when they ran: the lists' flatters.
	shown := q
	if q.HeldOut != nil {
		shown = q.HeldOut
	}
	t := shown.Runs[0].Total
	errors := 0
	var notes []string
	for _, set := range []*EmailQuality{q, q.HeldOut} {
		if set == nil {
			continue
		}
		st := set.Runs[0].Total
		errors += st.wrong() + set.Runs[1].Total.wrong() + len(set.Changed)
		notes = append(notes, fmt.Sprintf("%s names: %d addresses, precision %.2f%%, coverage %.1f%%, unique-fit coverage %.2f%%, %d wrong; random order: %d wrong, %d answers changed",
			set.Names, st.Addresses, 100*st.precision(), 100*st.coverage(), 100*st.uniqueCoverage(), st.wrong(), set.Runs[1].Total.wrong(), len(set.Changed)))
	}
	return Result{Scenario: "email-quality", Unit: "% unique", Rate: 100 * t.uniqueCoverage(), Count: int64(t.Addresses),
		Errors: int64(errors), EmailQuality: q,
		Note: fmt.Sprintf("%d sim companies; %s (the figure is the %s names'; errors counts wrong answers and changes)",
			n, strings.Join(notes, "; "), shown.Names)}, nil
}

// emailQualitySet answers every address of n sim companies whose staff are drawn from
// the name set names, in order then shuffled, and compares the two runs.
func emailQualitySet(ctx context.Context, opt Options, n int, names string) (*EmailQuality, error) {
	cases, current, former := emailCases(n, names)
	q := &EmailQuality{Names: names, Companies: n, Current: current, Former: former}
	for _, order := range []string{"in order", "random order"} {
		run, err := emailQualityRun(ctx, opt, cases, order, names)
		if err != nil {
			return nil, err
		}
		q.Runs = append(q.Runs, run)
	}
	first, second := q.Runs[0].answers, q.Runs[1].answers
	for _, c := range cases {
		a, b := first[c.address], second[c.address]
		switch {
		case a.code != b.code || a.person != b.person:
			q.Changed = append(q.Changed, fmt.Sprintf("%s: %s, then %s", c.address, a, b))
		case a.method != b.method:
			q.MethodChanged++
		}
	}
	return q, nil
}

// emailQualityRun answers every address on a fresh server. Companies are answered
// side by side (their staff do not meet); within a company the addresses go one at a
// time, in the order written or shuffled, so what one lookup stores is there for the
// next.
func emailQualityRun(ctx context.Context, opt Options, cases []emailCase, order, names string) (EmailQualityRun, error) {
	e, err := newEnv(ctx, opt, func(cfg *server.Config) {
		cfg.Sources = []enrich.Source{&source.Sim{NetworkHost: enrich.DefaultNetworkHost, Names: names}}
	})
	if err != nil {
		return EmailQualityRun{}, err
	}
	defer e.close()
	key, _, err := e.newOrg(ctx, "bench")
	if err != nil {
		return EmailQualityRun{}, err
	}
	e.startWorkers()
	byCompany := map[string][]emailCase{}
	var companies []string
	for _, c := range cases {
		if _, ok := byCompany[c.company]; !ok {
			companies = append(companies, c.company)
		}
		byCompany[c.company] = append(byCompany[c.company], c)
	}
	if order != "in order" {
		r := rand.New(rand.NewPCG(23, 5))
		for _, list := range byCompany {
			r.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
		}
	}
	run := EmailQualityRun{Order: order, answers: map[string]emailAnswer{}}
	var mu sync.Mutex
	var firstErr error
	next := make(chan string)
	var wg sync.WaitGroup
	start := time.Now()
	for range max(1, min(opt.Concurrency, 8)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for company := range next {
				for _, c := range byCompany[company] {
					a, err := e.askEmail(ctx, key, c.address)
					mu.Lock()
					if err != nil && firstErr == nil {
						firstErr = fmt.Errorf("%s: %w", c.address, err)
					}
					run.answers[c.address] = a
					mu.Unlock()
					if err != nil {
						break
					}
				}
			}
		}()
	}
	for _, c := range companies {
		next <- c
	}
	close(next)
	wg.Wait()
	run.Seconds = time.Since(start).Seconds()
	if firstErr != nil {
		return run, firstErr
	}
	rows := map[string]*EmailQualityRow{}
	total := EmailQualityRow{Pattern: "all"}
	for _, c := range cases {
		row := rows[c.pattern]
		if row == nil {
			row = &EmailQualityRow{Pattern: c.pattern}
			rows[c.pattern] = row
		}
		a := run.answers[c.address]
		for _, r := range []*EmailQualityRow{row, &total} {
			r.Addresses++
			if len(c.current) > 0 {
				r.Fitting++
			}
			if len(c.current) == 1 {
				r.UniqueFit++
			}
			switch a.code {
			case "":
				r.Succeeded++
				if len(c.current) == 1 && a.person == c.current[0] {
					r.Right++
					r.RightUnique++
				}
			case "ambiguous":
				r.Ambiguous++
			case "not_found":
				r.NotFound++
			default:
				r.Other++
			}
		}
		if a.code == "" && !(len(c.current) == 1 && a.person == c.current[0]) {
			run.Wrong = append(run.Wrong, fmt.Sprintf("%s -> %s; current owners %v, former %v", c.address, a, c.current, c.former))
		}
	}
	run.Total = total
	for _, p := range append(patternNames(), "nobody") {
		if r := rows[p]; r != nil {
			run.PerPattern = append(run.PerPattern, *r)
		}
	}
	sort.Strings(run.Wrong)
	return run, nil
}

func patternNames() []string {
	var out []string
	for _, p := range emailPatterns {
		out = append(out, p.name)
	}
	return out
}

// askEmail enqueues an email lookup and waits for it to settle.
func (e *env) askEmail(ctx context.Context, key, address string) (emailAnswer, error) {
	body, _ := json.Marshal(map[string]string{"email": address})
	a, err := e.do(ctx, key, http.MethodPost, "/v1/people/enrich", string(body), "")
	if err != nil {
		return emailAnswer{}, err
	}
	if a.status != http.StatusOK && a.status != http.StatusAccepted {
		return emailAnswer{}, fmt.Errorf("POST: %d %s", a.status, a.body)
	}
	raw := a.body
	for {
		var got struct {
			Task struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"task"`
			Data *struct {
				NetworkURL string `json:"network_url"`
				EmailMatch *struct {
					Method string `json:"method"`
				} `json:"email_match"`
			} `json:"data"`
			Error *struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(raw, &got); err != nil {
			return emailAnswer{}, fmt.Errorf("reading %s: %w", raw, err)
		}
		switch got.Task.Status {
		case "succeeded":
			if got.Data != nil {
				out := emailAnswer{person: got.Data.NetworkURL}
				if got.Data.EmailMatch != nil {
					out.method = got.Data.EmailMatch.Method
				}
				return out, nil
			}
			// A task settled inside the request shows its data on the task's page.
		case "failed":
			code := "failed"
			if got.Error != nil {
				code = got.Error.Code
			}
			return emailAnswer{code: code}, nil
		default:
			select {
			case <-ctx.Done():
				return emailAnswer{}, ctx.Err()
			case <-time.After(2 * time.Millisecond):
			}
		}
		g, err := e.do(ctx, key, http.MethodGet, "/v1/tasks/"+got.Task.ID, "", "")
		if err != nil {
			return emailAnswer{}, err
		}
		if g.status != http.StatusOK {
			return emailAnswer{}, fmt.Errorf("GET task: %d %s", g.status, g.body)
		}
		raw = g.body
	}
}

// writeEmailQuality prints the scenario's table: a row per pattern, for each run, for
// each name set.
func writeEmailQuality(w interface{ Write([]byte) (int, error) }, q *EmailQuality) {
	fmt.Fprintf(w, "\nemail-quality, %s names: %d sim companies, %d current and %d former employees\n", q.Names, q.Companies, q.Current, q.Former)
	for _, run := range q.Runs {
		fmt.Fprintf(w, "\n%s (%.0f s)\n", run.Order, run.Seconds)
		fmt.Fprintf(w, "%-11s %9s %8s %7s %10s %10s %9s %9s %6s %9s %9s\n", "pattern", "addresses", "fitting", "unique", "succeeded", "precision", "coverage", "unique-fit", "wrong", "ambiguous", "not_found")
		for _, r := range append(run.PerPattern, run.Total) {
			fmt.Fprintf(w, "%-11s %9d %8d %7d %10d %9.2f%% %8.1f%% %9.2f%% %6d %9d %9d\n", r.Pattern, r.Addresses, r.Fitting, r.UniqueFit, r.Succeeded,
				100*r.precision(), 100*r.coverage(), 100*r.uniqueCoverage(), r.wrong(), r.Ambiguous, r.NotFound)
		}
		for _, wrong := range run.Wrong {
			fmt.Fprintf(w, "  wrong: %s\n", wrong)
		}
	}
	fmt.Fprintf(w, "\nanswers that changed with the order: %d (the same person found another way, resolved or inferred from a profile held fresh: %d)\n", len(q.Changed), q.MethodChanged)
	for _, c := range q.Changed {
		fmt.Fprintf(w, "  %s\n", c)
	}
	if q.HeldOut != nil {
		writeEmailQuality(w, q.HeldOut)
	}
}
