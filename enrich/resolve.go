package enrich

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// DefaultMaxRetrievals is how many profiles one email lookup retrieves at most.
const DefaultMaxRetrievals = 10

// heldStaffLimit bounds how many held people of one company an email lookup reads.
const heldStaffLimit = 500

// Held is what an email lookup reads of the data enrichd already holds (the 30-day
// store and the imported dataset). store implements it; enrich knows no SQL.
type Held interface {
	// PersonByEmail returns the person who has this address on record (compared as
	// AddressKey), in the store or else in the dataset; nil when nobody has.
	PersonByEmail(ctx context.Context, address string) (*HeldPerson, error)
	// CompanyByDomain returns the stored company that domain names, canonical or
	// alias, whatever its age; nil when none is stored.
	CompanyByDomain(ctx context.Context, domain string) (*HeldCompany, error)
	// CurrentStaff returns stored people with a current position whose company page,
	// domain or name is the employer's, at most limit. Callers check each position
	// with Employer.Employs: this is a shortlist.
	CurrentStaff(ctx context.Context, e Employer, limit int) ([]HeldPerson, error)
	// Gathering returns what a lookup of the address (AddressKey) gathered at or after
	// since; nil when nothing was.
	Gathering(ctx context.Context, address string, since time.Time) (*Gathering, error)
}

// HeldPerson is a person held, with when their profile was last retrieved.
type HeldPerson struct {
	Person       *Person
	LastEnriched time.Time
}

// HeldCompany is a company held, with when it was last retrieved.
type HeldCompany struct {
	Company      *Company
	LastEnriched time.Time
}

// Gathering is what an email lookup that found several people kept, so a retry of the
// same address with a hint is decided against the same profiles without a new search.
type Gathering struct {
	Address    string // AddressKey of the address
	Company    *Company
	Candidates []Candidate
	GatheredAt time.Time
}

// EmailOutcome is how an email lookup ends.
type EmailOutcome struct {
	// Result is the person, with EmailMatch set, when the lookup succeeded.
	Result Result
	// FetchedAt is when Result's profile was retrieved from its source: the result
	// is kept in the store as retrieved then, under the address looked up.
	FetchedAt time.Time
	// Err is why the lookup failed.
	Err *TaskError
	// Gathered, when set, is to be kept for a retry of the address with a hint.
	Gathered *Gathering
	// TieBroken says a hint picked the person among several the address fits: the
	// address did not name them alone, so it is not remembered as theirs, and what
	// was gathered for it stays for retries with other hints.
	TieBroken bool
	// Company is the company behind the domain when a source was asked for it rather
	// than read from the store, retrieved at CompanyAt: it is kept as a company
	// lookup's would be, so the next lookup at the domain reads it instead of asking
	// a vendor again. nil when the store answered, or nobody did.
	Company   *Company
	CompanyAt time.Time
}

// ResolveEmail resolves a work address to the one person it belongs to:
//
//  1. exact: the address is on record for a held person (refreshed first when older
//     than the freshness window);
//  2. a retry of an address that fit several people, while what was gathered for it
//     is kept (KeepGathered, within the freshness window), is decided against the
//     people gathered then, by its hints, without a new search; past it, the retry
//     goes on as a first lookup does;
//  3. the company behind the domain is identified (the store, else the sources, as a
//     company lookup would: aliases and redirects included); none -> not_found;
//  4. a direct match: a source that looks a person up by the address itself
//     (EmailMatcher) is asked before the staff search when it costs no more than
//     the search (directMatch), else after a search that confirmed nobody. Its
//     answer is a candidate: it succeeds (resolved) only with a current position at
//     that company and a name the local part fits, and is dropped otherwise;
//  5. resolved: the company's staff is searched on every source that can, with the
//     names the local part describes (LocalPartNames), its splits (LocalPartSplits)
//     and the local part itself (StaffQuery.Local); each plausible profile is read
//     (from what is held when it is younger than the freshness window, else
//     retrieved, or taken as its source returned it whole) and kept when it holds a
//     current position at that company under a name the local part fits, read every
//     way it splits (NamesOf). A search whose whole page is full, or that shows more
//     plausible people than MaxRetrievals, confirms nobody: not_found, whatever is
//     held;
//  6. inferred: held people with a current position at that company whose name the
//     local part fits, and whom the search did not decide. They add to the people
//     the search confirmed, never stand in for it, and decide nothing unless the
//     search saw everyone the address may stand for (see fits). Stale ones are
//     refreshed with what is left of MaxRetrievals, which steps 5 and 6 share.
//
// One person -> success, unless they fit only possibly (Candidate.Possible): then
// not_found; none -> not_found; several -> the hints sent break the tie, else
// ambiguous with the count and the hints that would. Hints never change the answer
// when one person fits.
func (p *Pipeline) ResolveEmail(ctx context.Context, t *Task, in Input) EmailOutcome {
	var id identified
	out := p.resolveEmail(ctx, t, in, &id)
	if id.fetched {
		out.Company, out.CompanyAt = id.company, id.at
	}
	return out
}

