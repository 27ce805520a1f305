package enrich

import (
	"context"
	"errors"
	"time"
)

// EmailMatcher is a Source that can look a person up by a work address directly (a
// vendor's person match by email). What it answers is the vendor's closest match, so
// an email lookup takes it as a candidate and confirms it like any other: a current
// position at the company behind the domain and a name the local part fits.
type EmailMatcher interface {
	Source
	// PersonByEmail returns the person the source holds for the address; ErrNotFound
	// when it holds nobody.
	PersonByEmail(ctx context.Context, t *Tally, address string) (*Person, error)
}

// RecordMatcher is an EmailMatcher whose match is a record that has the address on
// record, not its closest guess: People Data Labs matches the address among the
// emails its records hold. Its confirmed answer is exact, as an address on record in
// the store is.
type RecordMatcher interface {
	EmailMatcher
	MatchesAddressOnRecord()
}

// Prices are what a source's calls cost upstream, in its vendor's credits, by its
// published price. An email lookup weighs a direct match against a staff search by
// them.
type Prices struct {
	// EmailMatch is one direct match by email (EmailMatcher.PersonByEmail).
	EmailMatch int64
	// StaffSearch is the least one staff search costs when it lists anyone: the
	// price of a call for a vendor that bills by the call, of one record for a vendor
	// that bills per record returned.
	StaffSearch int64
}

// Priced is a Source that says what its calls cost. A source that does not (the
// dataset, the website, the synthetic network) costs nothing.
type Priced interface {
	Prices() Prices
}

// PricesOf returns src's prices, zero when it states none.
func PricesOf(src Source) Prices {
	if p, ok := src.(Priced); ok {
		return p.Prices()
	}
	return Prices{}
}

// staffSearchPrice is the least the staff search of an email lookup costs: one search
// on every source that can, each at its least. ok is false when no source can search
// staff, and the search could confirm nobody at any price.
func (p *Pipeline) staffSearchPrice() (price int64, ok bool) {
	for _, src := range p.Sources {
		if _, searches := src.(StaffSearcher); searches {
			price += PricesOf(src).StaffSearch
			ok = true
		}
	}
	return price, ok
}

// directMatches is what the direct matches of one lookup went through.
type directMatches struct {
	asked       map[string]bool // by source name
	unavailable bool            // one could not be made
}

// directMatch asks the sources that match an address directly (EmailMatcher), in
// their order, for the person behind in.Target, and returns the first answer that
// confirms: a current position at the employer and a name the local part fits. A
// direct answer is a candidate, never the answer by itself: one that does not
// confirm is dropped and logged, and the lookup goes on. One that confirms names its
// vendor in email_match.matched_by, and is exact where the vendor matches the address
// on record (RecordMatcher), resolved where it is the vendor's closest match. first says the lookup has
// not searched the staff yet: the matches asked then are those that cost, together,
// no more than the staff search would (staffSearchPrice), a hit of which must still
// be retrieved where a direct answer is the profile itself; after a search that
// confirmed nobody, or could not be made (first false), the matches not asked before
// are.
func (p *Pipeline) directMatch(ctx context.Context, t *Task, employer Employer, in Input, local string, now time.Time, first bool, d *directMatches) (EmailOutcome, bool) {
	searchPrice, searchable := p.staffSearchPrice()
	var spent int64
	for _, src := range p.Sources {
		m, ok := src.(EmailMatcher)
		if !ok || d.asked[src.Name()] {
			continue
		}
		price := PricesOf(src).EmailMatch
		if first && searchable && spent+price > searchPrice {
			continue // the search costs less: asked after it, if it confirms nobody
		}
		if ctx.Err() != nil {
			return EmailOutcome{Err: timedOut()}, true
		}
		spent += price
		d.asked[src.Name()] = true
		a := p.askDirect(ctx, t, m, in.Target)
		if a.call.Outcome == OutcomeSkipped {
			a.record(ctx, p, t)
			if a.call.Reason == ReasonBudgetUnread {
				d.unavailable = true // it may know the person: a retry may ask it
			}
			continue // the organization's key or budget: as if this source were not configured
		}
		if a.err != nil {
			if ctx.Err() != nil {
				a.call.Outcome, a.call.Reason = OutcomeError, ReasonTimedOut
				a.record(ctx, p, t)
				return EmailOutcome{Err: timedOut()}, true
			}
			a.call.Outcome = OutcomeMiss
			if !errors.Is(a.err, ErrNotFound) {
				a.call.Outcome = OutcomeError
				d.unavailable = true
				p.warn("direct email match failed", src, a.err)
			}
			a.record(ctx, p, t)
			continue
		}
		c, ok := employer.Confirm(a.person, local, MatchResolved)
		_, onRecord := src.(RecordMatcher)
		// A vendor's closest match whom the address fits only possibly (Confirm) is two
		// guesses; a record the vendor has the address on is not.
		if ok && c.Possible && !onRecord {
			ok = false
		}
		if !ok {
			a.call.Outcome, a.call.Reason = OutcomeMiss, ReasonOtherSubject
			a.record(ctx, p, t)
			if p.Logger != nil {
				// The dropped profile is another person's: it stays out of the log.
				p.Logger.Info("direct email match dropped: no current position at the company under a name the address fits",
					"source", src.Name())
			}
			continue
		}
		a.call.Outcome = OutcomeHit
		a.record(ctx, p, t)
		c.Person = p.fillFound(ctx, t, a.person)
		c.Source, c.RetrievedAt, c.MatchedBy = src.Name(), now, src.Name()
		if onRecord {
			c.Method = MatchExact // the vendor has the address on record for them
		}
		return chosen(c, in.Target), true
	}
	return EmailOutcome{}, false
}

