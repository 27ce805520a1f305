package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/matryer/is"
)

func testChargesTakeTheGrantThatExpiresFirst(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	later := clk.Now().Add(48 * time.Hour)
	sooner := clk.Now().Add(24 * time.Hour)
	_, err := db.GrantCredits(ctx, "acme", 5, nil)
	is.NoErr(err)
	laterID, err := db.GrantCredits(ctx, "acme", 1, &later)
	is.NoErr(err)
	soonerID, err := db.GrantCredits(ctx, "acme", 1, &sooner)
	is.NoErr(err)

	first, err := db.CreateTask(ctx, store.BySystem, NewTask(org, "a.com"))
	is.NoErr(err)
	second, err := db.CreateTask(ctx, store.BySystem, NewTask(org, "b.com"))
	is.NoErr(err)

	ledger, err := db.CreditLedger(ctx, "acme")
	is.NoErr(err)
	charges := map[string]int64{}
	for _, e := range ledger {
		if e.Kind == store.LedgerCharge {
			charges[*e.TaskID] = e.GrantID
		}
	}
	is.Equal(charges[first.Task.ID], soonerID) // the grant expiring first pays first
	is.Equal(charges[second.Task.ID], laterID)
}

func testInsufficientAndExpiredCredits(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")

	_, err := db.CreateTask(ctx, store.BySystem, NewTask(org, "a.com"))
	var e *enrich.Error
	is.True(errors.As(err, &e))
	is.Equal(e.Kind, enrich.KindPaymentRequired)
	is.Equal(e.Code, "insufficient_credits")
	is.Equal(*e.CreditsRemaining, int64(0))

	exp := clk.Now().Add(time.Hour)
	_, err = db.GrantCredits(ctx, "acme", 3, &exp)
	is.NoErr(err)
	clk.Add(2 * time.Hour)
	_, err = db.CreateTask(ctx, store.BySystem, NewTask(org, "a.com"))
	is.True(errors.As(err, &e))
	is.Equal(e.Code, "credits_expired")
	is.Equal(*e.CreditsRemaining, int64(0))

	b, err := db.CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(b, store.Balance{Balance: 0, Granted: 3, Expired: 3})
	tasks, total, err := db.ListTasks(ctx, org, "", 0, 10)
	is.NoErr(err)
	is.Equal(total, int64(0)) // a refused request creates no task
	is.Equal(len(tasks), 0)
}

func testRefundToAGrantThatExpiredMeanwhileExpiresAtOnce(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	exp := clk.Now().Add(time.Minute)
	_, err := db.GrantCredits(ctx, "acme", 2, &exp)
	is.NoErr(err)
	created, err := db.CreateTask(ctx, store.BySystem, NewTask(org, "a.com"))
	is.NoErr(err)
	clk.Add(2 * time.Minute)
	_, err = db.CancelTask(ctx, org, created.Task.ID)
	is.NoErr(err)
	b, err := db.CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(b.Balance, int64(0))
	is.Equal(b, store.Balance{Balance: 0, Granted: 2, Charged: 1, Refund: 1, Expired: 2})
}

