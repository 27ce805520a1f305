package worker

import (
	"bytes"
	"context"
	"fmt"
	"github.com/VictoriaMetrics/metrics"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"enrichd/enrich"
	"enrichd/store"
	"enrichd/store/storetest"

	"github.com/matryer/is"
)

// pricedVendor is a vendor that bills a credit a lookup and knows every company.
type pricedVendor struct{ asked atomic.Int64 }

func (v *pricedVendor) Name() string          { return "pdl" }
func (v *pricedVendor) Prices() enrich.Prices { return enrich.Prices{} }
func (v *pricedVendor) CompanyByDomain(_ context.Context, _ *enrich.Tally, d string) (*enrich.Company, error) {
	v.asked.Add(1)
	return &enrich.Company{Name: d, Domain: &d}, nil
}
func (v *pricedVendor) CompanyByURL(context.Context, *enrich.Tally, string) (*enrich.Company, error) {
	return nil, fmt.Errorf("pdl: %w", enrich.ErrNotFound)
}
func (v *pricedVendor) PersonByURL(context.Context, *enrich.Tally, string) (*enrich.Person, error) {
	return nil, fmt.Errorf("pdl: %w", enrich.ErrNotFound)
}

// openDB opens a database in a temporary directory, closed when t ends, with the
// organization acme in it.
func openDB(t *testing.T) (db *store.DB, org string) {
	t.Helper()
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "enrichd.db"), storetest.Schema(t), store.WithSubjectKey(storetest.SubjectKey))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, storetest.NewOrg(t, db, "acme")
}

// asksOnTheBooks counts the asks db holds pending.
func asksOnTheBooks(t *testing.T, db *store.DB) (n int) {
	t.Helper()
	if err := db.Reader().QueryRow(context.Background(), `SELECT count(*) FROM source_asks`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A budget that cannot be read (the database does not answer) keeps the source from
// being asked, but never as a budget that is spent: the ask is skipped budget_unread,
// nothing is booked, and a task no other source answered fails as one whose source
// could not be reached, its message saying nothing of a budget.
func TestABudgetThatCannotBeReadIsNotASpentBudget(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, org := openDB(t)
	var logs bytes.Buffer
	vendor := &pricedVendor{}
	m := newWorkerMetrics(metrics.NewSet())
	keeper := newSpendKeeper(db, slog.New(slog.NewJSONHandler(&logs, nil)), m, map[string]int64{"pdl": 100}, []enrich.Source{vendor}, "this")
	b, skip := keeper.Admit(ctx, org, "pdl", false) // readable: admitted
	is.Equal(skip, "")
	is.True(b != nil)
	keeper.Spent(ctx, org, enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeHit, VendorCalls: 1, Credits: 1}, b)
	is.Equal(asksOnTheBooks(t, db), 0) // settled

	// The budgets can no longer be read.
	is.NoErr(db.Write(ctx, func(tx store.Tx) error {
		_, err := tx.Exec(ctx, `ALTER TABLE source_budgets RENAME TO source_budgets_away`)
		return err
	}))
	b, skip = keeper.Admit(ctx, org, "pdl", false)
	is.Equal(skip, enrich.ReasonBudgetUnread)
	is.True(b == nil)
	is.Equal(asksOnTheBooks(t, db), 0) // nothing booked
	is.True(strings.Contains(logs.String(), "booking an ask of a source"))
	is.Equal(m.counter("enrichd_source_skipped_total", "source", "pdl", "reason", enrich.ReasonBudgetUnread).Get(), uint64(1))
	is.Equal(m.counter("enrichd_source_skipped_total", "source", "pdl", "reason", enrich.ReasonBudget).Get(), uint64(0))

	p := &enrich.Pipeline{Sources: []enrich.Source{vendor}, Spend: keeper}
	_, tr, terr := p.Lookup(ctx, &enrich.Task{Org: org}, enrich.Input{Lookup: enrich.LookupDomain, Target: "acme.com"})
	is.Equal(vendor.asked.Load(), int64(0)) // not asked
	is.True(terr != nil)
	is.Equal(terr.Code, enrich.CodeProviderUnavailable)
	is.True(!strings.Contains(terr.Message, "budget"))
	is.True(strings.Contains(terr.Message, "could not be reached"))
	is.Equal(tr.Sources, []enrich.SourceCall{{Name: "pdl", Outcome: enrich.OutcomeSkipped, Reason: enrich.ReasonBudgetUnread}})
}

// Books that cannot be written because the storage is failing are not logged ask
// after ask: the store's own line says the storage is failing, once a minute. The ask
// is still skipped budget_unread and counted, and the vendor is not asked.
func TestBooksUnwritableInAStorageOutageAreNotLoggedPerAsk(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	real, org := openDB(t)
	db := &store.DB{Driver: faultyWrites{real.Driver}, Now: real.Now}
	db.SetSubjects(real.Subjects())
	var logs bytes.Buffer
	m := newWorkerMetrics(metrics.NewSet())
	vendor := &pricedVendor{}
	keeper := newSpendKeeper(db, slog.New(slog.NewJSONHandler(&logs, nil)), m, nil, []enrich.Source{vendor}, "this")
	for range 3 {
		b, skip := keeper.Admit(ctx, org, "pdl", false)
		is.Equal(skip, enrich.ReasonBudgetUnread)
		is.True(b == nil)
	}
	is.Equal(m.counter("enrichd_source_skipped_total", "source", "pdl", "reason", enrich.ReasonBudgetUnread).Get(), uint64(3))
	p := &enrich.Pipeline{Sources: []enrich.Source{vendor}, Spend: keeper}
	_, _, terr := p.Lookup(ctx, &enrich.Task{Org: org}, enrich.Input{Lookup: enrich.LookupDomain, Target: "acme.com"})
	is.Equal(terr.Code, enrich.CodeProviderUnavailable)
	is.Equal(vendor.asked.Load(), int64(0)) // off the books, not asked
	is.Equal(logs.String(), "")             // no line an ask

	// Nor is an ask's spend that cannot be written for the same reason.
	for range 3 {
		keeper.Spent(ctx, org, enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeHit, VendorCalls: 1, Credits: 1},
			&enrich.Booking{Org: org, Source: "pdl", ID: "an-ask", Calls: 1, Credits: 1})
		keeper.Spent(ctx, org, enrich.SourceCall{Name: "web", Outcome: enrich.OutcomeHit, VendorCalls: 1}, nil)
	}
	is.Equal(logs.String(), "")
}

