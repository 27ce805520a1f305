package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"enrichd/enrich"
	"enrichd/store"
)

// spendKeeper is the pipeline's enrich.Spend, on the books in the database: an ask of a
// priced source is written there, pending, before its first request leaves, within
// every cap that applies (the organization's, and for the installation's keys the
// installation's, from the database or serve's flag), and each further request is
// added before it leaves, at its full price; the ask's answer settles it with what it
// cost. The caps count every replica's asks under way, and an ask whose process dies
// counts at its full price until a sweep settles it as unknown (settleDeadAsks).
type spendKeeper struct {
	db      *store.DB
	log     *slog.Logger
	metrics *workerMetrics
	// budgets are the installation's caps serve's flags set, by source.
	budgets map[string]int64
	// priced are the sources whose answers cost vendor credits (enrich.Priced: they
	// state a price), by name: the others are neither held to a budget nor booked.
	priced map[string]bool
	// owner is this process on the books (the server's replica name).
	owner string
}

var _ enrich.Spend = (*spendKeeper)(nil)

// Admit books an ask at one request of one credit (the least a paid answer costs):
// what an adapter that states no price is counted at; one that does adds the rest
// before its request leaves.
const (
	admittedCalls   = 1
	admittedCredits = 1
)

// bookTimeout bounds a write of the books. It outlives the task's context: a write
// that may have committed is waited for, so that what the books hold is known.
const bookTimeout = 10 * time.Second

func newSpendKeeper(db *store.DB, log *slog.Logger, m *workerMetrics, budgets map[string]int64, sources []enrich.Source, owner string) *spendKeeper {
	priced := map[string]bool{}
	for _, src := range sources {
		if _, ok := src.(enrich.Priced); ok {
			priced[src.Name()] = true
		}
	}
	return &spendKeeper{db: db, log: log, metrics: m, budgets: budgets, priced: priced, owner: owner}
}

// Admit books the ask in one write, while the source's caps for org leave room (the
// month's credits, settled and on the books, every replica's, under each cap). A
// budget or books that cannot be read or written refuse with ReasonBudgetUnread: a
// vendor account is not spent past its cap, nor asked off the books, because the
// database is down, and the task does not say a budget is spent when nobody knows
// whether it is.
func (k *spendKeeper) Admit(ctx context.Context, org, src string, own bool) (*enrich.Booking, string) {
	if !k.priced[src] {
		return nil, "" // costs nothing: no budget binds it, and nothing is booked
	}
	ask := store.SourceAsk{OrgID: org, Source: src, OwnKey: own, Owner: k.owner, Calls: admittedCalls, Credits: admittedCredits}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bookTimeout)
	defer cancel()
	booked, err := k.db.BookSourceAsk(wctx, &ask, k.budgets[src])
	switch {
	case err != nil:
		// A storage fault is the store's to log, once a minute, not every ask's.
		if !store.IsStorageFault(err) {
			k.log.Error("booking an ask of a source: the source is not asked", "source", src, "org_id", org, "err", err.Error())
		}
		k.metrics.counter("enrichd_source_skipped_total", "source", src, "reason", enrich.ReasonBudgetUnread).Inc()
		return nil, enrich.ReasonBudgetUnread
	case !booked:
		k.metrics.counter("enrichd_source_skipped_total", "source", src, "reason", enrich.ReasonBudget).Inc()
		return nil, enrich.ReasonBudget
	}
	return &enrich.Booking{Org: org, Source: src, OwnKey: own, ID: ask.ID, Calls: ask.Calls, Credits: ask.Credits}, ""
}

// Book adds to the ask's booking what its next request brings it to, before the request
// leaves: one write, whatever the budgets (the ask was admitted).
func (k *spendKeeper) Book(ctx context.Context, b *enrich.Booking, calls, credits int64) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bookTimeout)
	defer cancel()
	ask := store.SourceAsk{ID: b.ID, OrgID: b.Org, Source: b.Source, OwnKey: b.OwnKey, Owner: k.owner}
	if err := k.db.AddToSourceAsk(wctx, ask, calls-b.Calls, credits-b.Credits); err != nil {
		if !store.IsStorageFault(err) {
			k.log.Error("booking a request of a source: it is not sent", "source", b.Source, "org_id", b.Org, "err", err.Error())
		}
		return err
	}
	b.Calls, b.Credits = calls, credits
	return nil
}