// testLedgerAddsUpAfterAMixedWorkload drives charges, refunds (failures, cancels,
// expiries) and expiring grants at random and checks that the ledger's sums equal the
// balance the store spends from.
func testLedgerAddsUpAfterAMixedWorkload(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	r := rand.New(rand.NewPCG(1, 2))
	var open []string
	for i := range 400 {
		switch op := r.IntN(10); {
		case op == 0:
			exp := clk.Now().Add(time.Duration(r.IntN(120)) * time.Minute)
			_, err := db.GrantCredits(ctx, "acme", int64(1+r.IntN(20)), &exp)
			is.NoErr(err)
		case op == 1:
			_, err := db.GrantCredits(ctx, "acme", int64(1+r.IntN(5)), nil)
			is.NoErr(err)
		case op <= 5:
			nt := NewTask(org, "d"+string(rune('a'+i%26))+".com")
			if r.IntN(3) == 0 {
				nt.Input = enrich.Input{Lookup: enrich.LookupEmail, Target: "jane@acme.com"} // costs 3
			}
			res, err := db.CreateTask(ctx, store.BySystem, nt)
			if err != nil {
				is.Equal(enrich.KindOf(err), enrich.KindPaymentRequired)
				continue
			}
			open = append(open, res.Task.ID)
		case op == 6 && len(open) > 0:
			_, err := db.CancelTask(ctx, org, open[0])
			if err != nil {
				is.Equal(enrich.KindOf(err), enrich.KindConflict) // settled by a claim meanwhile
			}
			open = open[1:]
		case op == 7:
			c, err := db.ClaimTask(ctx, time.Minute)
			is.NoErr(err)
			if c != nil && r.IntN(4) == 0 {
				continue // a worker that dies holding it: requeued once the lease runs out
			}
			if c != nil {
				out := store.Outcome{Err: &enrich.TaskError{Code: enrich.CodeNotFound, Message: "no"}}
				if r.IntN(2) == 0 {
					out = store.Outcome{Result: &enrich.Result{Company: &enrich.Company{Name: "X", Domain: enrich.Ptr(c.Input.Target)}}, Fetched: true}
				}
				ok, err := db.Settle(ctx, c, out)
				is.NoErr(err)
				is.True(ok)
			}
		default:
			clk.Add(time.Duration(r.IntN(15)) * time.Minute)
			_, _, err := db.RequeueAbandoned(ctx)
			is.NoErr(err)
			_, err = db.ExpireTasks(ctx)
			is.NoErr(err)
		}
	}
	b, err := db.CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(b.Balance, b.Granted-b.Charged+b.Refund-b.Expired)
	is.True(b.Charged > 0 && b.Refund > 0 && b.Expired > 0) // the workload did exercise every kind

	// The grants' spendable remainder, which charges draw on, equals the ledger's sum.
	raw := env.Raw()
	var spendable int64
	is.NoErr(raw.QueryRow(`SELECT coalesce(sum(remaining), 0) FROM credit_grants WHERE org_id = ? AND expired_at IS NULL`, org).Scan(&spendable))
	is.Equal(spendable, b.Balance)
	// Every failed or canceled task was refunded exactly what it was charged.
	var unbalanced int
	is.NoErr(raw.QueryRow(`SELECT count(*) FROM tasks t WHERE t.status IN ('failed', 'canceled') AND t.credits_charged !=
		(SELECT coalesce(sum(amount), 0) FROM credit_ledger l WHERE l.task_id = t.id AND l.kind = 'refund')`).Scan(&unbalanced))
	is.Equal(unbalanced, 0)

	// The counts behind list totals and the backlog check agree with the table.
	var drift int
	is.NoErr(raw.QueryRow(`SELECT count(*) FROM (
		SELECT org_id, status, count(*) AS n FROM tasks GROUP BY org_id, status
		EXCEPT SELECT org_id, status, n FROM task_counts WHERE n > 0) AS drifted`).Scan(&drift))
	is.Equal(drift, 0)
	is.NoErr(raw.QueryRow(`SELECT count(*) FROM task_counts c WHERE n != (SELECT count(*) FROM tasks t WHERE t.org_id = c.org_id AND t.status = c.status)`).Scan(&drift))
	is.Equal(drift, 0)
	// The daily sums the dashboard's chart reads agree with the ledger they summarize.
	fromLedger, kept := CreditSums(t, raw)
	is.Equal(kept, fromLedger)
	var all int64
	is.NoErr(raw.QueryRow(`SELECT count(*) FROM tasks WHERE org_id = ?`, org).Scan(&all))
	_, total, err := db.ListTasks(ctx, org, "", 0, 1)
	is.NoErr(err)
	is.Equal(total, all)
	for _, status := range []string{store.StatusQueued, store.StatusRunning, store.StatusSucceeded, store.StatusFailed, store.StatusCanceled} {
		var want int64
		is.NoErr(raw.QueryRow(`SELECT count(*) FROM tasks WHERE org_id = ? AND status = ?`, org, status).Scan(&want))
		got, err := db.CountTasks(ctx, org, status)
		is.NoErr(err)
		is.Equal(got, want)
	}
}

