package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/server/servertest"
	"enrichd/store"

	"github.com/matryer/is"
)

// searchVendor is a vendor that only searches staff, at 10 vendor credits a search (as
// Enrich Layer bills), listing the fake network's staff.
type searchVendor struct {
	net      *servertest.FakeNetwork
	searches atomic.Int64
}

func (v *searchVendor) Name() string          { return "searcher" }
func (v *searchVendor) Prices() enrich.Prices { return enrich.Prices{StaffSearch: 10} }
func (v *searchVendor) CompanyByDomain(context.Context, *enrich.Tally, string) (*enrich.Company, error) {
	return nil, fmt.Errorf("searcher: %w", enrich.ErrNotFound)
}
func (v *searchVendor) CompanyByURL(context.Context, *enrich.Tally, string) (*enrich.Company, error) {
	return nil, fmt.Errorf("searcher: %w", enrich.ErrNotFound)
}
func (v *searchVendor) PersonByURL(context.Context, *enrich.Tally, string) (*enrich.Person, error) {
	return nil, fmt.Errorf("searcher: %w", enrich.ErrNotFound)
}
func (v *searchVendor) SearchStaff(ctx context.Context, tally *enrich.Tally, q enrich.StaffQuery) ([]enrich.StaffMember, error) {
	v.searches.Add(1)
	tally.Call()
	tally.Charge(10)
	return v.net.SearchStaff(ctx, tally, q)
}

// An email lookup's staff searches are held to the budgets and counted in the
// organization's spend like every other ask: the search is recorded with its 10
// credits, and once the month's credits reach the cap the vendor is not asked again.
func TestEmailStaffSearchesAreBudgeted(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	vendor := &searchVendor{}
	e := servertest.NewEnv(t, func(c *server.Config) { c.Sources = append(c.Sources, vendor) })
	vendor.net = e.Net
	servertest.AcmeNetwork(e)
	e.StartWorkers()

	e.EmailLookup("jane.smith@acme.com")
	is.Equal(vendor.searches.Load(), int64(1))
	_, by, _ := e.SourcesOf(e.Key)
	is.Equal(by["searcher"].SourceUse, store.SourceUse{Calls: 1, Hits: 1, Credits: 10})

	is.NoErr(e.DB.SetSourceBudget(context.Background(), e.OrgID, "searcher", 10))
	e.Net.AddPerson(servertest.Employee("maria-garcia", "Maria", "Garcia", servertest.AcmeURL, "Designer", "Madrid", "ES", false))
	before := e.Balance("acme")
	_, settled := e.EmailLookup("maria.garcia@acme.com")
	is.Equal(vendor.searches.Load(), int64(1)) // over its budget: not asked
	_, by, _ = e.SourcesOf(e.Key)
	is.Equal(by["searcher"].Credits, int64(10))
	// The search it could not make may have listed another Maria Garcia: nobody is
	// confirmed, and the task says a budget is why, refunded.
	is.Equal(settled.Str("task.status"), "failed")
	is.Equal(settled.Str("error.code"), "provider_unavailable")
	msg := settled.Str("error.message")
	is.True(strings.Contains(msg, "monthly budget of vendor credits of searcher is spent")) // names the budget
	is.True(!strings.Contains(msg, "could not be reached"))
	is.True(strings.Contains(string(settled.Raw), `{"name":"searcher","outcome":"skipped","reason":"budget"`))
	after := e.Balance("acme")
	is.Equal(after.Balance, before.Balance) // refunded
	is.Equal(after.Charged-before.Charged, after.Refund-before.Refund)
	is.True(after.Charged > before.Charged) // charged, then refunded
}

// The staff search an email lookup makes is one of the task's sources, with its calls
// and credits: a task's sources account for every vendor call it paid, the dearest
// (a search's 10 credits) included.
func TestEmailStaffSearchIsInTheTasksSources(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	vendor := &searchVendor{}
	e := servertest.NewEnv(t, func(c *server.Config) { c.Sources = append(c.Sources, vendor) })
	vendor.net = e.Net
	servertest.AcmeNetwork(e)
	e.StartWorkers()

	_, settled := e.EmailLookup("jane.smith@acme.com")
	is.Equal(settled.Str("task.status"), "succeeded")
	is.Equal(vendor.searches.Load(), int64(1))
	var found map[string]any
	list, _ := settled.Get("sources").([]any)
	for _, x := range list {
		if m, _ := x.(map[string]any); m["name"] == "searcher" {
			found = m
		}
	}
	is.True(found != nil) // the search is among the task's sources
	is.Equal(found["outcome"], "hit")
	is.Equal(found["vendor_calls"], float64(1))
	is.Equal(found["vendor_credits"], float64(10))
}
