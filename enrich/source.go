package enrich

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Source is what the pipeline needs from the outside world: the network's company
// pages and profiles, or any data vendor that can stand in for them. A source answers
// ErrNotFound when it knows nothing of the subject and ErrUnavailable (wrapped) when it
// cannot answer now. Each ask comes with its Tally, where the source counts the
// requests it sends upstream and what they cost; ctx is the ask's deadline.
type Source interface {
	Name() string
	// CompanyByDomain finds the company behind a registrable domain. When the domain
	// is not the company's canonical one, the result's Domain is the canonical domain
	// and Redirect says how the two were matched.
	CompanyByDomain(ctx context.Context, t *Tally, domain string) (*Company, error)
	// CompanyByURL finds a company by its normalized network page URL.
	CompanyByURL(ctx context.Context, t *Tally, networkURL string) (*Company, error)
	// PersonByURL finds a person by their normalized network profile URL.
	PersonByURL(ctx context.Context, t *Tally, networkURL string) (*Person, error)
}

// Keyed is a Source that calls a vendor with an API key: KeyEnv names the environment
// variable the installation's key is read from.
type Keyed interface {
	KeyEnv() string
}

// SourceStats is what an operator sees of one source: how many requests it sent
// upstream (what the upstream bills and rate-limits), how many failed, and the last
// failure. Calls and Errors are nil for a source that calls nothing upstream.
type SourceStats struct {
	Name        string     `json:"name"`
	Calls       *int64     `json:"calls"`
	Errors      *int64     `json:"errors"`
	LastError   *string    `json:"last_error"`
	LastErrorAt *time.Time `json:"last_error_at"`
}

// Metered is a Source that counts its upstream requests.
type Metered interface {
	Stats() SourceStats
}

// StatsOf returns the counters of src, or its name alone when it keeps none.
func StatsOf(src Source) SourceStats {
	if m, ok := src.(Metered); ok {
		return m.Stats()
	}
	return SourceStats{Name: src.Name()}
}

// StaffSearcher is a Source that can search one company's staff by name, which email
// lookups need. Not every source can (a company's website cannot).
type StaffSearcher interface {
	// SearchStaff lists the people the source shows at q.Company whose names may fit
	// q.Names. Its hits are leads, not answers: the caller retrieves each profile with
	// PersonByURL and confirms the current position and the name itself.
	SearchStaff(ctx context.Context, t *Tally, q StaffQuery) ([]StaffMember, error)
}

// SearchBilledPerCall is a StaffSearcher whose search costs the same whatever the
// page size asked (a vendor that bills by the call, not by the record): an email
// lookup asks it for a whole page at once, never for a short page and then again.
type SearchBilledPerCall interface {
	StaffSearcher
	SearchBilledPerCall()
}

// StaffPager is a StaffSearcher billed per record returned that can go on with a
// search from where its last page ended: an email lookup asks it for a short page
// and, when that page is full, for the rest of a whole page after it, so no record
// is returned, and paid for, twice.
type StaffPager interface {
	StaffSearcher
	// SearchStaffPage is SearchStaff from the position after names where a previous
	// page ended ("" for the first page). next is where this page ended, "" when
	// nothing is left after it. A first page that shows more people match than
	// StaffSearchMax comes with ErrSearchBeyondPage.
	SearchStaffPage(ctx context.Context, t *Tally, q StaffQuery, after string) (members []StaffMember, next string, err error)
}

// StaffQuery asks for the people at one company who may carry one of a few names.
type StaffQuery struct {
	// Company is the company the email's domain was identified as; its Domain and
	// NetworkURL are set when known.
	Company *Company
	// Names are the name words the local part may stand for, case- and accent-folded
	// ("smith", "john"); a source matches any of them against first or last names.
	Names []string
	// Local is the address's local part the names are read from: a source that holds
	// the people's records (the dataset, the sim) compares it with each person's own
	// name forms (MayBe), so a joined address is found without a list of given names.
	Local string
	// Splits are the local part's splits into two names (LocalPartSplits): a source
	// that matches names whole asks for both sides of each.
	Splits [][2]string
	// Limit is the most hits wanted, at most StaffSearchMax; a source may return
	// fewer, never more. Email lookups ask for one more than they retrieve, so a
	// search that returns Limit hits tells them it stopped before the end.
	Limit int
}

// MayBe reports whether the person may be one the query stands for: the local part
// fits one of the readings of their name (NamesOf), or one of Names is one of its
// forms (Matches). A source that holds people's records lists those it is true of.
func (q StaffQuery) MayBe(p *Person) bool {
	readings := leniently(NamesOf(p))
	if q.Local != "" && MatchNames(readings, q.Local) != "" {
		return true
	}
	for _, n := range readings {
		if q.Matches(n.First, n.Last) {
			return true
		}
	}
	return false
}

// StaffSearchMax is the most hits a staff search asks a source for (a vendor's
// largest page).
const StaffSearchMax = 100