func testClaimsAreRoundRobinAcrossOrgsAndFIFOWithin(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	big, small := NewOrg(t, db, "big"), NewOrg(t, db, "small")
	for _, name := range []string{"big", "small"} {
		_, err := db.GrantCredits(ctx, name, 100, nil)
		is.NoErr(err)
	}
	for i := range 20 {
		_, err := db.CreateTask(ctx, store.BySystem, NewTask(big, "big"+string(rune('a'+i))+".com"))
		is.NoErr(err)
		clk.Add(time.Millisecond)
	}
	for _, d := range []string{"s1.com", "s2.com"} {
		_, err := db.CreateTask(ctx, store.BySystem, NewTask(small, d))
		is.NoErr(err)
		clk.Add(time.Millisecond)
	}
	var order []string
	for range 6 {
		c, err := db.ClaimTask(ctx, time.Minute)
		is.NoErr(err)
		order = append(order, c.Input.Target)
	}
	// Turns alternate between the organizations, whichever went first, so the small
	// one's two tasks are among the first four claims despite the other's backlog; each
	// organization's tasks come out in the order they were sent.
	var bigOnes, smallOnes []string
	for i, target := range order {
		if strings.HasPrefix(target, "s") {
			smallOnes = append(smallOnes, target)
			is.True(i < 4)
		} else {
			bigOnes = append(bigOnes, target)
		}
	}
	is.Equal(smallOnes, []string{"s1.com", "s2.com"})
	is.Equal(bigOnes, []string{"biga.com", "bigb.com", "bigc.com", "bigd.com"})
	is.True(order[0][0] != order[1][0]) // the first two claims went to different organizations
}

func testAbandonedClaimsAreRequeuedAndSettleOnce(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 10, nil)
	is.NoErr(err)
	created, err := db.CreateTask(ctx, store.BySystem, NewTask(org, "a.com"))
	is.NoErr(err)

	dead, err := db.ClaimTask(ctx, 30*time.Second)
	is.NoErr(err)
	n, _, err := db.RequeueAbandoned(ctx)
	is.NoErr(err)
	is.Equal(n, 0) // the lease still holds

	clk.Add(31 * time.Second)
	n, _, err = db.RequeueAbandoned(ctx)
	is.NoErr(err)
	is.Equal(n, 1)
	alive, err := db.ClaimTask(ctx, 30*time.Second)
	is.NoErr(err)
	is.Equal(alive.TaskID, created.Task.ID)

	out := store.Outcome{Result: &enrich.Result{Company: &enrich.Company{Name: "A", Domain: enrich.Ptr("a.com")}}, Fetched: true}
	ok, err := db.Settle(ctx, dead, out) // the first worker woke up late: its claim is gone
	is.NoErr(err)
	is.True(!ok)
	ok, err = db.ExtendLease(ctx, dead, time.Minute)
	is.NoErr(err)
	is.True(!ok)
	ok, err = db.Settle(ctx, alive, out)
	is.NoErr(err)
	is.True(ok)
	ok, err = db.Settle(ctx, alive, out) // and only once
	is.NoErr(err)
	is.True(!ok)

	task, err := db.GetTask(ctx, org, created.Task.ID)
	is.NoErr(err)
	is.Equal(task.Status, store.StatusSucceeded)
	b, err := db.CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(b.Charged, int64(1))
}

