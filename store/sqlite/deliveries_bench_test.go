package sqlite_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"enrichd/store"
)

// BenchmarkDeliveryRound is the store's side of one webhook delivery: the event queued,
// claimed and recorded, in batches of 8 across 4 Loops, half acknowledged and half
// failed (which keeps each Loop's failure streak moving).
func BenchmarkDeliveryRound(b *testing.B) {
	ctx := context.Background()
	db, _, _ := openDB(b)
	org := newOrg(b, db, "acme")
	var loops []string
	for i := range 4 {
		l, err := db.CreateLoop(ctx, store.NewLoop{OrgID: org, Name: fmt.Sprintf("L%d", i), ObjectType: "company",
			WebhookURL: "https://hooks.example/", Enabled: true})
		if err != nil {
			b.Fatal(err)
		}
		loops = append(loops, l.ID)
	}
	n := 0
	for b.Loop() {
		for i := range 8 {
			if _, err := db.CreateTestDelivery(ctx, org, loops[i%4]); err != nil {
				b.Fatal(err)
			}
		}
		ds, err := db.ClaimDeliveries(ctx, 8, 8, nil, time.Minute)
		if err != nil || len(ds) != 8 {
			b.Fatal(len(ds), err)
		}
		now := time.Now()
		batch := make([]store.Attempted, len(ds))
		for i, d := range ds {
			a := &store.Attempt{At: now, Ended: now, StatusCode: 200}
			if n++; n%2 == 0 {
				a.StatusCode, a.Err = 500, "the receiver answered 500"
				d.Attempt = store.MaxAttempts // fails for good, so the due set stays empty
			}
			batch[i] = store.Attempted{Dispatch: d, Attempt: a}
		}
		if err := db.RecordAttempts(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
}