// identified is the company behind an email's domain, once a lookup has identified it:
// one lookup asks for it at most once, whichever of its steps needs it first.
type identified struct {
	done    bool
	company *Company
	terr    *TaskError
	fetched bool // a source answered, not the store
	at      time.Time
}

func (p *Pipeline) resolveEmail(ctx context.Context, t *Task, in Input, id *identified) EmailOutcome {
	address := in.Target
	if terr := Refusal(address); terr != nil {
		return EmailOutcome{Err: terr}
	}
	if p.Held == nil {
		return EmailOutcome{Err: &TaskError{Code: CodeInternalError, Message: "email lookups need the held data, which this server was built without"}}
	}
	local, domain, _ := SplitAddress(address)
	now := p.now()

	held, err := p.Held.PersonByEmail(ctx, address)
	if err != nil {
		return p.internal("reading the person on record", err)
	}
	if held != nil {
		if out, ok := p.exact(ctx, t, in, held, domain, now, id); ok {
			return out
		}
		// The person on record for the address no longer works there: resolve it afresh.
	}

	gathered, err := p.Held.Gathering(ctx, AddressKey(address), now.Add(-p.gatheringWindow()))
	if err != nil {
		return p.internal("reading the people gathered for the address", err)
	}
	if gathered != nil {
		employer := EmployerOf(gathered.Company, domain)
		return p.decide(ctx, t, in, employer, gathered.Company, gathered.Candidates, nil)
	}

	company, terr := p.identify(ctx, t, domain, now, id)
	if terr != nil {
		return EmailOutcome{Err: terr}
	}
	employer := EmployerOf(company, domain)
	if len(LocalPartNames(local)) == 0 {
		return EmailOutcome{Err: &TaskError{Code: CodeNotFound, Message: fmt.Sprintf("the local part of %s describes no name", address)}}
	}

	direct := &directMatches{asked: map[string]bool{}}
	if out, ok := p.directMatch(ctx, t, employer, in, local, now, true, direct); ok {
		return out
	}
	cands, terr := p.fits(ctx, t, employer, company, local, now)
	if (terr == nil && len(cands) == 0) || (terr != nil && (terr.Code == CodeNotFound || terr.Code == CodeProviderUnavailable)) {
		// Nobody confirmed: the direct matches not asked yet may still answer.
		if out, ok := p.directMatch(ctx, t, employer, in, local, now, false, direct); ok {
			return out
		}
		if direct.unavailable && (terr == nil || terr.Code == CodeNotFound) {
			// A vendor that could not answer now may know the person: a retry may.
			return EmailOutcome{Err: &TaskError{Code: CodeProviderUnavailable, Message: "a data source could not be reached while resolving the address, so nobody could be confirmed; retrying later is safe"}}
		}
	}
	if terr != nil {
		return EmailOutcome{Err: terr}
	}
	var keep *Gathering
	if len(cands) > 1 {
		keep = &Gathering{Address: AddressKey(address), Company: company, Candidates: cands, GatheredAt: now}
	}
	return p.decide(ctx, t, in, employer, company, cands, keep)
}