func testImportIsAllOrNothing(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	good := `{"type":"company","name":"Acme","domain":"acme.com","domains":["acme.io"]}` + "\n"
	for _, badLine := range []string{
		`{"type":"person","full_name":"No URL"}`,
		`{"type":"person","network_url":"https://www.linkedin.com/in/x","positions":[{"start_date":"2020-13-45"}]}`,
		`{"type":"person","network_url":"https://www.linkedin.com/in/x","positions":[{"start_date":"2020-01-01","start_date_precision":"week"}]}`,
		"{\"type\":\"company\",\"name\":\"Ac\xffme\",\"domain\":\"acme.org\"}",                 // not UTF-8
		`{"type":"person","network_url":"https://www.linkedin.com/in/%ff%fe","full_name":"X"}`, // decoded, not UTF-8
		`{"type":"person","network_url":"https://www.linkedin.com/in/x","emails":["ja\u0007ne@acme.com"]}`,
	} {
		_, err := db.Import(ctx, strings.NewReader(good+"\n"+badLine+"\n"), enrich.Normalizer{})
		is.True(err != nil)
		is.True(strings.Contains(err.Error(), "line 3"))
	}
	_, err := db.Dataset().CompanyByDomain(ctx, nil, "acme.com")
	is.True(errors.Is(err, enrich.ErrNotFound)) // line 1 was not imported either
	has, err := db.HasRecords(ctx, store.OriginDataset)
	is.NoErr(err)
	is.True(!has)

	stats, err := db.Import(ctx, strings.NewReader(good), enrich.Normalizer{})
	is.NoErr(err)
	is.Equal(stats, store.ImportStats{Companies: 1})
	has, err = db.HasRecords(ctx, store.OriginDataset)
	is.NoErr(err)
	is.True(has)
	has, err = db.HasRecords(ctx, store.OriginStore) // an import is the dataset's only
	is.NoErr(err)
	is.True(!has)
	c, err := db.Dataset().CompanyByDomain(ctx, nil, "acme.io")
	is.NoErr(err)
	is.Equal(*c.Domain, "acme.com")
	is.Equal(*c.Redirect, enrich.Redirect{From: "acme.io", To: "acme.com", Confirmed: false})
	c, err = db.Dataset().CompanyByDomain(ctx, nil, "acme.com")
	is.NoErr(err)
	is.Equal(c.Redirect, nil)
}

// testAChangedDomainStaysAnAlias re-imports a company under a new canonical domain:
// its old domain answers with a redirect instead of passing the company off as its own,
// and a record whose every key moved elsewhere is gone.
func testAChangedDomainStaysAnAlias(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	imp := func(lines ...string) {
		t.Helper()
		_, err := db.Import(ctx, strings.NewReader(strings.Join(lines, "\n")), enrich.Normalizer{})
		is.NoErr(err)
	}
	imp(`{"type":"company","name":"Acme","domain":"acme.com"}`)
	imp(`{"type":"company","name":"Acme","domain":"acme.com","network_url":"https://www.linkedin.com/company/acme"}`)
	imp(`{"type":"company","name":"Acme Inc","domain":"acme.net","network_url":"https://www.linkedin.com/company/acme"}`)

	c, err := db.Dataset().CompanyByDomain(ctx, nil, "acme.com")
	is.NoErr(err)
	is.Equal(c.Name, "Acme Inc")
	is.Equal(*c.Redirect, enrich.Redirect{From: "acme.com", To: "acme.net", Confirmed: false})
	c, err = db.Dataset().CompanyByDomain(ctx, nil, "acme.net")
	is.NoErr(err)
	is.Equal(c.Redirect, nil)

	raw := env.Raw()
	var records int
	is.NoErr(raw.QueryRow(`SELECT count(*) FROM records`).Scan(&records))
	is.Equal(records, 1) // the first, domain-only record lost its key to the second and is gone
}

// testAbandonedClaimsOfTwoOrganizationsAreRequeuedTogether: one sweep puts back the
// abandoned tasks of two organizations, their rows locked in one order, and both
// organizations are back in line, each claimed in turn.
func testAbandonedClaimsOfTwoOrganizationsAreRequeuedTogether(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	first, second := NewOrg(t, db, "first"), NewOrg(t, db, "second")
	want := map[string]string{}
	for _, o := range []struct{ org, name, domain string }{{second, "second", "b.com"}, {first, "first", "a.com"}} {
		_, err := db.GrantCredits(ctx, o.name, 10, nil)
		is.NoErr(err)
		created, err := db.CreateTask(ctx, store.BySystem, NewTask(o.org, o.domain))
		is.NoErr(err)
		want[created.Task.ID] = o.org
	}
	for range 2 {
		c, err := db.ClaimTask(ctx, 30*time.Second)
		is.NoErr(err)
		is.True(c != nil)
	}
	c, err := db.ClaimTask(ctx, 30*time.Second)
	is.NoErr(err)
	is.Equal(c, nil) // both running, both turns gone

	clk.Add(31 * time.Second)
	n, _, err := db.RequeueAbandoned(ctx)
	is.NoErr(err)
	is.Equal(n, 2)
	got := map[string]string{}
	for range 2 {
		c, err := db.ClaimTask(ctx, 30*time.Second)
		is.NoErr(err)
		got[c.TaskID] = c.OrgID
	}
	is.Equal(got, want)
}

