package storetest

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/matryer/is"
)

func testGetOrg(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	id := NewOrg(t, db, "acme")
	org, err := db.GetOrg(ctx, id)
	is.NoErr(err)
	is.Equal(*org, store.Org{ID: id, Name: "acme", CreatedAt: clk.Now()})
	_, err = db.GetOrg(ctx, "acme") // a name is not an id
	is.Equal(enrich.KindOf(err), enrich.KindNotFound)
}

// testTaskDeliveriesAndPayload reads a settled task's delivery and its payload, and
// nothing of another organization's.
func testTaskDeliveriesAndPayload(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	v := seedVariety(t, env)

	ds, err := v.db.TaskDeliveries(ctx, v.org, v.settledWithLoop)
	is.NoErr(err)
	is.Equal(len(ds), 1)
	d := ds[0]
	is.Equal(*d.TaskID, v.settledWithLoop)
	is.True(d.Event == store.EventTaskSucceeded || d.Event == store.EventTaskFailed)

	got, payload, err := v.db.GetDelivery(ctx, v.org, d.ID)
	is.NoErr(err)
	is.Equal(got, d)
	var body struct {
		Event string `json:"event"`
		Task  struct {
			ID string `json:"id"`
		} `json:"task"`
	}
	is.NoErr(json.Unmarshal(payload, &body))
	is.Equal(body.Event, d.Event)
	is.Equal(body.Task.ID, v.settledWithLoop)
	// The payload is what the sender sends, byte for byte.
	dispatched, err := v.db.ClaimDeliveries(ctx, 100, 100, nil, time.Minute)
	is.NoErr(err)
	found := false
	for _, dd := range dispatched {
		if dd.ID == d.ID {
			found = true
			is.Equal(string(dd.Payload), string(payload))
		}
	}
	is.True(found)

	// A task without a Loop has none; a test event has no task.
	queued, _, err := v.db.FindTasks(ctx, v.org, store.TaskFilter{Status: store.StatusQueued, Limit: 1})
	is.NoErr(err)
	is.Equal(queued[0].LoopID, nil)
	ds, err = v.db.TaskDeliveries(ctx, v.org, queued[0].ID)
	is.NoErr(err)
	is.Equal(len(ds), 0)
	test, err := v.db.CreateTestDelivery(ctx, v.org, v.loopCo)
	is.NoErr(err)
	_, payload, err = v.db.GetDelivery(ctx, v.org, test.ID)
	is.NoErr(err)
	is.Equal(string(payload), `{"event":"test","task":null,"data":null,"error":null}`)

	// Another organization's task and delivery are not found, both ways round.
	_, err = v.db.TaskDeliveries(ctx, v.other, v.settledWithLoop)
	is.Equal(enrich.KindOf(err), enrich.KindNotFound)
	_, _, err = v.db.GetDelivery(ctx, v.other, d.ID)
	is.Equal(enrich.KindOf(err), enrich.KindNotFound)
	theirs, err := v.db.TaskDeliveries(ctx, v.other, v.otherSettledTask)
	is.NoErr(err)
	is.Equal(len(theirs), 1)
	_, err = v.db.TaskDeliveries(ctx, v.org, v.otherSettledTask)
	is.Equal(enrich.KindOf(err), enrich.KindNotFound)
	_, _, err = v.db.GetDelivery(ctx, v.org, theirs[0].ID)
	is.Equal(enrich.KindOf(err), enrich.KindNotFound)
	_, _, err = v.db.GetDelivery(ctx, v.org, "no-such-delivery")
	is.Equal(enrich.KindOf(err), enrich.KindNotFound)
}

