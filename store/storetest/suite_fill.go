package storetest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/matryer/is"
)

// testFillListsPerOrganization: an organization's own list replaces the default for
// its object type alone; a list left out of a change is kept, an empty one goes back
// to the default; another organization and another handle see what they should.
func testFillListsPerOrganization(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	acme, globex := NewOrg(t, db, "acme"), NewOrg(t, db, "globex")
	defaults := enrich.FillLists{Company: []string{"name", "employee_count"}, Person: []string{"headline"}}
	list := func(names ...string) *[]string { return &names }

	got, err := db.FillLists(ctx, acme, defaults)
	is.NoErr(err)
	is.Equal(got, defaults) // nothing set: the default
	own, err := db.OrgFillLists(ctx, acme)
	is.NoErr(err)
	is.Equal(own, enrich.FillLists{})

	is.NoErr(db.SetFillLists(ctx, acme, store.FillUpdate{Company: list("slogan", " about", "slogan", "")}))
	got, err = db.FillLists(ctx, acme, defaults)
	is.NoErr(err)
	is.Equal(got, enrich.FillLists{Company: []string{"slogan", "about"}, Person: []string{"headline"}})

	is.NoErr(db.SetFillLists(ctx, acme, store.FillUpdate{Person: list("positions", "about")}))
	other := env.Open() // another process, or another replica, reads what this one wrote
	got, err = other.FillLists(ctx, acme, defaults)
	is.NoErr(err)
	is.Equal(got, enrich.FillLists{Company: []string{"slogan", "about"}, Person: []string{"positions", "about"}})

	got, err = db.FillLists(ctx, globex, defaults)
	is.NoErr(err)
	is.Equal(got, defaults) // another organization keeps the default

	is.NoErr(db.SetFillLists(ctx, acme, store.FillUpdate{Company: list()}))
	own, err = db.OrgFillLists(ctx, acme)
	is.NoErr(err)
	is.Equal(own, enrich.FillLists{Person: []string{"positions", "about"}})
	got, err = other.FillLists(ctx, acme, defaults)
	is.NoErr(err)
	is.Equal(got, enrich.FillLists{Company: []string{"name", "employee_count"}, Person: []string{"positions", "about"}})

	// Empty defaults keep first-hit-wins where the organization set nothing.
	got, err = db.FillLists(ctx, globex, enrich.FillLists{})
	is.NoErr(err)
	is.Equal(got, enrich.FillLists{})
}

// testFillListRefusals: an unknown field, another type's field or an unknown
// organization is refused and changes nothing.
func testFillListRefusals(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	acme := NewOrg(t, db, "acme")
	list := func(names ...string) *[]string { return &names }
	is.NoErr(db.SetFillLists(ctx, acme, store.FillUpdate{Company: list("slogan"), Person: list("about")}))
	var updated int64
	raw := env.Raw()
	is.NoErr(raw.QueryRow(`SELECT updated_at FROM fill_lists WHERE org_id = ?`, acme).Scan(&updated))
	env.Clock.Add(time.Second)

	for _, c := range []struct {
		u      store.FillUpdate
		object string
		bad    string
	}{
		{store.FillUpdate{Company: list("name", "sloagn")}, enrich.ObjectCompany, `"sloagn"`},
		{store.FillUpdate{Company: list("positions")}, enrich.ObjectCompany, `"positions"`},
		{store.FillUpdate{Company: list("name"), Person: list("created_at")}, enrich.ObjectPerson, `"created_at"`},
	} {
		e := errKind(t, db.SetFillLists(ctx, acme, c.u), enrich.KindInvalid, enrich.CodeInvalidInput)
		is.True(strings.Contains(e.Message, c.bad))
		is.True(strings.Contains(e.Message, strings.Join(enrich.FieldsOf(c.object), ", ")))
	}
	errKind(t, db.SetFillLists(ctx, "no-such-org", store.FillUpdate{Company: list("name")}), enrich.KindNotFound, "not_found")

	own, err := db.OrgFillLists(ctx, acme)
	is.NoErr(err)
	is.Equal(own, enrich.FillLists{Company: []string{"slogan"}, Person: []string{"about"}})
	var rows int
	var after int64
	is.NoErr(raw.QueryRow(`SELECT count(*) FROM fill_lists`).Scan(&rows))
	is.Equal(rows, 1)
	is.NoErr(raw.QueryRow(`SELECT updated_at FROM fill_lists WHERE org_id = ?`, acme).Scan(&after))
	is.Equal(after, updated)
}

// testFillListsChangedAtOnce: two handles changing different lists of one
// organization at once, its row not yet there, both stand.
func testFillListsChangedAtOnce(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	acme := NewOrg(t, env.DB, "acme")
	for round := range 5 {
		company, person := []string{"name"}, []string{"about"}
		if round%2 == 1 {
			company, person = []string{"slogan"}, []string{"headline"}
		}
		dbs := []*store.DB{env.DB, env.Open()}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		wg.Go(func() { errs[0] = dbs[0].SetFillLists(ctx, acme, store.FillUpdate{Company: &company}) })
		wg.Go(func() { errs[1] = dbs[1].SetFillLists(ctx, acme, store.FillUpdate{Person: &person}) })
		wg.Wait()
		is.NoErr(errs[0])
		is.NoErr(errs[1])
		own, err := env.DB.OrgFillLists(ctx, acme)
		is.NoErr(err)
		is.Equal(own, enrich.FillLists{Company: company, Person: person})
	}
}