func testClaimSkipsOrganizationsWithNothingLeftQueued(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	first, second := NewOrg(t, db, "first"), NewOrg(t, db, "second")
	for _, name := range []string{"first", "second"} {
		_, err := db.GrantCredits(ctx, name, 10, nil)
		is.NoErr(err)
	}
	gone, err := db.CreateTask(ctx, store.BySystem, NewTask(first, "a.com"))
	is.NoErr(err)
	waiting, err := db.CreateTask(ctx, store.BySystem, NewTask(second, "b.com"))
	is.NoErr(err)
	_, err = db.CancelTask(ctx, first, gone.Task.ID) // first keeps its turn with nothing queued
	is.NoErr(err)

	c, err := db.ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	is.Equal(c.TaskID, waiting.Task.ID)
	c, err = db.ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	is.Equal(c, nil) // nothing is left

	// A released task gets back in line and keeps no start time.
	again, err := db.CreateTask(ctx, store.BySystem, NewTask(first, "c.com"))
	is.NoErr(err)
	c, err = db.ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	is.NoErr(db.ReleaseTask(ctx, c))
	task, err := db.GetTask(ctx, first, again.Task.ID)
	is.NoErr(err)
	is.Equal(task.Status, store.StatusQueued)
	is.Equal(task.StartedAt, nil)
	c, err = db.ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	is.Equal(c.TaskID, again.Task.ID)
}

// testAClaimSaysWhetherMoreIsQueued: a claim reports more queued while its own
// organization has another task, or another organization is in line (even one whose
// tasks are gone, until a claim drops its turn: it is never less than what is
// queued), and not for the last task.
func testAClaimSaysWhetherMoreIsQueued(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	first, second := NewOrg(t, db, "first"), NewOrg(t, db, "second")
	for _, name := range []string{"first", "second"} {
		_, err := db.GrantCredits(ctx, name, 10, nil)
		is.NoErr(err)
	}
	for _, d := range []string{"a.com", "b.com"} {
		_, err := db.CreateTask(ctx, store.BySystem, NewTask(first, d))
		is.NoErr(err)
		clk.Add(time.Millisecond)
	}
	c, err := db.ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	is.Equal(c.Input.Target, "a.com")
	is.True(c.More) // b.com
	c, err = db.ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	is.Equal(c.Input.Target, "b.com")
	is.True(!c.More) // the last

	// Another organization in line is more, whichever organization's turn comes first;
	// and a turn stays in line until a claim finds nothing queued for it.
	for _, n := range []struct {
		org    string
		domain string
	}{{first, "c.com"}, {second, "d.com"}} {
		_, err := db.CreateTask(ctx, store.BySystem, NewTask(n.org, n.domain))
		is.NoErr(err)
		clk.Add(time.Millisecond)
	}
	for range 2 {
		c, err = db.ClaimTask(ctx, time.Minute)
		is.NoErr(err)
		is.True(c.More)
	}
	c, err = db.ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	is.Equal(c, nil) // and the turns left the line
	_, err = db.CreateTask(ctx, store.BySystem, NewTask(second, "g.com"))
	is.NoErr(err)
	clk.Add(time.Millisecond)
	c, err = db.ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	is.Equal(c.Input.Target, "g.com")
	is.True(!c.More)

	// A claim that passes a turn whose tasks were canceled drops it on its way, and the
	// turn is not more.
	gone, err := db.CreateTask(ctx, store.BySystem, NewTask(second, "e.com"))
	is.NoErr(err)
	clk.Add(time.Millisecond)
	_, err = db.CreateTask(ctx, store.BySystem, NewTask(first, "f.com"))
	is.NoErr(err)
	_, err = db.CancelTask(ctx, second, gone.Task.ID)
	is.NoErr(err)
	c, err = db.ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	is.Equal(c.Input.Target, "f.com")
	is.True(!c.More)
	c, err = db.ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	is.Equal(c, nil)
}