// faultyWrites is a database whose writes fail as storage that cannot take them does.
type faultyWrites struct{ store.Driver }

func (faultyWrites) Write(context.Context, func(store.Tx) error) error {
	return store.StorageUnavailable()
}

// A task's answered asks wait on the books, at their booking, for the task's settle
// (answeredAsks); one answered once they were taken, and those of a settle never
// written, are settled on their own.
func TestATasksAnsweredAsksWaitForItsSettle(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, org := openDB(t)
	var logs bytes.Buffer
	vendor := &pricedVendor{}
	keeper := newSpendKeeper(db, slog.New(slog.NewJSONHandler(&logs, nil)), newWorkerMetrics(metrics.NewSet()), nil, []enrich.Source{vendor}, "this")
	hit := enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeHit, VendorCalls: 1, Credits: 1}
	month := store.MonthStart(db.Now())
	spent := func() store.SourceUse {
		t.Helper()
		got, err := db.SourceSpendSince(ctx, org, month)
		is.NoErr(err)
		return got["pdl"].Total
	}

	asks := &answeredAsks{}
	task := keeper.forTask(asks)
	first, _ := task.Admit(ctx, org, "pdl", false)
	task.Spent(ctx, org, hit, first)
	is.Equal(asksOnTheBooks(t, db), 1) // kept for the settle, counted at its booking
	is.Equal(spent(), store.SourceUse{Calls: 1, Pending: 1, Credits: 1})
	taken := asks.take()
	is.Equal(taken, []store.AnsweredAsk{{ID: first.ID, Use: store.UseOf(hit)}})

	// An answer that comes after the task's asks were taken is settled at once.
	late, _ := task.Admit(ctx, org, "pdl", false)
	task.Spent(ctx, org, hit, late)
	is.Equal(asksOnTheBooks(t, db), 1)
	is.Equal(spent(), store.SourceUse{Calls: 2, Hits: 1, Pending: 1, Credits: 2})

	// The settle was not written (a shutdown released the task): settled on their own,
	// and an ask a sweep took first is logged as such and not counted again.
	keeper.settleApart(ctx, asks, taken)
	is.Equal(asksOnTheBooks(t, db), 0)
	is.Equal(spent(), store.SourceUse{Calls: 2, Hits: 2, Credits: 2})
	is.True(!strings.Contains(logs.String(), "settled as unknown"))
	keeper.settleApart(ctx, asks, taken)
	is.Equal(spent(), store.SourceUse{Calls: 2, Hits: 2, Credits: 2})
	is.True(strings.Contains(logs.String(), "settled as unknown before its answer was recorded"))
}