// testRotateLoopSecret replaces a Loop's secret: the new one is returned once, signs
// the deliveries sent from then on, queued ones included, and another organization
// cannot rotate it.
func testRotateLoopSecret(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	other := NewOrg(t, db, "other")
	l := newLoop(t, db, org, "hooks", enrich.ObjectCompany)
	queued, err := db.CreateTestDelivery(ctx, org, l.ID)
	is.NoErr(err)

	clk.Add(time.Minute)
	rotated, err := db.RotateLoopSecret(ctx, org, l.ID, 0)
	is.NoErr(err)
	is.True(strings.HasPrefix(rotated.Destination.Secret, "whsec_"))
	is.True(rotated.Destination.Secret != l.Destination.Secret)
	is.Equal(rotated.UpdatedAt, clk.Now())
	is.Equal(rotated.CreatedAt, l.CreatedAt)
	is.Equal(rotated.Destination.URL, l.Destination.URL)

	again, err := db.GetLoop(ctx, org, l.ID)
	is.NoErr(err)
	is.Equal(again.Destination.Secret, "") // shown once
	is.Equal(again.UpdatedAt, clk.Now())

	dispatched, err := db.ClaimDeliveries(ctx, 10, 10, nil, time.Minute)
	is.NoErr(err)
	is.Equal(len(dispatched), 1)
	is.Equal(dispatched[0].ID, queued.ID)
	is.Equal(dispatched[0].Secret, rotated.Destination.Secret)

	twice, err := db.RotateLoopSecret(ctx, org, l.ID, 0)
	is.NoErr(err)
	is.True(twice.Destination.Secret != rotated.Destination.Secret)

	_, err = db.RotateLoopSecret(ctx, other, l.ID, 0)
	is.Equal(enrich.KindOf(err), enrich.KindNotFound)
	_, err = db.RotateLoopSecret(ctx, org, "no-such-loop", 0)
	is.Equal(enrich.KindOf(err), enrich.KindNotFound)
	// The refused rotation changed nothing.
	test, err := db.CreateTestDelivery(ctx, org, l.ID)
	is.NoErr(err)
	dispatched, err = db.ClaimDeliveries(ctx, 10, 10, nil, time.Minute)
	is.NoErr(err)
	is.Equal(len(dispatched), 1)
	is.Equal(dispatched[0].ID, test.ID)
	is.Equal(dispatched[0].Secret, twice.Destination.Secret)
}

// testDailyCredits moves credits around midnight and across days: each lands on its
// UTC day, days without any are zeros, and another organization's are not counted.
func testDailyCredits(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	NewOrg(t, db, "other")
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }

	// 2026-11-01 12:00: 10 granted, one expiring on the 3rd at noon.
	exp := day(2026, 11, 3).Add(12 * time.Hour)
	_, err := db.GrantCredits(ctx, "acme", 4, &exp)
	is.NoErr(err)
	_, err = db.GrantCredits(ctx, "acme", 6, nil)
	is.NoErr(err)
	_, err = db.GrantCredits(ctx, "other", 1000, nil)
	is.NoErr(err)
	// The last millisecond of the 1st: a charge; the first of the 2nd: a charge and
	// its refund (a cancel).
	clk.Add(day(2026, 11, 2).Sub(clk.Now()) - time.Millisecond)
	_, err = db.CreateTask(ctx, store.BySystem, NewTask(org, "a.com"))
	is.NoErr(err)
	clk.Add(time.Millisecond)
	e, err := db.CreateTask(ctx, store.BySystem, NewTask(org, "b.com"))
	is.NoErr(err)
	_, err = db.CancelTask(ctx, org, e.Task.ID)
	is.NoErr(err)
	// The 4th: the grant has expired; reading the balance writes off what is left.
	clk.Add(2*24*time.Hour + 5*time.Hour)
	b, err := db.CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(b.Expired, int64(3)) // the first charge took 1 of the 4
	// The other organization spends on the 2nd and the 4th: none of it is acme's.
	otherID, err := db.FindOrg(ctx, "other")
	is.NoErr(err)
	_, err = db.CreateTask(ctx, store.BySystem, NewTask(otherID.ID, "c.com"))
	is.NoErr(err)

	now := clk.Now() // 2026-11-04 05:00
	days, err := db.DailyCredits(ctx, org, 7, now)
	is.NoErr(err)
	is.Equal(days, []store.CreditDay{
		{Day: day(2026, 10, 29)},
		{Day: day(2026, 10, 30)},
		{Day: day(2026, 10, 31)},
		{Day: day(2026, 11, 1), Granted: 10, Charged: 1},
		{Day: day(2026, 11, 2), Charged: 1, Refunded: 1},
		{Day: day(2026, 11, 3)},
		{Day: day(2026, 11, 4), Expired: 3},
	})
	// The period ends with now's day, whatever the hour; one day is just today.
	days, err = db.DailyCredits(ctx, org, 1, day(2026, 11, 2).Add(-time.Millisecond))
	is.NoErr(err)
	is.Equal(days, []store.CreditDay{{Day: day(2026, 11, 1), Granted: 10, Charged: 1}})
	days, err = db.DailyCredits(ctx, org, 30, now)
	is.NoErr(err)
	is.Equal(len(days), 30)
	is.Equal(days[0].Day, day(2026, 10, 6))
	is.Equal(days[29].Day, day(2026, 11, 4))
	// In another time zone, now is still counted on its UTC day.
	days, err = db.DailyCredits(ctx, org, 1, now.In(time.FixedZone("UTC-8", -8*3600)))
	is.NoErr(err)
	is.Equal(days[0].Day, day(2026, 11, 4))

	otherDays, err := db.DailyCredits(ctx, otherID.ID, 7, now)
	is.NoErr(err)
	is.Equal(otherDays[3].Granted, int64(1000))
	is.Equal(otherDays[6].Charged, int64(1))
	is.Equal(otherDays[4].Charged, int64(0))

	for _, n := range []int{0, -1, store.MaxCreditDays + 1} {
		_, err := db.DailyCredits(ctx, org, n, now)
		is.Equal(enrich.KindOf(err), enrich.KindInvalid)
	}
}