// exact serves the person the address is on record for, refreshed first when the
// profile is older than the freshness window (a refresh that cannot complete serves
// it as it is), as long as they still hold a current position at the company behind
// the domain. It reports false when they do not: the address is then resolved afresh.
func (p *Pipeline) exact(ctx context.Context, t *Task, in Input, held *HeldPerson, domain string, now time.Time, id *identified) (EmailOutcome, bool) {
	match := &EmailMatch{Method: MatchExact, Email: in.Target}
	person, at := held.Person, held.LastEnriched
	if p.Fresh && person.NetworkURL == nil {
		return EmailOutcome{}, false // no profile to ask the sources for: resolve the address afresh
	}
	if now.Sub(held.LastEnriched) >= p.freshness() && person.NetworkURL != nil {
		res, terr := p.Enrich(ctx, t, Input{Lookup: LookupPersonURL, Target: *person.NetworkURL})
		switch {
		case terr == nil:
			person, at = res.Person, now
		case terr.Code == CodeTimedOut, p.Fresh:
			return EmailOutcome{Err: terr}, true
		}
	}
	// The company behind the domain, if it can be identified now; the domain alone
	// otherwise (a refresh that cannot complete serves what is held).
	company, terr := p.identify(ctx, t, domain, now, id)
	if terr != nil && terr.Code == CodeTimedOut {
		return EmailOutcome{Err: terr}, true
	}
	if EmployerAt(company, domain).CurrentPosition(person) == nil {
		return EmailOutcome{}, false
	}
	// Filled when it was refreshed; a profile held fresh is served as it is held.
	return success(p.fillFound(ctx, t, person), match, at), true
}

// identify finds the company behind the domain: a stored company fresher than the
// window, else the sources, asked once a lookup (id remembers the answer).
func (p *Pipeline) identify(ctx context.Context, t *Task, domain string, now time.Time, id *identified) (*Company, *TaskError) {
	if id.done {
		return id.company, id.terr
	}
	id.company, id.terr = p.identifyOnce(ctx, t, domain, now, id)
	// A lookup that timed out may be asked again: the task's lifetime decides.
	id.done = id.terr == nil || id.terr.Code != CodeTimedOut
	return id.company, id.terr
}

func (p *Pipeline) identifyOnce(ctx context.Context, t *Task, domain string, now time.Time, id *identified) (*Company, *TaskError) {
	held, err := p.Held.CompanyByDomain(ctx, domain)
	if err != nil {
		return nil, &TaskError{Code: CodeInternalError, Message: "the stored company could not be read"}
	}
	if held != nil && now.Sub(held.LastEnriched) < p.freshness() {
		return held.Company, nil
	}
	res, terr := p.Enrich(ctx, t, Input{Lookup: LookupDomain, Target: domain})
	if terr != nil {
		if terr.Code == CodeNotFound {
			terr = &TaskError{Code: CodeNotFound, Message: "no company was found behind the domain " + domain}
		}
		return nil, terr
	}
	id.fetched, id.at = true, now
	return res.Company, nil
}