// Spent settles the ask: its booking is replaced by what it cost, in one write (a
// task's own Spend, taskSpend, leaves it to the write that settles the task). An ask
// with no booking that sent a request (a source that costs nothing) is added to the
// spend as it is; one that sent nothing and cost nothing writes nothing. The write
// outlives the task's context: an ask the vendor answered is paid whether or not the
// task still waits for it. An ask whose settling fails stays on the books at its full
// price until a sweep settles it as unknown.
func (k *spendKeeper) Spent(ctx context.Context, org string, call enrich.SourceCall, b *enrich.Booking) {
	k.counted(call)
	if b != nil {
		k.settleAsk(ctx, b, store.UseOf(call))
		return
	}
	if call.VendorCalls == 0 && call.Credits == 0 {
		return
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bookTimeout)
	defer cancel()
	// A storage fault is the store's to log, once a minute with a count, not once an ask.
	if err := k.db.AddSourceSpend(wctx, org, call.Name, call.OwnKey, k.db.Now(), store.UseOf(call)); err != nil && !store.IsStorageFault(err) {
		k.log.Error("recording what a source cost", "source", call.Name, "org_id", org, "credits", call.Credits, "err", err.Error())
	}
}

// counted counts an ask in the metrics, as its answer comes.
func (k *spendKeeper) counted(call enrich.SourceCall) {
	k.metrics.counter("enrichd_source_asks_total", "source", call.Name, "outcome", call.Outcome).Inc()
	if call.VendorCalls != 0 || call.Credits != 0 {
		k.metrics.counter("enrichd_source_vendor_credits_total", "source", call.Name).AddInt64(call.Credits)
	}
}

// settleAsk settles the ask b with what it cost, u, in one write that outlives the
// task's context.
func (k *spendKeeper) settleAsk(ctx context.Context, b *enrich.Booking, u store.SourceUse) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bookTimeout)
	defer cancel()
	settled, err := k.db.SettleSourceAsk(wctx, b.ID, u)
	switch {
	case err != nil && !store.IsStorageFault(err): // the store logs those, once a minute
		k.log.Error("recording what a source cost", "source", b.Source, "org_id", b.Org, "credits", u.Credits, "err", err.Error())
	case err == nil && !settled:
		k.sweptFirst(b, u.Credits)
	}
}

// taskSpend is the Spend of one task the workers run (enrich.Task.Spend): the keeper's,
// but for the asks whose answers came, which are kept for the write that settles the
// task (answeredAsks) rather than settled one write each.
type taskSpend struct {
	*spendKeeper
	asks *answeredAsks
}

// forTask is the Spend of a task whose answered asks asks keeps.
func (k *spendKeeper) forTask(asks *answeredAsks) enrich.Spend {
	return taskSpend{spendKeeper: k, asks: asks}
}

func (t taskSpend) Spent(ctx context.Context, org string, call enrich.SourceCall, b *enrich.Booking) {
	if b != nil && t.asks.add(b, call) {
		t.counted(call)
		return // settled with its task, in the same write
	}
	t.spendKeeper.Spent(ctx, org, call, b)
}

// answeredAsks are a running task's asks whose answers came, kept for the write that
// settles the task (store.Outcome.Asks) rather than written one by one. Until then each
// counts at its booking, its full price: a budget it binds reads no less than it cost.
// An answer that comes once the task's outcome is taken (a late one, of an ask the task
// stopped waiting for) is settled on its own, as before.
type answeredAsks struct {
	mu     sync.Mutex
	asks   []store.AnsweredAsk
	booked []*enrich.Booking // asks[i]'s booking, for the log of one a sweep settled first
	taken  bool
}

// add keeps the answered ask b for the task's settle, and reports whether it did: not
// once the task's asks were taken.
func (a *answeredAsks) add(b *enrich.Booking, call enrich.SourceCall) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.taken {
		return false
	}
	a.asks = append(a.asks, store.AnsweredAsk{ID: b.ID, Use: store.UseOf(call)})
	a.booked = append(a.booked, b)
	return true
}

// take hands the asks kept so far over to the settle, once: an answer that comes after
// is settled on its own.
func (a *answeredAsks) take() []store.AnsweredAsk {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.taken = true
	asks := a.asks
	a.asks = nil
	return asks
}

// settled logs the asks a sweep had taken off the books before their task's settle
// (each stays counted at its full price, as unknown), once that settle wrote them.
func (k *spendKeeper) settled(a *answeredAsks, asks []store.AnsweredAsk) {
	for i, ask := range asks {
		if ask.Unbooked {
			k.sweptFirst(a.booked[i], ask.Use.Credits)
		}
	}
}

// settleApart settles asks on their own, each in one write: those whose task's settle
// was not written (a shutdown released the task, or the database refused the settle).
func (k *spendKeeper) settleApart(ctx context.Context, a *answeredAsks, asks []store.AnsweredAsk) {
	for i, ask := range asks {
		k.settleAsk(ctx, a.booked[i], ask.Use)
	}
}

// sweptFirst logs an ask a sweep took off the books, as unknown at its booking, before
// its answer, which cost credits, was recorded.
func (k *spendKeeper) sweptFirst(b *enrich.Booking, credits int64) {
	k.log.Warn("an ask was settled as unknown before its answer was recorded: it stays counted at its full price",
		"source", b.Source, "org_id", b.Org, "booked_credits", b.Credits, "credits", credits)
}
