package storetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/matryer/is"

	"enrichd/enrich"
	"enrichd/store"
)

// testTasksKeepProvenanceAndSources settles tasks with what their sources were asked:
// a fetched result keeps its provenance and sources, and its record the provenance
// a later store hit shows with no source asked; a failure keeps the sources asked; a
// result with a field from an organization's own key is shown but never stored.
func testTasksKeepProvenanceAndSources(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 100, nil)
	is.NoErr(err)

	settleWith := func(out store.Outcome) *store.Task {
		t.Helper()
		c, err := db.ClaimTask(ctx, time.Minute)
		if err != nil || c == nil {
			t.Fatal(c, err)
		}
		if out.Result != nil && out.Result.Company != nil && out.Result.Company.Domain == nil {
			out.Result.Company.Domain = enrich.Ptr(c.Input.Target)
		}
		if ok, err := db.Settle(ctx, c, out); err != nil || !ok {
			t.Fatal(ok, err)
		}
		task, err := db.GetTask(ctx, org, c.TaskID)
		is.NoErr(err)
		return task
	}
	trace := enrich.Trace{
		Provenance: enrich.Provenance{"name": "pdl", "domain": "pdl", "slogan": "enrichlayer"},
		Sources: []enrich.SourceCall{
			{Name: "pdl", Outcome: enrich.OutcomeHit, VendorCalls: 1, Credits: 1, MS: 12},
			{Name: "enrichlayer", Outcome: enrich.OutcomeHit, VendorCalls: 2, MS: 40},
			{Name: "apollo", Outcome: enrich.OutcomeSkipped, Reason: enrich.ReasonFilled},
		},
	}
	wantSources := `[{"name":"pdl","outcome":"hit","vendor_calls":1,"vendor_credits":1,"ms":12},` +
		`{"name":"enrichlayer","outcome":"hit","vendor_calls":2,"vendor_credits":0,"ms":40},` +
		`{"name":"apollo","outcome":"skipped","reason":"filled","vendor_calls":0,"vendor_credits":0,"ms":0}]`

	_, err = db.CreateTask(ctx, store.BySystem, NewTask(org, "acme.com"))
	is.NoErr(err)
	fetched := settleWith(store.Outcome{Fetched: true, Trace: trace,
		Result: &enrich.Result{Company: &enrich.Company{Name: "Acme", Slogan: enrich.Ptr("Everything for coyotes")}}})
	is.Equal(fetched.Status, store.StatusSucceeded)
	is.Equal(string(fetched.Provenance), `{"domain":"pdl","name":"pdl","slogan":"enrichlayer"}`)
	is.Equal(string(fetched.Sources), wantSources)

	// Within the freshness window the store answers, asking no source, with the
	// provenance the record was stored with.
	clk.Add(time.Hour)
	hit, err := db.CreateTask(ctx, store.BySystem, NewTask(org, "acme.com"))
	is.NoErr(err)
	is.Equal(hit.Task.Status, store.StatusSucceeded)
	is.Equal(string(hit.Task.Provenance), string(fetched.Provenance))
	is.Equal(string(hit.Task.Sources), `[]`)
	got, err := db.GetTask(ctx, org, hit.Task.ID)
	is.NoErr(err)
	is.Equal(got, hit.Task) // read back as it was answered
	stored, prov, err := db.FindStoredWithProvenance(ctx, enrich.Input{Lookup: enrich.LookupDomain, Target: "acme.com"})
	is.NoErr(err)
	is.Equal(*stored.Company.Slogan, "Everything for coyotes")
	is.Equal(prov, trace.Provenance)

	// A failure keeps what was asked; it has no data, so no provenance.
	_, err = db.CreateTask(ctx, store.BySystem, NewTask(org, "nowhere.com"))
	is.NoErr(err)
	failed := settleWith(store.Outcome{Err: &enrich.TaskError{Code: enrich.CodeNotFound, Message: "no company"},
		Trace: enrich.Trace{Sources: []enrich.SourceCall{{Name: "pdl", Outcome: enrich.OutcomeMiss, VendorCalls: 1}}}})
	is.Equal(failed.Status, store.StatusFailed)
	is.Equal(string(failed.Provenance), `{}`)
	is.Equal(string(failed.Sources), `[{"name":"pdl","outcome":"miss","vendor_calls":1,"vendor_credits":0,"ms":0}]`)

	// A record with a field from the organization's own key is that organization's:
	// the task shows it, the shared store does not keep it.
	_, err = db.CreateTask(ctx, store.BySystem, NewTask(org, "private.com"))
	is.NoErr(err)
	private := settleWith(store.Outcome{Fetched: true,
		Result: &enrich.Result{Company: &enrich.Company{Name: "Private"}},
		Trace:  enrich.Trace{Provenance: enrich.Provenance{"name": "pdl"}, Private: true, Sources: []enrich.SourceCall{}}})
	is.Equal(private.Status, store.StatusSucceeded)
	is.Equal(string(private.Provenance), `{"name":"pdl"}`)
	var data map[string]any
	is.NoErr(json.Unmarshal(private.Data, &data))
	is.Equal(data["name"], "Private")
	kept, err := db.FindStored(ctx, enrich.Input{Lookup: enrich.LookupDomain, Target: "private.com"})
	is.NoErr(err)
	is.True(kept == nil) // not in the shared store

	// A task settled with no trace (a result from before provenance was kept) shows
	// empty ones, never null.
	_, err = db.CreateTask(ctx, store.BySystem, NewTask(org, "old.com"))
	is.NoErr(err)
	old := settleWith(store.Outcome{Fetched: true, Result: &enrich.Result{Company: &enrich.Company{Name: "Old"}}})
	is.Equal(string(old.Provenance), `{}`)
	is.Equal(string(old.Sources), `[]`)
}