// fits returns the current employees of the company the local part fits: those the
// staff search shows, confirmed against their profiles (resolved), and the people held
// whom it did not decide (inferred).
//
// A person held is an answer only if the search saw everyone the address may stand
// for: a search that was cut off, that failed, that could not ask for every name, or
// that did not even list a person held who fits (so it cannot see the form the
// address takes) leaves the held people unable to decide alone. The lookup then fails:
// ambiguous when two or more people fit, not_found otherwise, never a person picked
// among others unseen. Without a source that can search staff, nothing is seen.
func (p *Pipeline) fits(ctx context.Context, t *Task, employer Employer, company *Company, local string, now time.Time) ([]Candidate, *TaskError) {
	found, s, terr := p.resolved(ctx, t, employer, company, local, now)
	if terr != nil {
		return nil, terr
	}
	if s.cutOff {
		// Whatever is held, nobody can be told apart from the people left unchecked:
		// the answer is the same whether or not any of them was looked up before.
		return nil, &TaskError{Code: CodeNotFound, Message: fmt.Sprintf(
			"the staff search shows more people at %s the address may stand for than this server retrieves for one lookup (%d), so nobody could be confirmed",
			company.Name, p.maxRetrievals())}
	}
	held, unseen, terr := p.inferred(ctx, t, employer, local, now, s, p.maxRetrievals()-s.retrievals)
	if terr != nil {
		return nil, terr
	}
	all := distinct(append(found, held...))
	if s.unavailable && len(all) < 2 {
		return nil, &TaskError{Code: CodeProviderUnavailable, Message: "a data source could not be reached while resolving the address, so nobody could be confirmed; retrying later is safe"}
	}
	if len(s.budget) > 0 && len(all) < 2 {
		// Every search that could be made was, and only budgets kept the others from
		// being asked: the lookup says so, as a company or profile lookup does.
		return nil, &TaskError{Code: CodeProviderUnavailable, Message: "the monthly budget of vendor credits of " + strings.Join(s.budget, ", ") +
			" is spent, so its staff search could not be made and nobody could be confirmed; retrying once the budget is raised or renewed is safe"}
	}
	if s.searchers == 0 || s.partial || unseen {
		why := "the staff search could not see everyone the address may stand for"
		switch {
		case s.searchers == 0:
			why = "none of this server's sources can search a company's staff"
		case s.partial:
			why = "the staff search could not ask for every name the address may stand for"
		}
		if len(all) < 2 {
			return nil, &TaskError{Code: CodeNotFound, Message: fmt.Sprintf(
				"%s, so nobody at %s could be confirmed as the only person it fits", why, company.Name)}
		}
		n := len(all)
		return nil, &TaskError{Code: CodeAmbiguous, Candidates: &n, HintsAccepted: []string{}, Message: fmt.Sprintf(
			"the address fits at least %d current employees of %s, and %s, so no hint can pick one", n, company.Name, why)}
	}
	return all, nil
}

// distinct drops the candidates whose profile URL an earlier one has: one person
// shown under two URLs, or both confirmed by the search and held, counts once.
func distinct(cands []Candidate) []Candidate {
	seen := map[string]bool{}
	out := make([]Candidate, 0, len(cands))
	for _, c := range cands {
		if u := c.Person.NetworkURL; u != nil {
			if seen[*u] {
				continue
			}
			seen[*u] = true
		}
		out = append(out, c)
	}
	return out
}

// inferred returns the held people at the company the local part fits, but for those
// the staff search decided (whose profile it retrieved or read fresh from what is
// held). unseen says one of them was not even listed by the search: the search cannot
// see the form the address takes, so the held people cannot decide alone. A profile
// older than the freshness window is retrieved again, within budget retrievals, and
// must still fit.
func (p *Pipeline) inferred(ctx context.Context, t *Task, employer Employer, local string, now time.Time, s staffSearch, budget int) (out []Candidate, unseen bool, terr *TaskError) {
	staff := s.held
	if !s.heldRead {
		var err error
		if staff, err = p.Held.CurrentStaff(ctx, employer, heldStaffLimit); err != nil {
			return nil, false, &TaskError{Code: CodeInternalError, Message: "the people held could not be read"}
		}
	}
	for _, h := range staff {
		if h.Person.NetworkURL != nil && s.decided[*h.Person.NetworkURL] {
			continue
		}
		c, ok := employer.Confirm(h.Person, local, MatchInferred)
		if !ok {
			continue
		}
		if h.Person.NetworkURL == nil || !s.listed[*h.Person.NetworkURL] {
			unseen = true
		}
		c.RetrievedAt = h.LastEnriched
		// A stale profile is retrieved again and must still fit. One that cannot be
		// retrieved now, or for which the lookup has no retrieval left, stays a
		// candidate as held: dropping it could leave another person as the only fit,
		// which would be a guess.
		if now.Sub(h.LastEnriched) >= p.freshness() && h.Person.NetworkURL != nil && budget > 0 {
			budget--
			res, terr := p.Enrich(ctx, t, Input{Lookup: LookupPersonURL, Target: *h.Person.NetworkURL})
			switch {
			case terr == nil:
				if c, ok = employer.Confirm(res.Person, local, MatchInferred); !ok {
					continue // the refreshed profile no longer fits: left, or renamed
				}
				c.RetrievedAt = now
			case terr.Code == CodeTimedOut:
				return nil, false, terr
			}
		}
		out = append(out, c)
	}
	return out, unseen, nil
}