func testPaymentRequiredShowsWhatRemains(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	org := NewOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 2, nil)
	is.NoErr(err)
	nt := NewTask(org, "jane@acme.com")
	nt.Input.Lookup = enrich.LookupEmail // costs 3
	_, err = db.CreateTask(ctx, store.BySystem, nt)
	var e *enrich.Error
	is.True(errors.As(err, &e))
	is.Equal(e.Code, "insufficient_credits")
	is.Equal(*e.CreditsRemaining, int64(2))
	b, err := db.CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(b.Balance, int64(2))
}

// testATaskCanFailInsideTheRequest creates a task that is refused before any lookup:
// it is failed at once, charged and refunded in the same transaction, never queued.
func testATaskCanFailInsideTheRequest(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	org := NewOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 10, nil)
	is.NoErr(err)

	nt := NewTask(org, "x")
	nt.Input = enrich.Input{Lookup: enrich.LookupEmail, Target: "info@acme.com"}
	nt.Fail = &enrich.TaskError{Code: enrich.CodeNotFound, Message: "a role address"}
	res, err := db.CreateTask(ctx, store.BySystem, nt)
	is.NoErr(err)
	is.Equal(res.Task.Status, store.StatusFailed)
	is.Equal(res.Task.Error, nt.Fail)
	is.Equal(res.Task.CreditsCharged, int64(3))
	is.True(res.Task.FinishedAt != nil && res.Task.QueuedAt == nil)

	got, err := db.GetTask(ctx, org, res.Task.ID)
	is.NoErr(err)
	is.Equal(got.Status, store.StatusFailed)
	is.Equal(got.Error, nt.Fail) // the error is stored with the task

	ledger, err := db.CreditLedger(ctx, "acme")
	is.NoErr(err)
	var kinds []string
	for _, l := range ledger {
		if l.TaskID != nil && *l.TaskID == res.Task.ID {
			kinds = append(kinds, l.Kind+":"+strconv.FormatInt(l.Amount, 10))
		}
	}
	is.Equal(kinds, []string{"charge:3", "refund:3"})
	b, err := db.CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(b.Balance, int64(10))

	claim, err := db.ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	is.Equal(claim, nil) // nothing was queued
}

// testHeldDataForEmailLookups imports a person with an address and
// finds them by it in another case and with a +tag; what an ambiguous lookup gathered
// is read back within the window only.
func testHeldDataForEmailLookups(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	_, err := db.Import(ctx, strings.NewReader(`{"type":"person","network_url":"https://www.linkedin.com/in/jane-doe","full_name":"Jane Doe","emails":["Jane.Doe@Acme.com"]}`), enrich.Normalizer{})
	is.NoErr(err)
	h, err := db.Held().PersonByEmail(ctx, "jane.doe+x@acme.com")
	is.NoErr(err)
	is.True(h != nil)
	is.Equal(*h.Person.FullName, "Jane Doe")
	h, err = db.Held().PersonByEmail(ctx, "john.doe@acme.com")
	is.NoErr(err)
	is.Equal(h, nil)

	g, err := db.Held().Gathering(ctx, "j@acme.com", clk.Now().Add(-time.Hour))
	is.NoErr(err)
	is.Equal(g, nil)
}

