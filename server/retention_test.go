package server_test

import (
	"context"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/server/servertest"

	"github.com/matryer/is"
)

// TestStoredRecordsPastRetentionAreDeleted stores two companies through the API two
// years apart; a year later maintenance deletes the one no source refreshed for three
// years, with its keys, and keeps the other.
func TestStoredRecordsPastRetentionAreDeleted(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	e := servertest.NewEnv(t, func(c *server.Config) { c.MaintenanceInterval = 10 * time.Millisecond })
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	e.Net.AddCompany(servertest.Company("Globex", "globex.com"))
	e.StartWorkers()
	const year = 365 * 24 * time.Hour
	enrichDomain := func(domain string) {
		t.Helper()
		r := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": domain})
		is.Equal(e.WaitSettled(r.Str("task.id")).Str("task.status"), "succeeded")
	}
	stored := func(in enrich.Input) *enrich.Result {
		t.Helper()
		res, err := e.DB.FindStored(ctx, in)
		is.NoErr(err)
		return res
	}
	acme := enrich.Input{Lookup: enrich.LookupDomain, Target: "acme.com"}
	acmePage := enrich.Input{Lookup: enrich.LookupCompanyURL, Target: "https://www.linkedin.com/company/acme"}
	globex := enrich.Input{Lookup: enrich.LookupDomain, Target: "globex.com"}

	enrichDomain("acme.com")
	e.Clock.Add(2 * year)
	enrichDomain("globex.com")
	is.True(stored(acme) != nil && stored(acmePage) != nil)

	e.Clock.Add(year + 24*time.Hour) // Acme: three years and a day without a refresh
	e.WaitMetric(`enrichd_retention_deleted_total{kind="records"}`, 1)
	is.Equal(stored(acme), nil)
	is.Equal(stored(acmePage), nil) // every key went with it
	is.Equal(stored(globex).Company.Name, "Globex")
}

// TestGatheredCandidatesPastRetentionAreDeleted: an ambiguous address keeps the
// profiles it gathered for a retry with a hint, which decides without a new search;
// past --retain-candidates (7 days) maintenance deletes them, the record of the person
// a hint picked stays, and a retry with another hint then searches again, as a first
// lookup does, and answers.
func TestGatheredCandidatesPastRetentionAreDeleted(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	e := servertest.NewEnv(t, func(c *server.Config) { c.MaintenanceInterval = 10 * time.Millisecond })
	servertest.AcmeNetwork(e)
	e.StartWorkers()

	_, done := e.EmailLookup("jsmith@acme.com")
	is.Equal(done.Str("error.code"), "ambiguous")
	_, jack := e.EmailLookup("jsmith@acme.com", "fullName", "Jack Smith")
	is.Equal(jack.Str("data.network_url"), "https://www.linkedin.com/in/jack-smith")
	is.Equal(e.Net.Searches.Load(), int64(1)) // decided against what was gathered
	g, err := e.DB.Gathering(ctx, "jsmith@acme.com", time.Time{})
	is.NoErr(err)
	is.Equal(len(g.Candidates), 3)

	e.Clock.Add(6 * 24 * time.Hour)
	_, john := e.EmailLookup("jsmith@acme.com", "title", "Sales Director")
	is.Equal(john.Str("data.network_url"), "https://www.linkedin.com/in/john-smith")
	is.Equal(e.Net.Searches.Load(), int64(1)) // still within the window

	e.Clock.Add(2 * 24 * time.Hour)
	e.WaitMetric(`enrichd_retention_deleted_total{kind="email_candidates"}`, 3)
	e.WaitMetric(`enrichd_retention_deleted_total{kind="email_gatherings"}`, 1)
	g, err = e.DB.Gathering(ctx, "jsmith@acme.com", time.Time{})
	is.NoErr(err)
	is.Equal(g, nil)
	kept, err := e.DB.FindStored(ctx, enrich.Input{Lookup: enrich.LookupPersonURL, Target: "https://www.linkedin.com/in/jack-smith"})
	is.NoErr(err)
	is.Equal(*kept.Person.FullName, "Jack Smith") // the answer's record is not a candidate

	before := e.Balance("acme")
	_, jane := e.EmailLookup("jsmith@acme.com", "fullName", "Jane Smith")
	is.Equal(jane.Str("task.status"), "succeeded")
	is.Equal(jane.Str("data.network_url"), "https://www.linkedin.com/in/jane-smith")
	is.Equal(e.Net.Searches.Load(), int64(2)) // asked again
	is.Equal(e.Balance("acme").Balance, before.Balance-3)
	// That search gathered the Smiths again, for the next retry's week.
	g, err = e.DB.Gathering(ctx, "jsmith@acme.com", time.Time{})
	is.NoErr(err)
	is.Equal(len(g.Candidates), 3)
}