// staffSearch is what a staff search went through, beyond the people it confirmed.
type staffSearch struct {
	searchers int // sources that can search staff
	// decided holds the profiles the search retrieved (or read fresh from what is
	// held, or that their source no longer has), by the URL it showed and the URL the
	// profile names: the search, not what is held, decides those people.
	decided map[string]bool
	// listed holds every profile URL a search showed, fitting or not.
	listed      map[string]bool
	unavailable bool // a search or a retrieval could not be made
	// budget names the sources whose search was not made because their monthly
	// budget of vendor credits is spent.
	budget []string
	// partial: a source could not ask for every name the local part stands for.
	partial bool
	// cutOff says the search may have left out people the address fits (its last
	// page was full), or shows more people it fits than one lookup retrieves: nobody
	// can be confirmed, and nothing was retrieved.
	cutOff     bool
	retrievals int // profiles retrieved
	// held is the company's current staff held, read once for the lookup.
	held     []HeldPerson
	heldRead bool
}

// resolved searches the company's staff on the sources that can, retrieves the
// plausible profiles (those whose shown name the address fits, or that show no whole
// name: see mayFit) and keeps those that confirm. A profile held younger than the
// freshness window is read from what is held instead of being retrieved again. Each
// source is first asked for one hit more than the lookup retrieves, and a search that
// returns that many is asked again for a whole page (StaffSearchMax); a source billed
// by the call (SearchBilledPerCall) is asked for the whole page at once, and one that
// pages (StaffPager) for the rest of it after the short page. Only a search
// whose whole page is full may have left people out: the names that cannot fit are
// dropped before anything is counted.
func (p *Pipeline) resolved(ctx context.Context, t *Task, employer Employer, company *Company, local string, now time.Time) ([]Candidate, staffSearch, *TaskError) {
	names := LocalPartNames(local)
	limit := p.maxRetrievals()
	var hits []string
	listedBy := map[string]string{}            // the source whose search listed a hit first
	records := map[string]map[string]*Person{} // whole records the searches returned, by source and URL
	s := staffSearch{listed: map[string]bool{}}
	for _, src := range p.Sources {
		own := false
		if p.Keys != nil {
			// The search is made with the organization's own key where it has one; its
			// hits are only leads, retrieved through Enrich, which keeps the trace.
			use, ownKey, skip := p.Keys.For(ctx, t.Org, src)
			if skip != "" {
				if _, ok := src.(StaffSearcher); ok {
					s.searchers++
					s.unavailable = true
				}
				continue
			}
			src, own = use, ownKey
		}
		ss, ok := src.(StaffSearcher)
		if !ok {
			continue
		}
		s.searchers++
		if ctx.Err() != nil {
			return nil, staffSearch{}, timedOut()
		}
		members, cutOff, skip, err := p.searchStaffSpent(ctx, t, src, ss, StaffQuery{Company: company, Names: names,
			Local: local, Splits: LocalPartSplits(local)}, limit, own)
		if skip != "" {
			// Not asked: as a source that could not answer now, and one whose budget is
			// spent is named, so that the lookup can say why.
			if skip == ReasonBudget {
				s.budget = append(s.budget, src.Name())
			} else {
				s.unavailable = true
			}
			continue
		}
		s.cutOff = s.cutOff || cutOff
		if errors.Is(err, ErrSearchIncomplete) {
			s.partial, err = true, nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, staffSearch{}, timedOut()
			}
			if !errors.Is(err, ErrNotFound) {
				s.unavailable = true
				p.warn("staff search failed", src, err)
			}
			continue
		}
		for _, m := range members {
			if m.NetworkURL == "" || s.listed[m.NetworkURL] {
				continue
			}
			s.listed[m.NetworkURL] = true
			listedBy[m.NetworkURL] = src.Name()
			if m.Profile != nil {
				if records[src.Name()] == nil {
					records[src.Name()] = map[string]*Person{}
				}
				records[src.Name()][m.NetworkURL] = m.Profile
			}
			// A name shown that the address cannot stand for is not worth a retrieval.
			if !mayFit(m, local) {
				continue
			}
			hits = append(hits, m.NetworkURL)
		}
	}
	if s.searchers == 0 {
		return nil, s, nil
	}
	if s.cutOff || len(hits) > limit {
		s.cutOff = true
		return nil, s, nil
	}
	staff, err := p.Held.CurrentStaff(ctx, employer, heldStaffLimit)
	if err != nil {
		return nil, staffSearch{}, &TaskError{Code: CodeInternalError, Message: "the people held could not be read"}
	}
	s.held, s.heldRead = staff, true
	fresh := map[string]HeldPerson{}
	for _, h := range staff {
		if h.Person.NetworkURL != nil && !p.Fresh && now.Sub(h.LastEnriched) < p.freshness() {
			fresh[*h.Person.NetworkURL] = h
		}
	}
	s.decided = map[string]bool{}
	var out []Candidate
	for _, u := range hits {
		if s.decided[u] {
			continue // the profile another hit retrieved names this URL as its own
		}
		if h, ok := fresh[u]; ok {
			// Held and fresh: what the source would say is what is held.
			s.decided[u] = true
			if c, ok := employer.Confirm(h.Person, local, MatchInferred); ok {
				c.RetrievedAt = h.LastEnriched
				out = append(out, c)
			}
			continue
		}
		s.retrievals++
		// A profile a search returned whole is that source's answer when it is
		// retrieved: asked again, it would be paid for twice.
		res, terr := p.enrich(ctx, t, Input{Lookup: LookupPersonURL, Target: u}, records)
		if terr != nil {
			switch terr.Code {
			case CodeTimedOut:
				return nil, staffSearch{}, terr
			case CodeProviderUnavailable:
				s.unavailable = true
			case CodeNotFound:
				// The source no longer has the profile: a copy held does not answer for
				// it (a store without one would not), nor is it asked for again.
				s.decided[u] = true
			}
			continue
		}
		s.decided[u] = true
		if res.Person.NetworkURL != nil {
			s.decided[*res.Person.NetworkURL] = true
		}
		if c, ok := employer.Confirm(res.Person, local, MatchResolved); ok {
			c.RetrievedAt, c.Source = now, listedBy[u]
			out = append(out, c)
		}
	}
	return out, s, nil
}

