package store

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"enrichd/enrich"

	"github.com/google/uuid"
)

// SourceUse is what asks of one source came to: the asks by outcome (Hits, Misses,
// Errors, and Unknown and Pending, whose outcome is not known), the requests they
// sent upstream (Calls) and the vendor credits those cost by the vendor's published
// price (Credits). An ask whose outcome is not known counts in Calls and Credits at
// its full price: every request it sent or was about to send, each at the most it can
// cost.
type SourceUse struct {
	Calls  int64 `json:"calls"`
	Hits   int64 `json:"hits"`
	Misses int64 `json:"misses"`
	Errors int64 `json:"errors"`
	// Unknown are the asks whose answer was never recorded: the process that sent them
	// ended first (a crash, a kill), and a sweep settled them at their full price.
	Unknown int64 `json:"unknown"`
	// Pending are the asks under way now, on the books at their full price until their
	// answers settle them.
	Pending int64 `json:"pending"`
	Credits int64 `json:"vendor_credits"`
}

func (u *SourceUse) add(o SourceUse) {
	u.Calls += o.Calls
	u.Hits += o.Hits
	u.Misses += o.Misses
	u.Errors += o.Errors
	u.Unknown += o.Unknown
	u.Pending += o.Pending
	u.Credits += o.Credits
}

// UseOf is what one ask of a source, as the pipeline reports it, adds to its use: a
// skipped ask adds nothing.
func UseOf(call enrich.SourceCall) SourceUse {
	u := SourceUse{Calls: call.VendorCalls, Credits: call.Credits}
	switch call.Outcome {
	case enrich.OutcomeHit:
		u.Hits = 1
	case enrich.OutcomeMiss:
		u.Misses = 1
	case enrich.OutcomeError:
		u.Errors = 1
	}
	return u
}

// DayStart is the start of t's UTC day: spend is kept per organization, source and day.
func DayStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// MonthStart is the start of t's UTC month: budgets are monthly.
func MonthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// AddSourceSpend adds u to what source cost orgID on the UTC day of at, with the
// organization's own vendor key (own) or the installation's: one small write. It is
// for the asks that put nothing on the books (SourceAsk): those of the sources that
// cost nothing, and of a priced source that sent nothing.
func (db *DB) AddSourceSpend(ctx context.Context, orgID, source string, own bool, at time.Time, u SourceUse) error {
	return db.Write(ctx, func(tx Tx) error {
		return addSourceSpend(ctx, tx, orgID, source, own, ms(DayStart(at)), u)
	})
}

// addSourceSpend adds u to the row of orgID's spend of source on day (ms).
func addSourceSpend(ctx context.Context, tx Tx, orgID, source string, own bool, day int64, u SourceUse) error {
	return tx.ExecLater(ctx, `INSERT INTO source_spend (org_id, source, day, own_key, calls, hits, misses, errors, unknown, credits)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (org_id, source, day, own_key) DO UPDATE SET
			calls = source_spend.calls + excluded.calls, hits = source_spend.hits + excluded.hits,
			misses = source_spend.misses + excluded.misses, errors = source_spend.errors + excluded.errors,
			unknown = source_spend.unknown + excluded.unknown, credits = source_spend.credits + excluded.credits`,
		orgID, source, day, boolInt(own), u.Calls, u.Hits, u.Misses, u.Errors, u.Unknown, u.Credits)
}

// SourceDay is one UTC day of a source's use by an organization, both keys together.
type SourceDay struct {
	Day time.Time `json:"day"`
	SourceUse
}

// SourceSpend is what one source cost an organization since a day: in all, the part
// made with its own vendor key, and day by day (oldest first, days without use left out).
type SourceSpend struct {
	Source string
	Total  SourceUse
	OwnKey SourceUse
	Days   []SourceDay
}

