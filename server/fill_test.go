package server_test

import (
	"context"
	"testing"

	"github.com/matryer/is"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/store"
)

// A worker fills, for each task, its organization's own list of the task's object
// type where it set one, and the server's default otherwise; a change is read by the
// next task.
func TestAWorkerReadsTheOrganizationsFillListOverTheDefault(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	e := newEnv(t, func(c *server.Config) {
		c.Fill = enrich.FillLists{Company: []string{"name", "employee_count"}, Person: []string{"headline"}}
	})
	_, globex := e.newOrg("globex", 10)
	company := enrich.Input{Lookup: enrich.LookupDomain, Target: "acme.com"}
	person := enrich.Input{Lookup: enrich.LookupPersonURL}
	fill := func(orgID string, in enrich.Input) []string {
		t.Helper()
		fields, err := e.work.FillFor(ctx, &store.Claim{TaskID: "t", OrgID: orgID, Input: in})
		is.NoErr(err)
		return fields
	}

	is.Equal(fill(e.orgID, company), []string{"name", "employee_count"})
	is.Equal(fill(e.orgID, person), []string{"headline"})

	slogan := []string{"slogan", "about"}
	is.NoErr(e.db.SetFillLists(ctx, e.orgID, store.FillUpdate{Company: &slogan}))
	is.Equal(fill(e.orgID, company), []string{"slogan", "about"})
	is.Equal(fill(e.orgID, person), []string{"headline"}) // the other type keeps the default
	is.Equal(fill(globex, company), []string{"name", "employee_count"})

	none := []string{}
	is.NoErr(e.db.SetFillLists(ctx, e.orgID, store.FillUpdate{Company: &none}))
	is.Equal(fill(e.orgID, company), []string{"name", "employee_count"})
}

// claimOf is a claim of a task of the organization, as a worker holds it.
func claimOf(orgID string, lookup enrich.Lookup) *store.Claim {
	return &store.Claim{TaskID: "t", OrgID: orgID, Input: enrich.Input{Lookup: lookup, Target: "acme.com"}}
}