// searchStaffSpent is searchStaff held to the budgets of t's organization and
// counted in its spend, on the key it goes out with (own: the organization's), and in
// the task's sources, as Lookup holds every source it asks: a staff search is the
// dearest call a vendor bills (Enrich Layer's 10 credits). skip, when not "", is why the
// source was not asked (ReasonBudget).
func (p *Pipeline) searchStaffSpent(ctx context.Context, t *Task, src Source, ss StaffSearcher, q StaffQuery, limit int, own bool) (members []StaffMember, cutOff bool, skip string, err error) {
	call := SourceCall{Name: src.Name(), OwnKey: own}
	var booking *Booking
	spend := p.spendFor(t)
	if spend != nil {
		if booking, skip = spend.Admit(ctx, t.Org, src.Name(), own); skip != "" {
			call.Outcome, call.Reason = OutcomeSkipped, skip
			t.trace.record(Result{}, Trace{Sources: []SourceCall{call}})
			return nil, false, skip, nil
		}
	}
	tally := NewTally(spend, booking)
	start := time.Now()
	members, cutOff, err = func() ([]StaffMember, bool, error) {
		if spend != nil {
			defer spentOnPanic(ctx, spend, t.Org, call, tally)
		}
		return searchStaff(ctx, tally, ss, q, limit)
	}()
	call.VendorCalls, call.Credits, call.MS = tally.Calls(), tally.Credits(), time.Since(start).Milliseconds()
	switch {
	case (err == nil || errors.Is(err, ErrSearchIncomplete)) && len(members) > 0:
		call.Outcome = OutcomeHit
	case err == nil || errors.Is(err, ErrSearchIncomplete) || errors.Is(err, ErrNotFound):
		call.Outcome = OutcomeMiss
	default:
		call.Outcome = OutcomeError
	}
	if spend != nil {
		spend.Spent(ctx, t.Org, call, booking)
	}
	t.trace.record(Result{}, Trace{Sources: []SourceCall{call}})
	return members, cutOff, "", err
}

