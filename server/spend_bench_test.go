package server_test

import (
	"context"
	"testing"

	"enrichd/enrich"
	"enrichd/server/servertest"
)

// BenchmarkSpend measures what the books and the budgets add to each ask of a source:
// an ask of a source that costs nothing (no database); a whole ask of a priced source
// that sent one request, a miss, without a budget (booked in one write, settled in
// another) and with budgets (the booking also sums the month's credits); and a
// further request booked at more than the ask holds (one write).
func BenchmarkSpend(b *testing.B) {
	e := servertest.NewEnv(b, servertest.WithPricedVendors("pdl"))
	ctx := context.Background()
	spend := e.Work.Spend()
	miss := enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeMiss, VendorCalls: 1}
	for range 30 { // a month of rows to sum
		e.Ask(e.OrgID, enrich.SourceCall{Name: "pdl", Outcome: enrich.OutcomeHit, VendorCalls: 1, Credits: 1})
	}
	ask := func(b *testing.B) {
		for b.Loop() {
			booking, skip := spend.Admit(ctx, e.OrgID, "pdl", false)
			if skip != "" {
				b.Fatal("refused")
			}
			spend.Spent(ctx, e.OrgID, miss, booking)
		}
	}
	b.Run("admit_unpriced", func(b *testing.B) {
		for b.Loop() {
			booking, skip := spend.Admit(ctx, e.OrgID, "dataset", false)
			if skip != "" {
				b.Fatal("refused")
			}
			spend.Spent(ctx, e.OrgID, enrich.SourceCall{Name: "dataset", Outcome: enrich.OutcomeMiss}, booking)
		}
	})
	b.Run("ask_no_budget", ask)
	if err := e.DB.SetSourceBudget(ctx, e.OrgID, "pdl", 1<<30); err != nil {
		b.Fatal(err)
	}
	if err := e.DB.SetSourceBudget(ctx, "", "pdl", 1<<30); err != nil {
		b.Fatal(err)
	}
	b.Run("ask_with_budgets", ask)
	b.Run("book_request", func(b *testing.B) {
		booking, skip := spend.Admit(ctx, e.OrgID, "pdl", false)
		if skip != "" {
			b.Fatal("refused")
		}
		for b.Loop() {
			if err := spend.Book(ctx, booking, booking.Calls+1, booking.Credits+1); err != nil {
				b.Fatal(err)
			}
		}
		spend.Spent(ctx, e.OrgID, miss, booking)
	})
}
