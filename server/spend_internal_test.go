package server

import (
	"bytes"
	"context"
	"fmt"
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
func (v *pricedVendor) CompanyByDomain(_ context.Context, d string) (*enrich.Company, error) {
	v.asked.Add(1)
	return &enrich.Company{Name: d, Domain: &d}, nil
}
func (v *pricedVendor) CompanyByURL(context.Context, string) (*enrich.Company, error) {
	return nil, fmt.Errorf("pdl: %w", enrich.ErrNotFound)
}
func (v *pricedVendor) PersonByURL(context.Context, string) (*enrich.Person, error) {
	return nil, fmt.Errorf("pdl: %w", enrich.ErrNotFound)
}

// A budget that cannot be read (the database does not answer) keeps the source from
// being asked, but never as a budget that is spent: the ask is skipped budget_unread,
// nothing is reserved, and a task no other source answered fails as one whose source
// could not be reached, its message saying nothing of a budget.
func TestABudgetThatCannotBeReadIsNotASpentBudget(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "enrichd.db"), storetest.Schema(t), store.WithSubjectKey(storetest.SubjectKey))
	is.NoErr(err)
	t.Cleanup(func() { db.Close() })
	var logs bytes.Buffer
	vendor := &pricedVendor{}
	m := newServerMetrics()
	keeper := newSpendKeeper(db, slog.New(slog.NewJSONHandler(&logs, nil)), m, map[string]int64{"pdl": 100}, []enrich.Source{vendor})
	is.Equal(keeper.Admit(ctx, "org-1", "pdl", false), "") // readable: admitted
	keeper.Spent(ctx, "org-1", enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeHit, VendorCalls: 1, Credits: 1})

	// The budgets can no longer be read.
	is.NoErr(db.Write(ctx, func(tx store.Tx) error {
		_, err := tx.Exec(ctx, `ALTER TABLE source_budgets RENAME TO source_budgets_away`)
		return err
	}))
	skip := keeper.Admit(ctx, "org-1", "pdl", false)
	is.Equal(skip, enrich.ReasonBudgetUnread)
	is.True(skip != enrich.ReasonBudget)
	is.Equal(len(keeper.orgAsks), 0) // nothing reserved
	is.Equal(len(keeper.instAsks), 0)
	is.True(strings.Contains(logs.String(), "reading a source's budget"))
	is.Equal(m.counter("enrichd_source_skipped_total", "source", "pdl", "reason", enrich.ReasonBudgetUnread).Get(), uint64(1))
	is.Equal(m.counter("enrichd_source_skipped_total", "source", "pdl", "reason", enrich.ReasonBudget).Get(), uint64(0))

	p := &enrich.Pipeline{Sources: []enrich.Source{vendor}, Spend: keeper}
	_, tr, terr := p.Lookup(ctx, enrich.Ask{Input: enrich.Input{Lookup: enrich.LookupDomain, Target: "acme.com"}, Org: "org-1"})
	is.Equal(vendor.asked.Load(), int64(0)) // not asked
	is.True(terr != nil)
	is.Equal(terr.Code, enrich.CodeProviderUnavailable)
	is.True(!strings.Contains(terr.Message, "budget"))
	is.True(strings.Contains(terr.Message, "could not be reached"))
	is.Equal(tr.Sources, []enrich.SourceCall{{Name: "pdl", Outcome: enrich.OutcomeSkipped, Reason: enrich.ReasonBudgetUnread}})
}

// faultyReads is a database whose reads fail as storage that cannot serve them does.
type faultyReads struct{ store.Driver }

func (faultyReads) Read(context.Context, func(store.Executor) error) error {
	return store.StorageUnavailable()
}

// A budget that cannot be read because the storage is failing is not logged ask after
// ask: the store's own line says the storage is failing, once a minute. The ask is
// still skipped budget_unread and counted.
func TestABudgetUnreadInAStorageOutageIsNotLoggedPerAsk(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	real, err := store.Open(ctx, filepath.Join(t.TempDir(), "enrichd.db"), storetest.Schema(t), store.WithSubjectKey(storetest.SubjectKey))
	is.NoErr(err)
	t.Cleanup(func() { real.Close() })
	db := &store.DB{Driver: faultyReads{real.Driver}, Now: real.Now}
	db.SetSubjects(real.Subjects())
	var logs bytes.Buffer
	m := newServerMetrics()
	keeper := newSpendKeeper(db, slog.New(slog.NewJSONHandler(&logs, nil)), m, map[string]int64{"pdl": 100}, []enrich.Source{&pricedVendor{}})
	for range 3 {
		is.Equal(keeper.Admit(ctx, "org-1", "pdl", false), enrich.ReasonBudgetUnread)
	}
	is.Equal(len(keeper.orgAsks), 0) // nothing reserved
	is.Equal(m.counter("enrichd_source_skipped_total", "source", "pdl", "reason", enrich.ReasonBudgetUnread).Get(), uint64(3))
	is.Equal(logs.String(), "") // no line an ask

	// Nor is an ask's spend that cannot be written for the same reason.
	failing := &store.DB{Driver: faultyWrites{real.Driver}, Now: real.Now}
	failing.SetSubjects(real.Subjects())
	keeper = newSpendKeeper(failing, slog.New(slog.NewJSONHandler(&logs, nil)), m, nil, []enrich.Source{&pricedVendor{}})
	for range 3 {
		keeper.Spent(ctx, "org-1", enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeHit, VendorCalls: 1, Credits: 1})
	}
	is.Equal(logs.String(), "")
}

type faultyWrites struct{ store.Driver }

func (faultyWrites) Write(context.Context, func(store.Tx) error) error {
	return store.StorageUnavailable()
}