// searchStaff asks one source for the company's staff the names describe: first
// for one hit more than a lookup retrieves and, when that page is full, for a whole
// page (StaffSearchMax) in all. A source billed by the call is asked for the whole
// page at once; one that pages (StaffPager) is asked for the rest after the short
// page, so no record is returned twice, and not at all when its first page says more
// match than the whole page would show (ErrSearchBeyondPage). cutOff says the whole
// page was full, or would be: there may be more.
func searchStaff(ctx context.Context, tally *Tally, ss StaffSearcher, q StaffQuery, limit int) (members []StaffMember, cutOff bool, err error) {
	short := min(limit+1, StaffSearchMax)
	usable := func(err error) bool { return err == nil || errors.Is(err, ErrSearchIncomplete) }
	if pager, ok := ss.(StaffPager); ok {
		q.Limit = short
		members, next, err := pager.SearchStaffPage(ctx, tally, q, "")
		if errors.Is(err, ErrSearchBeyondPage) {
			// The rest of the page would be paid for and end cut off all the same.
			if errors.Is(err, ErrSearchIncomplete) {
				return members, true, ErrSearchIncomplete
			}
			return members, true, nil
		}
		if !usable(err) || len(members) < short || short == StaffSearchMax {
			return members, usable(err) && len(members) >= short, err
		}
		if next == "" {
			return members, false, err // a full page, and nothing after it
		}
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		q.Limit = StaffSearchMax - len(members)
		rest, _, restErr := pager.SearchStaffPage(ctx, tally, q, next)
		if !usable(restErr) {
			return nil, false, restErr
		}
		if restErr != nil {
			err = restErr
		}
		return append(members, rest...), len(rest) >= q.Limit, err
	}
	asks := []int{short, StaffSearchMax}
	if _, perCall := ss.(SearchBilledPerCall); perCall {
		asks = asks[1:] // a short page costs as much as a whole one
	}
	for _, ask := range asks {
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		q.Limit = ask
		members, err = ss.SearchStaff(ctx, tally, q)
		if usable(err) && len(members) >= ask {
			if ask == StaffSearchMax {
				return members, true, err // a whole page: there may be more
			}
			continue // a page the size asked: ask for a whole one
		}
		break
	}
	return members, false, err
}

// mayFit reports whether a search hit shown under this name may be a person the local
// part fits. Only a whole name rules a person out, read every way it splits (NamesOf:
// Kim Ly Tô is Kim / Ly Tô and Kim Ly / Tô), never by a guess at where the given names
// end: a name shown cut short ("Jonathan S.", a first name alone) or not at all may be
// anyone's, and is retrieved, so the answer does not depend on whether the person was
// held before.
func mayFit(m StaffMember, local string) bool {
	names := nameReadings(m.First, m.Last, strings.TrimSpace(m.FullName))
	if len(names) == 0 {
		return true
	}
	// A hit is only a lead: the profile may say its given names are all that come
	// before the surname, each with its initial, where its shown name alone cannot.
	names = leniently(names)
	for _, n := range names {
		if n.First == "" || n.Last == "" {
			return true
		}
		for _, part := range []string{n.First, n.Last} {
			for _, w := range nameWords(Fold(part)) {
				if utf8.RuneCountInString(w) < 2 {
					return true
				}
			}
		}
	}
	return MatchNames(names, local) != ""
}

