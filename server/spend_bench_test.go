package server_test

import (
	"context"
	"testing"

	"enrichd/enrich"
)

// BenchmarkSpend measures what the budgets and the kept spend add to each ask of a
// source: Admit without a budget (one read of the budgets' primary key), Admit with
// one (and the month's credits summed over the organization's days), and Spent of a
// miss that sent one request upstream (one small write transaction).
func BenchmarkSpend(b *testing.B) {
	e := newEnv(b, withPricedVendors("pdl"))
	ctx := context.Background()
	spend := e.srv.Spend()
	miss := enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeMiss, VendorCalls: 1}
	for range 30 { // a month of rows to sum
		e.ask(e.orgID, enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeHit, VendorCalls: 1, Credits: 1})
	}
	b.Run("admit_unpriced", func(b *testing.B) {
		for b.Loop() {
			if spend.Admit(ctx, e.orgID, "dataset", false) != "" {
				b.Fatal("refused")
			}
			spend.Spent(ctx, e.orgID, enrich.SourceCall{Name: "dataset", Outcome: enrich.OutcomeMiss})
		}
	})
	b.Run("admit_no_budget", func(b *testing.B) {
		for b.Loop() {
			if spend.Admit(ctx, e.orgID, "pdl", false) != "" {
				b.Fatal("refused")
			}
			spend.Spent(ctx, e.orgID, enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeMiss}) // writes nothing
		}
	})
	if err := e.db.SetSourceBudget(ctx, e.orgID, "pdl", 1<<30); err != nil {
		b.Fatal(err)
	}
	if err := e.db.SetSourceBudget(ctx, "", "pdl", 1<<30); err != nil {
		b.Fatal(err)
	}
	b.Run("admit_with_budgets", func(b *testing.B) {
		for b.Loop() {
			if spend.Admit(ctx, e.orgID, "pdl", false) != "" {
				b.Fatal("refused")
			}
			spend.Spent(ctx, e.orgID, enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeMiss})
		}
	})
	b.Run("spent_one_call", func(b *testing.B) {
		for b.Loop() {
			spend.Spent(ctx, e.orgID, miss)
		}
	})
}