// SourceSpendSince returns what each source cost orgID since since (a UTC day's start),
// by source name: the asks settled, and those on the books now (Pending, at their
// full price), in one consistent read of the organization's rows.
func (db *DB) SourceSpendSince(ctx context.Context, orgID string, since time.Time) (map[string]*SourceSpend, error) {
	type row struct {
		source string
		day    int64
		own    int
		use    SourceUse
	}
	var rows []row
	err := db.Read(ctx, func(q Executor) error {
		r, err := q.Query(ctx, sourceSpendQuery, orgID, ms(since))
		settled, err := collect(r, err, func(r Row) (row, error) {
			var x row
			err := r.Scan(&x.source, &x.day, &x.own, &x.use.Calls, &x.use.Hits, &x.use.Misses, &x.use.Errors, &x.use.Unknown, &x.use.Credits)
			return x, err
		})
		if err != nil {
			return err
		}
		r, err = q.Query(ctx, sourceAsksQuery, orgID, ms(since))
		pending, err := collect(r, err, func(r Row) (row, error) {
			x := row{use: SourceUse{Pending: 1}}
			err := r.Scan(&x.source, &x.day, &x.own, &x.use.Calls, &x.use.Credits)
			return x, err
		})
		rows = append(settled, pending...)
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(rows, func(a, b row) int {
		return cmp.Or(strings.Compare(a.source, b.source), cmp.Compare(a.day, b.day))
	})
	out := map[string]*SourceSpend{}
	for _, r := range rows {
		s := out[r.source]
		if s == nil {
			s = &SourceSpend{Source: r.source}
			out[r.source] = s
		}
		s.Total.add(r.use)
		if r.own == 1 {
			s.OwnKey.add(r.use)
		}
		day := fromMS(r.day)
		if n := len(s.Days); n > 0 && s.Days[n-1].Day.Equal(day) {
			s.Days[n-1].add(r.use)
		} else {
			s.Days = append(s.Days, SourceDay{Day: day, SourceUse: r.use})
		}
	}
	return out, nil
}

// Budget is a monthly cap of one source's vendor credits: an organization's, or the
// installation's (OrgID "").
type Budget struct {
	OrgID          string `json:"-"`
	Source         string `json:"source"`
	MonthlyCredits int64  `json:"monthly_credits"`
}

// MaxBudget bounds a budget: more than any vendor account holds.
const MaxBudget = int64(1) << 40

// SetSourceBudget sets the monthly cap of source's vendor credits for orgID ("": the
// installation's, over every organization's calls made with its keys). credits 0
// clears it; a negative cap, or one past MaxBudget, is refused.
func (db *DB) SetSourceBudget(ctx context.Context, orgID, source string, credits int64) error {
	source = strings.TrimSpace(source)
	switch {
	case source == "" || len(source) > 64:
		return enrich.Errorf(enrich.KindInvalid, "name the source, at most 64 characters")
	case credits < 0 || credits > MaxBudget:
		return enrich.Errorf(enrich.KindInvalid, "a budget is a whole number of vendor credits from 1 to %d, or 0 to clear it", MaxBudget)
	}
	return db.Write(ctx, func(tx Tx) error {
		if credits == 0 {
			_, err := tx.Exec(ctx, `DELETE FROM source_budgets WHERE org_id = ? AND source = ?`, orgID, source)
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO source_budgets (org_id, source, monthly_credits, updated_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (org_id, source) DO UPDATE SET monthly_credits = excluded.monthly_credits, updated_at = excluded.updated_at`,
			orgID, source, credits, ms(db.now()))
		return err
	})
}

// SourceBudgets returns the budgets set for orgID and the installation's, each by
// source name.
func (db *DB) SourceBudgets(ctx context.Context, orgID string) (org, installation map[string]int64, err error) {
	r, err := db.Reader().Query(ctx, `SELECT org_id, source, monthly_credits FROM source_budgets
		WHERE org_id IN (?, '') ORDER BY org_id, source`, orgID)
	rows, err := collect(r, err, func(r Row) (Budget, error) {
		var b Budget
		err := r.Scan(&b.OrgID, &b.Source, &b.MonthlyCredits)
		return b, err
	})
	if err != nil {
		return nil, nil, err
	}
	org, installation = map[string]int64{}, map[string]int64{}
	for _, b := range rows {
		if b.OrgID == "" {
			installation[b.Source] = b.MonthlyCredits
		} else {
			org[b.Source] = b.MonthlyCredits
		}
	}
	return org, installation, nil
}

// BudgetState is what a source's budgets allow an organization's next ask: the caps
// the database holds (0: none) and the month's credits each counts.
type BudgetState struct {
	OrgCap, InstallationCap int64
	// OrgSpent are the organization's credits of the source this month, both keys;
	// InstallationSpent every organization's made with the installation's keys.
	OrgSpent, InstallationSpent int64
}

// SourceBudgetState reads source's budgets for orgID and, where one is set or
// counted (countInstallation: the installation has a cap the database does not hold),
// the month's credits since monthStart it is measured against, in one read: the asks
// settled and those on the books, every process's. With no budget at all it is one
// lookup of the budgets' primary key.
func (db *DB) SourceBudgetState(ctx context.Context, orgID, source string, monthStart time.Time, countInstallation bool) (BudgetState, error) {
	var st BudgetState
	err := db.Read(ctx, func(q Executor) error {
		var err error
		if st, err = sourceCaps(ctx, q, orgID, source); err != nil {
			return err
		}
		return monthSpent(ctx, q, &st, orgID, source, monthStart, st.OrgCap > 0, st.InstallationCap > 0 || countInstallation)
	})
	return st, err
}

// sourceCaps reads the caps the database holds of source for orgID and for the
// installation: a lookup of the budgets' primary key.
func sourceCaps(ctx context.Context, q Executor, orgID, source string) (BudgetState, error) {
	var st BudgetState
	r, err := q.Query(ctx, sourceCapsQuery, source, orgID)
	rows, err := collect(r, err, func(r Row) (Budget, error) {
		var b Budget
		err := r.Scan(&b.OrgID, &b.MonthlyCredits)
		return b, err
	})
	for _, b := range rows {
		if b.OrgID == "" {
			st.InstallationCap = b.MonthlyCredits
		} else {
			st.OrgCap = b.MonthlyCredits
		}
	}
	return st, err
}

// monthSpent reads into st the month's credits the caps asked for (org, installation)
// are measured against: the asks settled and those on the books, each sum one
// statement, so that an ask settled meanwhile is counted once, in one or the other.
func monthSpent(ctx context.Context, q Executor, st *BudgetState, orgID, source string, monthStart time.Time, org, installation bool) error {
	if org {
		if err := q.QueryRow(ctx, orgMonthQuery, orgID, source, ms(monthStart), orgID, source, ms(monthStart)).Scan(&st.OrgSpent); err != nil {
			return err
		}
	}
	if installation {
		if err := q.QueryRow(ctx, installationMonthQuery, source, ms(monthStart), source, ms(monthStart)).Scan(&st.InstallationSpent); err != nil {
			return err
		}
	}
	return nil
}

// The statements of the spend and of the asks on the books, by name, for the drivers'
// tests of their plans.
var SpendQueries = map[string]struct {
	Query string
	Args  []any
}{
	"SourceSpend":        {sourceSpendQuery, []any{"o", int64(5)}},
	"SourceAsks":         {sourceAsksQuery, []any{"o", int64(5)}},
	"SourceCaps":         {sourceCapsQuery, []any{"pdl", "o"}},
	"OrgMonth":           {orgMonthQuery, []any{"o", "pdl", int64(5), "o", "pdl", int64(5)}},
	"InstallationMonth":  {installationMonthQuery, []any{"pdl", int64(5), "pdl", int64(5)}},
	"AddToSourceAsk":     {addToSourceAskQuery, []any{int64(1), int64(1), "a"}},
	"SettleSourceAsk":    {settleSourceAskQuery, []any{"a"}},
	"DeadSourceAskSweep": {deadSourceAsksQuery, []any{int64(5), 500}},
}

const (
	// The organization's rows since a day: a range of the primary key.
	sourceSpendQuery = `SELECT source, day, own_key, calls, hits, misses, errors, unknown, credits
		FROM source_spend WHERE org_id = ? AND day >= ?`
	// The organization's asks on the books, through source_asks_org.
	sourceAsksQuery = `SELECT source, day, own_key, calls, credits FROM source_asks WHERE org_id = ? AND day >= ?`
	sourceCapsQuery = `SELECT org_id, monthly_credits FROM source_budgets WHERE source = ? AND org_id IN (?, '')`
	orgMonthQuery   = `SELECT CAST(COALESCE((SELECT SUM(credits) FROM source_spend WHERE org_id = ? AND source = ? AND day >= ?), 0)
		+ COALESCE((SELECT SUM(credits) FROM source_asks WHERE org_id = ? AND source = ? AND day >= ?), 0) AS BIGINT)`
	installationMonthQuery = `SELECT CAST(COALESCE((SELECT SUM(credits) FROM source_spend INDEXED BY source_spend_installation
			WHERE source = ? AND day >= ? AND own_key = 0), 0)
		+ COALESCE((SELECT SUM(credits) FROM source_asks INDEXED BY source_asks_installation
			WHERE source = ? AND day >= ? AND own_key = 0), 0) AS BIGINT)`
	addToSourceAskQuery  = `UPDATE source_asks SET calls = calls + ?, credits = credits + ? WHERE id = ?`
	settleSourceAskQuery = `DELETE FROM source_asks WHERE id = ? RETURNING org_id, source, day, own_key, calls, credits`
	// The oldest first, through source_asks_booked.
	deadSourceAsksQuery = `SELECT id, owner, booked_at FROM source_asks WHERE booked_at < ? ORDER BY booked_at LIMIT ?`
)

// SourceAsk is an ask of a priced source on the books while it is under way: put there
// before its first request is sent, added to before each further one, and settled with
// what it cost when its answer comes (or as unknown, at its full price, when the
// process that asks is gone first).
type SourceAsk struct {
	ID     string // set by BookSourceAsk
	OrgID  string
	Source string
	OwnKey bool   // the organization's own vendor key: the installation's cap does not bind it
	Owner  string // the process that asks, as SettleDeadSourceAsks tells the live from the gone
	// Calls and Credits are the requests sent or about to be, each at its full price by
	// the vendor's published price: the most they can cost.
	Calls, Credits int64
}

// BookSourceAsk puts an ask on the books, before its first request is sent, while the
// source's budgets leave room: the month's credits of the organization's asks (either
// key) under its cap, and, unless the ask goes out with the organization's own key,
// those of every organization's asks with the installation's keys under the
// installation's cap (the lower of the database's and installationCap, serve's flag,
// when it is above 0). The month's credits are the asks settled and those on the books,
// every process's. It sets a.ID, or reports booked false, writing nothing, when a cap
// is reached. One write; where a cap applies, the bookings of every process are taken
// one at a time (LockSourceBudgets), so that two never both take the room one leaves.
func (db *DB) BookSourceAsk(ctx context.Context, a *SourceAsk, installationCap int64) (booked bool, err error) {
	id := uuid.NewString()
	now := db.now()
	err = db.Write(ctx, func(tx Tx) error {
		booked = false
		st, err := sourceCaps(ctx, tx, a.OrgID, a.Source)
		if err != nil {
			return err
		}
		instCap := st.InstallationCap
		if installationCap > 0 && (instCap == 0 || installationCap < instCap) {
			instCap = installationCap
		}
		orgCapped, instCapped := st.OrgCap > 0, !a.OwnKey && instCap > 0
		if orgCapped || instCapped {
			if _, err := tx.Hold(ctx, LockSourceBudgets, true); err != nil {
				return err
			}
			if err := monthSpent(ctx, tx, &st, a.OrgID, a.Source, MonthStart(now), orgCapped, instCapped); err != nil {
				return err
			}
			if (orgCapped && st.OrgSpent >= st.OrgCap) || (instCapped && st.InstallationSpent >= instCap) {
				return nil
			}
		}
		if err := insertSourceAsk(ctx, tx, id, a, now); err != nil {
			return err
		}
		booked = true
		return nil
	})
	if booked {
		a.ID = id
	}
	return booked, err
}

func insertSourceAsk(ctx context.Context, tx Tx, id string, a *SourceAsk, now time.Time) error {
	return tx.ExecLater(ctx, `INSERT INTO source_asks (id, org_id, source, day, own_key, owner, calls, credits, booked_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		id, a.OrgID, a.Source, ms(DayStart(now)), boolInt(a.OwnKey), a.Owner, a.Calls, a.Credits, ms(now))
}

// AddToSourceAsk puts calls more requests of the ask a.ID on the books, at credits in
// all, before they are sent: no budget is read, the ask having been admitted. An ask
// no longer on the books (a sweep took its process for gone, and settled what it had
// booked as unknown) is put back on with these alone.
func (db *DB) AddToSourceAsk(ctx context.Context, a SourceAsk, calls, credits int64) error {
	return db.Write(ctx, func(tx Tx) error {
		n, err := tx.Exec(ctx, addToSourceAskQuery, calls, credits, a.ID)
		if err != nil || n > 0 {
			return err
		}
		a.Calls, a.Credits = calls, credits
		return insertSourceAsk(ctx, tx, a.ID, &a, db.now())
	})
}

// SettleSourceAsk takes the ask id off the books and adds u, what it cost, to its
// organization's spend on the day it was booked on (nothing, when it sent no request
// and cost nothing): one write. settled false: the ask
// was no longer on the books (a sweep took its process for gone and settled it as
// unknown, at its full price), and nothing was added.
func (db *DB) SettleSourceAsk(ctx context.Context, id string, u SourceUse) (settled bool, err error) {
	err = db.Write(ctx, func(tx Tx) error {
		ask := []AnsweredAsk{{ID: id, Use: u}}
		err := settleAnsweredAsks(ctx, tx, ask)
		settled = err == nil && !ask[0].Unbooked
		return err
	})
	return settled, err
}

// AnsweredAsk is an ask on the books whose answer came, with what it cost, left for
// the transaction that settles its task to settle too (Outcome.Asks).
type AnsweredAsk struct {
	ID  string
	Use SourceUse
	// Unbooked is set by Settle when the ask was no longer on the books (as
	// SettleSourceAsk's settled false): nothing was added for it.
	Unbooked bool
}

// settleAnsweredAsks settles asks in tx: each taken off the books (Unbooked when a
// sweep took it first), then what they cost added up by row of the spend and added in
// the rows' order (addSpendInOrder); one that sent nothing and cost nothing adds
// nothing.
func settleAnsweredAsks(ctx context.Context, tx Tx, asks []AnsweredAsk) error {
	sums := map[spendRow]SourceUse{}
	for i := range asks {
		a, found, err := takeSourceAsk(ctx, tx, asks[i].ID)
		if err != nil {
			return err
		}
		asks[i].Unbooked = !found
		if u := asks[i].Use; found && (u.Calls != 0 || u.Credits != 0) { // one that sent nothing counts nothing
			sums[a.row()] = sums[a.row()].plus(u)
		}
	}
	return addSpendInOrder(ctx, tx, sums)
}

// spendRow is a row of source_spend: an organization's use of a source on a day, with
// its own key or the installation's.
type spendRow struct {
	org, source string
	day         int64
	own         bool
}

func (u SourceUse) plus(o SourceUse) SourceUse {
	u.add(o)
	return u
}

// addSpendInOrder adds each row's use to the spend, the rows in one order: on
// PostgreSQL two transactions that add to the same rows (two settles of an
// organization's tasks, a sweep) then wait on each other, if at all, in that order,
// never in a cycle.
func addSpendInOrder(ctx context.Context, tx Tx, sums map[spendRow]SourceUse) error {
	rows := slices.SortedFunc(maps.Keys(sums), func(a, b spendRow) int {
		return cmp.Or(cmp.Compare(a.org, b.org), cmp.Compare(a.source, b.source), cmp.Compare(a.day, b.day),
			cmp.Compare(boolInt(a.own), boolInt(b.own)))
	})
	for _, r := range rows {
		if err := addSourceSpend(ctx, tx, r.org, r.source, r.own, r.day, sums[r]); err != nil {
			return err
		}
	}
	return nil
}

// bookedAsk is an ask as the books held it when it was taken off them.
type bookedAsk struct {
	org, source    string
	own            bool
	day            int64
	calls, credits int64
}

// row is the row of the spend the ask adds to.
func (a bookedAsk) row() spendRow {
	return spendRow{org: a.org, source: a.source, day: a.day, own: a.own}
}

// takeSourceAsk deletes the ask id from the books and returns it; found false when it
// was not there (another transaction took it first).
func takeSourceAsk(ctx context.Context, tx Tx, id string) (a bookedAsk, found bool, err error) {
	var own int
	err = tx.QueryRow(ctx, settleSourceAskQuery, id).Scan(&a.org, &a.source, &a.day, &own, &a.calls, &a.credits)
	if errors.Is(err, ErrNoRows) {
		return a, false, nil
	}
	a.own = own == 1
	return a, err == nil, err
}

// deadAsksPerSweep bounds the asks one sweep settles; the next sweep takes the rest.
const deadAsksPerSweep = 500

// SettleDeadSourceAsks settles as unknown the asks on the books whose process is gone,
// each at its full price (what it booked) in its organization's spend on its day, and
// returns how many. self, the process that sweeps, is alive. Where replicas heartbeat
// (PostgreSQL), a process is gone when it has no live heartbeat, and only its asks
// booked before bookedBefore are settled (a replica books before its first heartbeat
// is in); where one process serves the database (SQLite), every process but self is
// gone: the one before a restart. On either, an ask booked before staleBefore is
// settled whoever's it is: no answer to it can still come (its task's lifetime is
// over), and its process lost its settling to a storage outage. A read, then, only
// when there is one to settle, one write; a sweep already running elsewhere is left
// to it.
func (db *DB) SettleDeadSourceAsks(ctx context.Context, self string, bookedBefore, staleBefore time.Time) (int, error) {
	live := map[string]bool{self: true}
	replicas, replicated, err := db.liveReplicas(ctx)
	if err != nil {
		return 0, err
	}
	for _, r := range replicas {
		live[r] = true
	}
	cutoff := db.now().Add(time.Millisecond) // every ask booked so far
	if replicated {
		cutoff = bookedBefore
	}
	type candidate struct {
		id, owner string
		bookedAt  int64
	}
	r, err := db.Reader().Query(ctx, deadSourceAsksQuery, ms(cutoff), deadAsksPerSweep)
	found, err := collect(r, err, func(r Row) (candidate, error) {
		var c candidate
		err := r.Scan(&c.id, &c.owner, &c.bookedAt)
		return c, err
	})
	if err != nil {
		return 0, err
	}
	var dead []string
	for _, c := range found {
		if !live[c.owner] || c.bookedAt < ms(staleBefore) {
			dead = append(dead, c.id)
		}
	}
	if len(dead) == 0 {
		return 0, nil
	}
	settled := 0
	err = db.Write(ctx, func(tx Tx) error {
		settled = 0
		if held, err := tx.Hold(ctx, LockSettleDeadAsks, false); err != nil || !held {
			return err
		}
		sums := map[spendRow]SourceUse{}
		for _, id := range dead {
			a, found, err := takeSourceAsk(ctx, tx, id)
			if err != nil {
				return err
			}
			if !found { // settled meanwhile by its process, which was alive after all
				continue
			}
			sums[a.row()] = sums[a.row()].plus(SourceUse{Calls: a.calls, Credits: a.credits, Unknown: 1})
			settled++
		}
		return addSpendInOrder(ctx, tx, sums)
	})
	return settled, err
}