// decide turns the people the address fits into the lookup's outcome. Only the person
// it settles on is filled (fillFound): the candidates are not, since until then none
// of them is known to be the one the address belongs to, and a vendor asked for the
// fields of the others would be paid for people the lookup does not return.
func (p *Pipeline) decide(ctx context.Context, t *Task, in Input, employer Employer, company *Company, cands []Candidate, keep *Gathering) EmailOutcome {
	address := in.Target
	switch len(cands) {
	case 0:
		return EmailOutcome{Err: &TaskError{Code: CodeNotFound, Message: fmt.Sprintf(
			"no current employee of %s was found whom %s fits", company.Name, address)}}
	case 1:
		if cands[0].Possible {
			return EmailOutcome{Err: &TaskError{Code: CodeNotFound, Message: fmt.Sprintf(
				"no current employee of %s was found whom %s surely fits: one fits it only if a word of their full name that may be a surname is a given name",
				company.Name, address)}}
		}
		return p.settled(ctx, t, cands[0], address)
	}
	if in.Hints.empty() {
		return EmailOutcome{Err: ambiguous(employer, company, address, cands, false), Gathered: keep}
	}
	picked := employer.pick(cands, in.Hints)
	switch len(picked) {
	case 0:
		return EmailOutcome{Gathered: keep, Err: &TaskError{Code: CodeNotFound, Message: fmt.Sprintf(
			"%s fits %d current employees of %s, and none of them matches the hints sent", address, len(cands), company.Name)}}
	case 1:
		out := p.settled(ctx, t, picked[0], address)
		out.Gathered, out.TieBroken = keep, true
		return out
	}
	return EmailOutcome{Err: ambiguous(employer, company, address, picked, true), Gathered: keep}
}

func ambiguous(employer Employer, company *Company, address string, cands []Candidate, hinted bool) *TaskError {
	n := len(cands)
	accepted := employer.HintsAccepted(cands)
	msg := fmt.Sprintf("%s fits %d current employees of %s", address, n, company.Name)
	if hinted {
		msg += " that match the hints sent"
	}
	if len(accepted) > 0 {
		msg += "; retry the same email with " + strings.Join(accepted, ", ") + " to tell them apart"
	} else {
		msg += ", and no hint tells them apart"
	}
	return &TaskError{Code: CodeAmbiguous, Message: msg, Candidates: &n, HintsAccepted: accepted}
}

// settled is the outcome for the one person decide settled the address on, filled
// with the person fields asked for. fillFound fills a copy: a gathering kept for
// retries holds the candidate as it was confirmed.
func (p *Pipeline) settled(ctx context.Context, t *Task, c Candidate, address string) EmailOutcome {
	c.Person = p.fillFound(ctx, t, c.Person)
	return chosen(c, address)
}

func chosen(c Candidate, address string) EmailOutcome {
	match := &EmailMatch{Method: c.Method, Email: address, Pattern: Ptr(c.Pattern)}
	if c.Source != "" {
		match.Source = Ptr(c.Source)
	}
	if c.MatchedBy != "" {
		match.MatchedBy = Ptr(c.MatchedBy)
	}
	return success(c.Person, match, c.RetrievedAt)
}

func success(person *Person, match *EmailMatch, fetchedAt time.Time) EmailOutcome {
	p := *person
	p.EmailMatch = match
	return EmailOutcome{Result: Result{Person: &p}, FetchedAt: fetchedAt}
}

func (p *Pipeline) internal(what string, err error) EmailOutcome {
	if p.Logger != nil {
		p.Logger.Error(what, "err", err)
	}
	return EmailOutcome{Err: &TaskError{Code: CodeInternalError, Message: "the email lookup failed on our side; retrying is safe"}}
}

func (p *Pipeline) warn(msg string, src Source, err error) {
	if p.Logger != nil {
		p.Logger.Warn(msg, "source", src.Name(), "err", err)
	}
}

func (p *Pipeline) now() time.Time {
	if p.Now != nil {
		return p.Now().UTC().Truncate(time.Millisecond)
	}
	return time.Now().UTC().Truncate(time.Millisecond)
}

func (p *Pipeline) freshness() time.Duration {
	if p.Fresh {
		return 0 // nothing held is fresh enough
	}
	return p.window()
}

// gatheringWindow is how long what an ambiguous lookup gathered is read: the
// freshness window, or KeepGathered when that is shorter.
func (p *Pipeline) gatheringWindow() time.Duration {
	w := p.freshness()
	if p.KeepGathered > 0 && p.KeepGathered < w {
		w = p.KeepGathered
	}
	return w
}

// window is the freshness window configured, 30 days when none is: how long a record,
// or a source's miss, is held.
func (p *Pipeline) window() time.Duration {
	if p.Freshness > 0 {
		return p.Freshness
	}
	return 30 * 24 * time.Hour
}

func (p *Pipeline) maxRetrievals() int {
	if p.MaxRetrievals > 0 {
		return p.MaxRetrievals
	}
	return DefaultMaxRetrievals
}
