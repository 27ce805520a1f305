package server

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"enrichd/enrich"
	"enrichd/store"
)

// reservedCredits is what an admitted ask of a source holds against its budgets until
// it is recorded: the least a paid answer costs. An ask may cost more (a staff search
// 10), so a cap can be passed by what the asks in flight cost beyond it, never by more.
const reservedCredits = 1

// spendKeeper is the pipeline's enrich.Spend: it admits an ask of a source while the
// month's credits, read from the database, and the asks this process has in flight
// stay under every cap that applies (the organization's, and for the installation's
// keys the installation's, from the database or serve's flag), and records each ask
// in the database. Other replicas' asks in flight are not seen: the caps hold across
// replicas up to the calls in flight.
type spendKeeper struct {
	db      *store.DB
	log     *slog.Logger
	metrics *serverMetrics
	// budgets are the installation's caps serve's flags set, by source.
	budgets map[string]int64
	// priced are the sources whose answers cost vendor credits (enrich.Priced: they state a price), by
	// name: the others are admitted without a read.
	priced map[string]bool

	mu       sync.Mutex
	orgAsks  map[orgSource]int64 // in flight, by organization and source, either key
	instAsks map[string]int64    // in flight with the installation's keys, by source
	// The credits this process recorded, by organization and source and with the
	// installation's keys by source, only ever growing: an Admit whose read of the
	// month raced a recording sees by how much its read may be behind.
	orgRecorded  map[orgSource]int64
	instRecorded map[string]int64
}

// admitRereads bounds how often Admit reads the month again when asks were recorded
// while it read; past it, the credits recorded meanwhile are added to what it read,
// which may count some twice and refuse early, never overshoot.
const admitRereads = 3

type orgSource struct{ org, source string }

var _ enrich.Spend = (*spendKeeper)(nil)

func newSpendKeeper(db *store.DB, log *slog.Logger, m *serverMetrics, budgets map[string]int64, sources []enrich.Source) *spendKeeper {
	priced := map[string]bool{}
	for _, src := range sources {
		if _, ok := src.(enrich.Priced); ok {
			priced[src.Name()] = true
		}
	}
	return &spendKeeper{db: db, log: log, metrics: m, budgets: budgets, priced: priced,
		orgAsks: map[orgSource]int64{}, instAsks: map[string]int64{},
		orgRecorded: map[orgSource]int64{}, instRecorded: map[string]int64{}}
}

// Admit reads the source's budgets for org, and the month's credits where a cap is
// set, and reserves the ask. A budget that cannot be read refuses with
// ReasonBudgetUnread: a vendor account is not spent past its cap because the database
// is down, and the task does not say a budget is spent when nobody knows whether it is.
func (k *spendKeeper) Admit(ctx context.Context, org, src string, own bool) string {
	if !k.priced[src] {
		return "" // costs nothing: no budget binds it, and nothing is reserved
	}
	flagCap := k.budgets[src]
	key := orgSource{org, src}
	// An ask recorded after the month is read and before the reservations are looked
	// at has left its reservation without being in the read: the read is made again,
	// so that the cap holds up to the asks in flight.
	var st store.BudgetState
	for attempt := 0; ; attempt++ {
		k.mu.Lock()
		orgBefore, instBefore := k.orgRecorded[key], k.instRecorded[src]
		k.mu.Unlock()
		var err error
		st, err = k.db.SourceBudgetState(ctx, org, src, store.MonthStart(k.db.Now()), flagCap > 0 && !own)
		if err != nil {
			// A storage fault is the store's to log, once a minute, not every ask's.
			if !store.IsStorageFault(err) {
				k.log.Error("reading a source's budget: the source is not asked", "source", src, "org_id", org, "err", err.Error())
			}
			k.metrics.counter("enrichd_source_skipped_total", "source", src, "reason", enrich.ReasonBudgetUnread).Inc()
			return enrich.ReasonBudgetUnread
		}
		k.mu.Lock()
		orgLate, instLate := k.orgRecorded[key]-orgBefore, k.instRecorded[src]-instBefore
		capped := st.OrgCap > 0 || (!own && (st.InstallationCap > 0 || flagCap > 0))
		if !capped || (orgLate == 0 && instLate == 0) {
			break // k.mu held
		}
		if attempt+1 >= admitRereads {
			st.OrgSpent += orgLate
			st.InstallationSpent += instLate
			break // k.mu held
		}
		k.mu.Unlock()
	}
	defer k.mu.Unlock()
	instCap := st.InstallationCap
	if flagCap > 0 && (instCap == 0 || flagCap < instCap) {
		instCap = flagCap
	}
	if st.OrgCap > 0 && st.OrgSpent+reservedCredits*k.orgAsks[key] >= st.OrgCap {
		k.metrics.counter("enrichd_source_skipped_total", "source", src, "reason", enrich.ReasonBudget).Inc()
		return enrich.ReasonBudget
	}
	// The installation's caps are on its own vendor accounts: an organization's own key
	// spends the organization's.
	if !own && instCap > 0 && st.InstallationSpent+reservedCredits*k.instAsks[src] >= instCap {
		k.metrics.counter("enrichd_source_skipped_total", "source", src, "reason", enrich.ReasonBudget).Inc()
		return enrich.ReasonBudget
	}
	k.orgAsks[key]++
	if !own {
		k.instAsks[src]++
	}
	return ""
}

// Spent adds the ask to the organization's spend and then releases its reservation:
// released before its credits are in the database, an Admit reading the month then
// would see neither. An ask that sent nothing upstream and cost nothing (a stored
// dataset's answer) writes nothing. The write outlives the task's context: an ask the
// vendor answered is paid whether or not the task still waits for it.
func (k *spendKeeper) Spent(ctx context.Context, org string, call enrich.SourceCall) {
	k.metrics.counter("enrichd_source_asks_total", "source", call.Name, "outcome", call.Outcome).Inc()
	if call.VendorCalls != 0 || call.Credits != 0 {
		k.metrics.counter("enrichd_source_vendor_credits_total", "source", call.Name).AddInt64(call.Credits)
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		// A storage fault is the store's to log, once a minute with a count, not once an ask.
		if err := k.db.AddSourceSpend(wctx, org, call.Name, call.OwnKey, k.db.Now(), store.UseOf(call)); err != nil && !store.IsStorageFault(err) {
			k.log.Error("recording what a source cost", "source", call.Name, "org_id", org, "credits", call.Credits, "err", err.Error())
		}
		cancel()
	}
	if !k.priced[call.Name] { // an unpriced ask was admitted without a reservation
		return
	}
	key := orgSource{org, call.Name}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.orgRecorded[key] += call.Credits
	if k.orgAsks[key]--; k.orgAsks[key] <= 0 {
		delete(k.orgAsks, key)
	}
	if !call.OwnKey {
		k.instRecorded[call.Name] += call.Credits
		if k.instAsks[call.Name]--; k.instAsks[call.Name] <= 0 {
			delete(k.instAsks, call.Name)
		}
	}
}