// directAsk is one direct match made, as the task's trace and spend keep it.
type directAsk struct {
	address string
	person  *Person
	err     error
	call    SourceCall
	booking *Booking // on the books, when it was admitted
}

// askDirect makes one direct match of m for t's organization, as the waterfall asks
// any source: through the organization's own key where it set one (Keys), within its
// budget (Spend), with the calls it sends counted (Tally). A source the
// organization's key or budget rules out comes back skipped, unasked.
func (p *Pipeline) askDirect(ctx context.Context, t *Task, m EmailMatcher, address string) directAsk {
	a := directAsk{address: address, call: SourceCall{Name: m.Name()}}
	use := m
	if p.Keys != nil {
		src, own, skip := p.Keys.For(ctx, t.Org, m)
		if skip != "" {
			a.call.Outcome, a.call.Reason = OutcomeSkipped, skip
			return a
		}
		if matcher, ok := src.(EmailMatcher); ok {
			use, a.call.OwnKey = matcher, own
		}
	}
	spend := p.spendFor(t)
	if spend != nil {
		var skip string
		if a.booking, skip = spend.Admit(ctx, t.Org, m.Name(), a.call.OwnKey); skip != "" {
			a.call.Outcome, a.call.Reason = OutcomeSkipped, skip
			return a
		}
	}
	tally := NewTally(spend, a.booking)
	start := time.Now()
	a.person, a.err = func() (*Person, error) {
		if spend != nil {
			defer spentOnPanic(ctx, spend, t.Org, a.call, tally)
		}
		return use.PersonByEmail(ctx, tally, address)
	}()
	a.call.MS = time.Since(start).Milliseconds()
	a.call.VendorCalls, a.call.Credits = tally.Calls(), tally.Credits()
	if a.err == nil && a.person == nil {
		a.err = ErrNotFound
	}
	return a
}

// record keeps the ask in the organization's spend (when it was admitted) and in the
// task's trace: a confirmed answer with every field it gave by this source.
func (a directAsk) record(ctx context.Context, p *Pipeline, t *Task) {
	if spend := p.spendFor(t); spend != nil && a.call.Outcome != OutcomeSkipped {
		spend.Spent(ctx, t.Org, a.call, a.booking)
	}
	tr := Trace{Sources: []SourceCall{a.call}}
	if a.call.Outcome != OutcomeHit {
		t.trace.record(Result{}, tr)
		return
	}
	res := Result{Person: a.person}
	m := newMerging(res, a.call.Name, a.call.OwnKey)
	tr.Provenance, tr.Private = m.provenance, m.private
	// A record that names no profile page is kept by the address, which the answer's
	// email_match names (Task.Trace).
	key := recordKey(res)
	if key == "" {
		key = emailKey(a.address)
	}
	t.trace.recordAs(key, tr)
}