// Matches reports whether a person of this first and last name may be one the
// query names: one of q.Names is one of the forms their name takes in an address
// (PersonName.variants: a name word, a nickname of the first name, a compound or
// particle surname joined, hyphenated or without its particles). So bernerslee
// finds Berners-Lee, and berg finds van der Berg. Sources use it to filter staff.
func (q StaffQuery) Matches(first, last string) bool {
	if len(q.Names) == 0 {
		return false
	}
	names := make(map[string]bool, len(q.Names))
	for _, n := range q.Names {
		names[n] = true
	}
	v := PersonName{First: first, Last: last}.variants()
	for _, forms := range [][]string{v.firsts, v.lasts} {
		for _, f := range forms {
			if names[f] {
				return true
			}
		}
	}
	return false
}

// StaffMember is one hit of a staff search: a profile worth retrieving.
type StaffMember struct {
	NetworkURL string // the normalized profile URL
	FullName   string // as the source shows it; "" when it does not
	// First and Last are the given names and the surname when the source shows them
	// apart; "" when it does not.
	First, Last string
	// Profile is the whole record when the search returned it (PDL's search returns
	// the records its person enrich does): the lookup's retrieval of the profile takes
	// it as this source's answer instead of asking, and paying, again.
	Profile *Person
}

// Result is what an enrichment produced: a company or a person.
type Result struct {
	Company *Company
	Person  *Person
}

// Pipeline asks its sources in order (Lookup): the first that knows the subject gives
// the record, and the next fill the fields it lacks that the ask wants.
type Pipeline struct {
	Sources []Source
	Logger  *slog.Logger

	// Held is the data already held, which email lookups read (ResolveEmail).
	Held Held
	// MaxRetrievals bounds the profiles one email lookup retrieves;
	// DefaultMaxRetrievals when 0.
	MaxRetrievals int
	// Freshness is how old a held profile may be and still be served as it is;
	// 30 days when 0.
	Freshness time.Duration
	// KeepGathered is how long what an ambiguous email lookup gathered (other people's
	// profiles, kept for a retry with a hint) is read: the freshness window when 0 or
	// longer. A retry past it searches again.
	KeepGathered time.Duration
	// Now is the clock freshness is measured on; time.Now when nil.
	Now func() time.Time
	// Keys, when set, gives the instance of each source an organization's task asks
	// (its own vendor key); Spend, when set, holds each organization to its budgets
	// and keeps what each ask cost. Both are consulted per source and ask.
	Keys  SourceKeys
	Spend Spend
	// Misses, when set, remembers the subjects the priced sources did not know, so
	// that none is asked for one again within the freshness window (ReasonKnownMiss).
	Misses Misses

	// Fresh makes ResolveEmail ask the sources for everything it answers with: no
	// held profile, company or gathering is served as it is, and a profile whose
	// refresh fails fails the lookup instead of being served from what is held; and
	// Lookup asks a source remembered not to know the subject all the same. A
	// watch's check is made this way: it compares what the source says now.
	Fresh bool
}

// Enrich looks a company or a profile up for t, the first source that knows the
// subject giving the answer: Lookup with no field to fill, its trace kept in t's
// (Task.Trace). It returns a result, or the
// TaskError the task fails with. Email lookups take more than one question and go
// through ResolveEmail, which asks its profiles and companies here, and fills a person
// only once they are confirmed (fillFound).
func (p *Pipeline) Enrich(ctx context.Context, t *Task, in Input) (Result, *TaskError) {
	return p.enrich(ctx, t, in, nil)
}

// enrich is Enrich taking the records given as their sources' answers (from.given).
func (p *Pipeline) enrich(ctx context.Context, t *Task, in Input, given map[string]map[string]*Person) (Result, *TaskError) {
	res, tr, terr := p.lookup(ctx, t, in, nil, from{given: given})
	t.trace.record(res, tr)
	return res, terr
}

func ask(ctx context.Context, t *Tally, src Source, in Input) (Result, error) {
	switch in.Lookup {
	case LookupDomain:
		c, err := src.CompanyByDomain(ctx, t, in.Target)
		return Result{Company: c}, err
	case LookupCompanyURL:
		c, err := src.CompanyByURL(ctx, t, in.Target)
		return Result{Company: c}, err
	case LookupPersonURL:
		p, err := src.PersonByURL(ctx, t, in.Target)
		return Result{Person: p}, err
	}
	return Result{}, fmt.Errorf("lookup %q: %w", in.Lookup, ErrNotFound)
}

func notFoundMessage(in Input) string {
	switch in.Lookup {
	case LookupDomain:
		return "no company was found for the domain " + in.Target
	case LookupCompanyURL:
		return "no company was found at " + in.Target
	}
	return "no person was found at " + in.Target
}

func timedOut() *TaskError {
	return &TaskError{Code: CodeTimedOut, Message: "the enrichment did not finish within the task's lifetime; retrying is safe"}
}
