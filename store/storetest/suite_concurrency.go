package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/matryer/is"
)

// The cases below run on two handles of one database: two processes on the SQLite
// file, two replicas on the PostgreSQL database. Each goes round a number of times with
// both sides released together, so that their transactions overlap; what they check
// holds however the two interleave.

// together runs each fn in its own goroutine, released at once, and waits for all.
func together(fns ...func()) {
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	for _, fn := range fns {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			fn()
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
}

// testTwoWritersChargingTheLastCredit: two handles each create a task when one credit
// is left: exactly one task is charged, the other request is refused for want of
// credits, and the balance is 0, never below.
func testTwoWritersChargingTheLastCredit(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	a, b := env.DB, env.Open()
	org := NewOrg(t, a, "acme")
	const rounds = 20
	for round := range rounds {
		_, err := a.GrantCredits(ctx, "acme", 1, nil)
		is.NoErr(err)
		var errA, errB error
		together(
			func() { _, errA = a.CreateTask(ctx, store.BySystem, NewTask(org, fmt.Sprintf("a%d.com", round))) },
			func() { _, errB = b.CreateTask(ctx, store.BySystem, NewTask(org, fmt.Sprintf("b%d.com", round))) },
		)
		refused := 0
		for _, err := range []error{errA, errB} {
			if err != nil {
				is.Equal(enrich.KindOf(err), enrich.KindPaymentRequired) // the only way to lose
				refused++
			}
		}
		is.Equal(refused, 1) // one charged, one refused
		bal, err := b.CreditBalance(ctx, "acme")
		is.NoErr(err)
		is.Equal(bal.Balance, int64(0))
	}
	bal, err := a.CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(bal, store.Balance{Balance: 0, Granted: rounds, Charged: rounds})
	queued, err := a.CountTasks(ctx, org, store.StatusQueued)
	is.NoErr(err)
	is.Equal(queued, int64(rounds))
	is.Equal(ledgerAddsUp(t, env, org), int64(0))
}

// testOneIdempotencyKeyFromTwoHandles sends the same key and body through two handles
// at once: one task, charged once, and both answers name it.
func testOneIdempotencyKeyFromTwoHandles(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	a, b := env.DB, env.Open()
	org := NewOrg(t, a, "acme")
	_, err := a.GrantCredits(ctx, "acme", 1000, nil)
	is.NoErr(err)
	const rounds = 20
	for round := range rounds {
		nt := NewTask(org, fmt.Sprintf("d%d.com", round))
		nt.IdempotencyKey, nt.Endpoint, nt.BodyHash = fmt.Sprintf("key-%d", round), "POST /v1/companies/enrich", fmt.Sprintf("body-%d", round)
		var resA, resB *store.Enqueued
		var errA, errB error
		together(
			func() { resA, errA = a.CreateTask(ctx, store.BySystem, nt) },
			func() { resB, errB = b.CreateTask(ctx, store.BySystem, nt) },
		)
		is.NoErr(errA)
		is.NoErr(errB)
		is.Equal(resA.Task.ID, resB.Task.ID) // one task
		is.True(resA.Replayed != resB.Replayed)
	}
	all, err := a.CountTasks(ctx, org, store.StatusQueued)
	is.NoErr(err)
	is.Equal(all, int64(rounds))
	bal, err := b.CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(bal.Charged, int64(rounds)) // one charge a key
	is.Equal(ledgerAddsUp(t, env, org), int64(1000-rounds))
}

// testTwoClaimersNeverTakeTheSameTask drains a queue from two handles, several
// claimers on each: every task is claimed exactly once, and each settles once.
func testTwoClaimersNeverTakeTheSameTask(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	a, b := env.DB, env.Open()
	const tasks = 60
	want := map[string]bool{}
	for i := range 3 {
		name := fmt.Sprintf("org%d", i)
		org := NewOrg(t, a, name)
		_, err := a.GrantCredits(ctx, name, tasks, nil)
		is.NoErr(err)
		for j := range tasks / 3 {
			res, err := a.CreateTask(ctx, store.BySystem, NewTask(org, fmt.Sprintf("d%d.com", j)))
			is.NoErr(err)
			want[res.Task.ID] = true
		}
	}
	var mu sync.Mutex
	claimed := map[string]int{}
	var failures []error
	claimer := func(db *store.DB) func() {
		return func() {
			for {
				c, err := db.ClaimTask(ctx, time.Hour)
				if err == nil && c == nil {
					return // drained
				}
				if err == nil {
					var ok bool
					ok, err = db.Settle(ctx, c, store.Outcome{Err: &enrich.TaskError{Code: enrich.CodeNotFound, Message: "no"}})
					if err == nil && !ok {
						err = fmt.Errorf("task %s: a claim just made did not settle", c.TaskID)
					}
				}
				mu.Lock()
				if err != nil {
					failures = append(failures, err)
					mu.Unlock()
					return
				}
				claimed[c.TaskID]++
				mu.Unlock()
			}
		}
	}
	together(claimer(a), claimer(a), claimer(b), claimer(b))
	is.Equal(failures, nil)
	is.Equal(len(claimed), len(want))
	for id, n := range claimed {
		is.True(want[id])
		is.Equal(n, 1) // never the same task twice
	}
}

// testAnExpiredLeaseIsClaimedAgainOnceAndSettlesOnce: a worker dies holding a task;
// once the lease runs out, both handles sweep and claim at once: the task is
// requeued once and claimed once, the dead worker's late settle is refused, and the
// new claim settles once even when both handles try it.
func testAnExpiredLeaseIsClaimedAgainOnceAndSettlesOnce(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	a, b := env.DB, env.Open()
	org := NewOrg(t, a, "acme")
	_, err := a.GrantCredits(ctx, "acme", 100, nil)
	is.NoErr(err)
	const rounds = 10
	for round := range rounds {
		created, err := a.CreateTask(ctx, store.BySystem, NewTask(org, fmt.Sprintf("d%d.com", round)))
		is.NoErr(err)
		dead, err := a.ClaimTask(ctx, 30*time.Second)
		is.NoErr(err)
		is.Equal(dead.TaskID, created.Task.ID)
		env.Clock.Add(31 * time.Second)

		var nA, nB int
		var errA, errB error
		together(
			func() { nA, _, errA = a.RequeueAbandoned(ctx) },
			func() { nB, _, errB = b.RequeueAbandoned(ctx) },
		)
		is.NoErr(errA)
		is.NoErr(errB)
		is.Equal(nA+nB, 1) // requeued once

		var cA, cB *store.Claim
		together(
			func() { cA, errA = a.ClaimTask(ctx, 30*time.Second) },
			func() { cB, errB = b.ClaimTask(ctx, 30*time.Second) },
		)
		is.NoErr(errA)
		is.NoErr(errB)
		is.True((cA == nil) != (cB == nil)) // claimed once
		alive := cA
		if alive == nil {
			alive = cB
		}
		is.Equal(alive.TaskID, created.Task.ID)

		out := store.Outcome{Result: &enrich.Result{Company: &enrich.Company{Name: "X", Domain: enrich.Ptr(alive.Input.Target)}}, Fetched: true}
		late, err := b.Settle(ctx, dead, out)
		is.NoErr(err)
		is.True(!late) // the dead worker's claim is gone

		var okA, okB bool
		together(
			func() { okA, errA = a.Settle(ctx, alive, out) },
			func() { okB, errB = b.Settle(ctx, alive, out) },
		)
		is.NoErr(errA)
		is.NoErr(errB)
		is.True(okA != okB) // settled once
		task, err := b.GetTask(ctx, org, created.Task.ID)
		is.NoErr(err)
		is.Equal(task.Status, store.StatusSucceeded)
	}
	bal, err := a.CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(bal, store.Balance{Balance: 100 - rounds, Granted: 100, Charged: rounds})
	is.Equal(ledgerAddsUp(t, env, org), int64(100-rounds))
}