// Querier is what CreditSums and LedgerAddsUp read through: a *Raw, or a *sql.DB.
type Querier interface {
	Query(q string, args ...any) (*sql.Rows, error)
	QueryRow(q string, args ...any) *sql.Row
}

// CreditSums are the ledger's amounts by organization, day and kind, as computed from
// the ledger itself and as credit_days holds them.
func CreditSums(t *testing.T, raw Querier) (fromLedger, kept map[string]int64) {
	t.Helper()
	read := func(q string) map[string]int64 {
		rows, err := raw.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]int64{}
		for rows.Next() {
			var org, kind string
			var day, amount int64
			if err := rows.Scan(&org, &day, &kind, &amount); err != nil {
				t.Fatal(err)
			}
			out[org+"/"+kind+"/"+time.UnixMilli(day*86400000).UTC().Format(time.DateOnly)] = amount
		}
		return out
	}
	return read(`SELECT org_id, created_at / 86400000, kind, sum(amount) FROM credit_ledger GROUP BY 1, 2, 3`),
		read(`SELECT org_id, day, kind, amount FROM credit_days`)
}

// testGrantsAndLedgerPages lists grants newest first and pages through the ledger
// newest first; another organization sees none of it.
func testGrantsAndLedgerPages(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	other := NewOrg(t, db, "other")

	grants, err := db.ListGrants(ctx, org)
	is.NoErr(err)
	is.Equal(len(grants), 0)
	soon := clk.Now().Add(time.Hour)
	first, err := db.GrantCredits(ctx, "acme", 2, &soon)
	is.NoErr(err)
	clk.Add(time.Second)
	second, err := db.GrantCredits(ctx, "acme", 50, nil)
	is.NoErr(err)
	for i := range 5 {
		_, err := db.CreateTask(ctx, store.BySystem, NewTask(org, string(rune('a'+i))+".com"))
		is.NoErr(err)
	}
	clk.Add(2 * time.Hour)
	_, err = db.CreditBalance(ctx, "acme")
	is.NoErr(err)

	grants, err = db.ListGrants(ctx, org)
	is.NoErr(err)
	is.Equal(len(grants), 2)
	is.Equal(grants[0].ID, second)
	is.Equal(grants[0].Remaining, int64(47)) // the grant expiring first paid for 2 tasks
	is.Equal(grants[0].ExpiresAt, nil)
	is.Equal(grants[1].ID, first)
	is.Equal(grants[1].Amount, int64(2))
	is.Equal(*grants[1].ExpiresAt, soon)
	is.Equal(grants[1].Remaining, int64(0))
	is.Equal(*grants[1].ExpiredAt, clk.Now()) // written off by the balance
	theirs, err := db.ListGrants(ctx, other)
	is.NoErr(err)
	is.Equal(len(theirs), 0)

	all, err := db.CreditLedger(ctx, "acme") // oldest first
	is.NoErr(err)
	is.Equal(len(all), 7) // two grants, five charges
	var paged []store.LedgerEntry
	var before int64
	for {
		page, err := db.LedgerPage(ctx, org, before, 3)
		is.NoErr(err)
		is.True(len(page) <= 3)
		if len(page) == 0 {
			break
		}
		paged = append(paged, page...)
		before = page[len(page)-1].ID
	}
	is.Equal(len(paged), len(all))
	for i := range paged {
		is.Equal(paged[i], all[len(all)-1-i]) // newest first
	}
	page, err := db.LedgerPage(ctx, org, 0, 0)
	is.NoErr(err)
	is.Equal(len(page), 7) // the default page holds them all
	page, err = db.LedgerPage(ctx, other, 0, 10)
	is.NoErr(err)
	is.Equal(len(page), 0)
	page, err = db.LedgerPage(ctx, org, all[0].ID, 10)
	is.NoErr(err)
	is.Equal(len(page), 0) // nothing before the first row
	_, err = db.LedgerPage(ctx, org, -1, 10)
	is.Equal(enrich.KindOf(err), enrich.KindInvalid)
}

func testLedgerPageBound(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	org := NewOrg(t, db, "acme")
	for range store.MaxLedgerPage + 5 {
		_, err := db.GrantCredits(ctx, "acme", 1, nil)
		is.NoErr(err)
	}
	page, err := db.LedgerPage(ctx, org, 0, 1<<30)
	is.NoErr(err)
	is.Equal(len(page), store.MaxLedgerPage)
	page, err = db.LedgerPage(ctx, org, 0, 0)
	is.NoErr(err)
	is.Equal(len(page), store.DefaultLedgerPage)
}