// testExpiryOfABacklogRefundsEveryTask expires more tasks than one transaction takes.
func testExpiryOfABacklogRefundsEveryTask(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 5000, nil)
	is.NoErr(err)
	for i := range 1200 {
		_, err := db.CreateTask(ctx, store.BySystem, NewTask(org, fmt.Sprintf("d%d.com", i)))
		is.NoErr(err)
	}
	clk.Add(11 * time.Minute)
	expired, err := db.ExpireTasks(ctx)
	is.NoErr(err)
	is.Equal(len(expired), 1200)
	failed, err := db.CountTasks(ctx, org, store.StatusFailed)
	is.NoErr(err)
	is.Equal(failed, int64(1200))
	b, err := db.CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(b.Charged, int64(1200))
	is.Equal(b.Refund, int64(1200))
	is.Equal(b.Balance, int64(5000))
}

// testATaskWhoseInputCannotBeReadDoesNotStopTheQueue: a row whose input is not JSON
// (written by hand, or by another version) is claimed without hints, and the other
// organizations keep being served.
func testATaskWhoseInputCannotBeReadDoesNotStopTheQueue(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	first, second := NewOrg(t, db, "first"), NewOrg(t, db, "second")
	for _, org := range []string{"first", "second"} {
		_, err := db.GrantCredits(ctx, org, 10, nil)
		is.NoErr(err)
	}
	bad, err := db.CreateTask(ctx, store.BySystem, NewTask(first, "bad.com"))
	is.NoErr(err)
	_, err = db.CreateTask(ctx, store.BySystem, NewTask(second, "good.com"))
	is.NoErr(err)
	raw := env.Raw()
	_, err = raw.Exec(`UPDATE tasks SET input = '' WHERE id = ?`, bad.Task.ID)
	is.NoErr(err)

	c1, err := db.ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	is.Equal(c1.TaskID, bad.Task.ID)
	is.Equal(c1.Input.Hints, enrich.Hints{})
	c2, err := db.ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	is.Equal(c2.Input.Target, "good.com")
}

// NewOrg creates the organization name and returns its id.
func NewOrg(t testing.TB, db *store.DB, name string) string {
	t.Helper()
	org, err := db.CreateOrg(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return org.ID
}

// NewTask is a task of the organization looking up domain.
func NewTask(orgID, domain string) store.NewTask {
	raw, _ := json.Marshal(map[string]string{"domain": domain})
	return store.NewTask{
		OrgID: orgID, Input: enrich.Input{Lookup: enrich.LookupDomain, Target: domain}, RawInput: raw,
		TTL: 10 * time.Minute, MaxBacklog: 10000, Freshness: 30 * 24 * time.Hour,
	}
}

// testAnEarlierFetchNeverReplacesANewerRecord settles fetches of one company out of
// their order, for everyone and for an organization alone: one fetched before the
// record held leaves it as it is, and one fetched after replaces it.
func testAnEarlierFetchNeverReplacesANewerRecord(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 100, nil)
	is.NoErr(err)
	for _, private := range []bool{false, true} {
		in := enrich.Input{Lookup: enrich.LookupDomain, Target: "acme.com"}
		if private {
			in.Target = "private.com"
		}
		fetched := func(name string, at time.Time) store.Outcome {
			return store.Outcome{Result: &enrich.Result{Company: &enrich.Company{Name: name, Domain: enrich.Ptr(in.Target)}},
				Fetched: true, FetchedAt: at, Trace: enrich.Trace{Private: private, Sources: []enrich.SourceCall{}}}
		}
		held := func() string {
			t.Helper()
			res, _, err := db.FindStoredFor(ctx, org, in)
			is.NoErr(err)
			is.True(res != nil && res.Company != nil)
			return res.Company.Name
		}
		now := clk.Now()
		settleLookup(t, db, org, in, fetched("Newer", now))
		settleLookup(t, db, org, in, fetched("Earlier", now.Add(-time.Hour)))
		is.Equal(held(), "Newer")
		clk.Add(time.Minute)
		settleLookup(t, db, org, in, fetched("Latest", clk.Now()))
		is.Equal(held(), "Latest")
		shared, err := db.FindStored(ctx, in)
		is.NoErr(err)
		is.Equal(shared != nil, !private) // a private record is its organization's alone
	}
}
