package postgres

import (
	"context"
	"sync"
	"testing"
	"time"

	"enrichd/store"

	"github.com/matryer/is"
)

// loopWithDeliveries makes an organization with a Loop that has n test deliveries due.
func loopWithDeliveries(t *testing.T, db *store.DB, org string, n int) (*store.Org, *store.Loop) {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	o, err := db.CreateOrg(ctx, org)
	is.NoErr(err)
	l, err := db.CreateLoop(ctx, store.NewLoop{OrgID: o.ID, Name: "Hooks", ObjectType: "company", WebhookURL: "https://example.com/hook", Enabled: true})
	is.NoErr(err)
	for range n {
		_, err := db.CreateTestDelivery(ctx, o.ID, l.ID)
		is.NoErr(err)
	}
	return o, l
}

func TestTwoClaimersNeverGetTheSameDelivery(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := migratedDSN(t)
	c := &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	dbs := []*store.DB{facade(openTest(t, dsn, c)), facade(openTest(t, dsn, c))}
	const loops, each = 6, 20
	for i := range loops {
		loopWithDeliveries(t, dbs[0], string(rune('a'+i))+"-org", each)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for i := range 4 {
		db := dbs[i%2]
		wg.Go(func() {
			for {
				got, err := db.ClaimDeliveries(ctx, 7, 1000, nil, time.Hour)
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, d := range got {
					seen[d.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	is.Equal(len(seen), loops*each) // every delivery handed out
	for id, n := range seen {
		if n != 1 {
			t.Errorf("delivery %s handed out %d times", id, n)
		}
	}
}

func TestPerLoopCapHoldsAcrossReplicas(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := migratedDSN(t)
	c := &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	a, b := facade(openTest(t, dsn, c)), facade(openTest(t, dsn, c))
	_, slow := loopWithDeliveries(t, a, "acme", 10)
	_, other := loopWithDeliveries(t, a, "globex", 2)
	const perLoop = 3

	// Two replicas claiming at once hand out at most perLoop to the slow Loop together.
	var mu sync.Mutex
	var claimed []*store.Dispatch
	var wg sync.WaitGroup
	for _, db := range []*store.DB{a, b, a, b} {
		wg.Go(func() {
			got, err := db.ClaimDeliveries(ctx, 10, perLoop, nil, time.Minute)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			claimed = append(claimed, got...)
			mu.Unlock()
		})
	}
	wg.Wait()
	count := func(ds []*store.Dispatch, loop string) (n int) {
		for _, d := range ds {
			if d.LoopID == loop {
				n++
			}
		}
		return n
	}
	is.True(count(claimed, slow.ID) <= perLoop)

	// Whatever those claims left, the slow Loop has exactly perLoop leased now, counted
	// in the database: another replica gets none of it, with an empty inFlight.
	for _, db := range []*store.DB{a, b} {
		got, err := db.ClaimDeliveries(ctx, 10, perLoop, nil, time.Minute)
		is.NoErr(err)
		claimed = append(claimed, got...)
	}
	is.Equal(count(claimed, slow.ID), perLoop)
	is.Equal(count(claimed, other.ID), 2)
	got, err := b.ClaimDeliveries(ctx, 10, perLoop, nil, time.Minute)
	is.NoErr(err)
	is.Equal(len(got), 0)

	// One acknowledged frees one place; the rest wait for their leases.
	var first *store.Dispatch
	for _, d := range claimed {
		if d.LoopID == slow.ID {
			first = d
			break
		}
	}
	is.Equal(first.Attempt, 1)
	is.NoErr(a.RecordAttempts(ctx, []store.Attempted{{Dispatch: first, Attempt: &store.Attempt{At: c.Now(), Ended: c.Now(), StatusCode: 204}}}))
	got, err = b.ClaimDeliveries(ctx, 10, perLoop, nil, time.Minute)
	is.NoErr(err)
	is.Equal(len(got), 1)
	// The caller's own in-flight count is honoured too, when it is the larger.
	c.Add(2 * time.Minute) // every lease has run out
	got, err = a.ClaimDeliveries(ctx, 10, perLoop, map[string]int{slow.ID: 2}, time.Minute)
	is.NoErr(err)
	is.Equal(count(got, slow.ID), 1)
}

func TestDeliveryLifecycle(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	pg, c := newTestDB(t)
	db := facade(pg)
	org, loop := loopWithDeliveries(t, db, "acme", 1)
	list, total, err := db.ListDeliveries(ctx, org.ID, loop.ID, 0, 10)
	is.NoErr(err)
	is.Equal(total, int64(1))
	d := list[0]
	got, payload, err := db.GetDelivery(ctx, org.ID, d.ID)
	is.NoErr(err)
	is.Equal(got.ID, d.ID)
	is.Equal(string(payload), `{"event":"test","task":null,"data":null,"error":null}`)

	claimed, err := db.ClaimDeliveries(ctx, 5, 5, nil, time.Minute)
	is.NoErr(err)
	is.Equal(len(claimed), 1)
	is.Equal(claimed[0].URL, "https://example.com/hook")
	is.True(claimed[0].Secret != "")
	is.NoErr(db.RecordAttempts(ctx, []store.Attempted{{Dispatch: claimed[0], Attempt: &store.Attempt{At: c.Now(), Ended: c.Now(), StatusCode: 500, Err: "HTTP 500"}}}))
	got, _, err = db.GetDelivery(ctx, org.ID, d.ID)
	is.NoErr(err)
	is.Equal(got.Status, store.DeliveryPending)
	is.Equal(*got.NextAttemptAt, c.Now().Add(store.RetrySchedule[0]))
	is.Equal(*got.LastStatusCode, 500)

	// Retried now, it is due again at once with the same id, and its second attempt.
	_, err = db.RetryDelivery(ctx, org.ID, d.ID)
	is.NoErr(err)
	claimed, err = db.ClaimDeliveries(ctx, 5, 5, nil, time.Minute)
	is.NoErr(err)
	is.Equal(len(claimed), 1)
	is.Equal(claimed[0].Attempt, 2)
	is.NoErr(db.RecordAttempts(ctx, []store.Attempted{{Dispatch: claimed[0], Attempt: &store.Attempt{At: c.Now(), StatusCode: 200}}}))
	_, err = db.RetryDelivery(ctx, org.ID, d.ID)
	is.Equal(errCode(err), "delivery_not_failed")

	// Another organization sees none of it.
	other, err := db.CreateOrg(ctx, "globex")
	is.NoErr(err)
	_, _, err = db.GetDelivery(ctx, other.ID, d.ID)
	is.Equal(errCode(err), "not_found")
	_, _, err = db.ListDeliveries(ctx, other.ID, loop.ID, 0, 10)
	is.Equal(errCode(err), "not_found")

	is.NoErr(db.DeleteLoop(ctx, org.ID, loop.ID))
	_, _, err = db.GetDelivery(ctx, org.ID, d.ID)
	is.Equal(errCode(err), "not_found")
}

func TestLoopsGetUniqueSlugsUnderConcurrentCreates(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := migratedDSN(t)
	c := &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	a, b := facade(openTest(t, dsn, c)), facade(openTest(t, dsn, c))
	org, err := a.CreateOrg(ctx, "acme")
	is.NoErr(err)
	var wg sync.WaitGroup
	for i := range 6 {
		db := []*store.DB{a, b}[i%2]
		wg.Go(func() {
			if _, err := db.CreateLoop(ctx, store.NewLoop{OrgID: org.ID, Name: "New leads", ObjectType: "company", WebhookURL: "https://example.com/", Enabled: true}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	loops, err := a.ListLoops(ctx, org.ID)
	is.NoErr(err)
	slugs := map[string]bool{}
	for _, l := range loops {
		slugs[l.Slug] = true
	}
	is.Equal(len(slugs), 6)
	is.True(slugs["new-leads"] && slugs["new-leads-6"])

	off := false
	name := "Old leads"
	l, err := a.UpdateLoop(ctx, org.ID, loops[0].ID, store.LoopPatch{Name: &name, Enabled: &off})
	is.NoErr(err)
	is.Equal(l.Slug, "old-leads")
	is.Equal(l.Enabled, false)
	got, err := b.GetLoop(ctx, org.ID, l.ID)
	is.NoErr(err)
	is.Equal(got.Enabled, false)
	rotated, err := a.RotateLoopSecret(ctx, org.ID, l.ID, 0)
	is.NoErr(err)
	is.True(rotated.Destination.Secret != "")
}
