package server_test

import (
	"context"
	"testing"

	"github.com/matryer/is"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/server/servertest"
	"enrichd/store"
)

// A worker fills, for each task, its organization's own list of the task's object
// type where it set one, and the server's default otherwise; a change is read by the
// next task.
func TestAWorkerReadsTheOrganizationsFillListOverTheDefault(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	e := servertest.NewEnv(t, func(c *server.Config) {
		c.Fill = enrich.FillLists{Company: []string{"name", "employee_count"}, Person: []string{"headline"}}
	})
	_, globex := e.NewOrg("globex", 10)
	company := enrich.Input{Lookup: enrich.LookupDomain, Target: "acme.com"}
	person := enrich.Input{Lookup: enrich.LookupPersonURL}
	fill := func(orgID string, in enrich.Input) []string {
		t.Helper()
		fields, err := e.Work.FillFor(ctx, &store.Claim{TaskID: "t", OrgID: orgID, Input: in})
		is.NoErr(err)
		return fields
	}

	is.Equal(fill(e.OrgID, company), []string{"name", "employee_count"})
	is.Equal(fill(e.OrgID, person), []string{"headline"})

	slogan := []string{"slogan", "about"}
	is.NoErr(e.DB.SetFillLists(ctx, e.OrgID, store.FillUpdate{Company: &slogan}))
	is.Equal(fill(e.OrgID, company), []string{"slogan", "about"})
	is.Equal(fill(e.OrgID, person), []string{"headline"}) // the other type keeps the default
	is.Equal(fill(globex, company), []string{"name", "employee_count"})

	none := []string{}
	is.NoErr(e.DB.SetFillLists(ctx, e.OrgID, store.FillUpdate{Company: &none}))
	is.Equal(fill(e.OrgID, company), []string{"name", "employee_count"})
}
