package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"
)

// BenchmarkClaimTask claims from a queue of 10,000 tasks spread over 100 organizations,
// each claim followed by the settle-free release that puts the task back, so the queue
// stays the same size however many iterations run.
func BenchmarkClaimTask(b *testing.B) {
	ctx := context.Background()
	db, _, _ := openDB(b)
	for o := range 100 {
		org := newOrg(b, db, fmt.Sprintf("org-%d", o))
		grantCredits(b, db, fmt.Sprintf("org-%d", o), 1000)
		for i := range 100 {
			if _, err := db.CreateTask(ctx, newTask(org, fmt.Sprintf("d%d-%d.com", o, i))); err != nil {
				b.Fatal(err)
			}
		}
	}
	for b.Loop() {
		c, err := db.ClaimTask(ctx, time.Minute)
		if err != nil || c == nil {
			b.Fatal(c, err)
		}
		if err := db.ReleaseTask(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreateTaskStoreHit is the transaction behind a 200 from the store: the
// idempotency check, the record lookup, the charge, the task row.
func BenchmarkCreateTaskStoreHit(b *testing.B) {
	ctx := context.Background()
	db, _, _ := openDB(b)
	org := newOrg(b, db, "acme")
	grantCredits(b, db, "acme", 1<<40)
	storeCompany(b, db, org, "acme.com")
	nt := newTask(org, "acme.com")
	for b.Loop() {
		if _, err := db.CreateTask(ctx, nt); err != nil {
			b.Fatal(err)
		}
	}
}

func grantCredits(b *testing.B, db *store.DB, org string, amount int64) {
	b.Helper()
	if _, err := db.GrantCredits(context.Background(), org, amount, nil); err != nil {
		b.Fatal(err)
	}
}

// storeCompany fetches a company into the 30-day store the way a worker does.
func storeCompany(b *testing.B, db *store.DB, org, domain string) {
	b.Helper()
	ctx := context.Background()
	if _, err := db.CreateTask(ctx, newTask(org, domain)); err != nil {
		b.Fatal(err)
	}
	c, err := db.ClaimTask(ctx, time.Minute)
	if err != nil || c == nil {
		b.Fatal(c, err)
	}
	res := enrich.Result{Company: &enrich.Company{Name: "Acme", EnrichmentStatus: enrich.StatusEnriched, Domain: &domain}}
	if _, err := db.Settle(ctx, c, store.Outcome{Result: &res, Fetched: true}); err != nil {
		b.Fatal(err)
	}
}
