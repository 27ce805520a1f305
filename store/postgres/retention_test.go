package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/matryer/is"
)

// TestRetentionQueriesUseTheirIndexes: the purges of stored records and of what email
// lookups gathered find the oldest through the index that holds what they may delete,
// and each row's keys, positions and candidates through their own.
func TestRetentionQueriesUseTheirIndexes(t *testing.T) {
	db, _ := newTestDB(t)
	want := map[string]string{
		"PurgeRecords":       "records_store_enriched",
		"PurgeRecordKeys":    "record_keys_record",
		"PurgePositions":     "positions_pkey",
		"PurgeRecordRows":    "records_pkey",
		"PurgeGatherings":    "email_gatherings_gathered",
		"PurgeCandidates":    "email_candidates_pkey",
		"PurgeGatheringRows": "email_gatherings_pkey",
	}
	for name, q := range store.RetentionQueries() {
		plan := explain(t, db, rebind(q.Query), q.Args...)
		if !strings.Contains(plan, want[name]) || strings.Contains(plan, "Seq Scan") {
			t.Errorf("%s does not use %s:\n%s", name, want[name], plan)
		}
	}
}

// TestARecordPurgedWhileItIsSavedIsWrittenAnew: retention deletes a stored record
// while a worker that read it settles a refresh of it on another replica. The settle
// waits for the deletion, finds the record gone and writes it anew, keys and all;
// updating the row that was gone and pointing the keys at it failed the settle on the
// foreign key, and the refresh was lost.
func TestARecordPurgedWhileItIsSavedIsWrittenAnew(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := newTestDB(t)
	org := newOrg(t, db, "acme", 10)
	settle := func(name string) (*store.Claim, store.Outcome) {
		enqueue(t, db, domainTask(org.ID, "acme.com"))
		c, err := facade(db).ClaimTask(ctx, time.Minute)
		is.NoErr(err)
		return c, store.Outcome{Result: &enrich.Result{Company: &enrich.Company{Name: name, Domain: enrich.Ptr("acme.com")}}, Fetched: true}
	}
	c, out := settle("Acme")
	ok, err := facade(db).Settle(ctx, c, out)
	is.NoErr(err)
	is.True(ok)
	var id int64
	is.NoErr(db.pool.QueryRow(ctx, `SELECT record_id FROM record_keys WHERE key = 'domain:acme.com'`).Scan(&id))

	clk.Add(time.Hour)
	c, out = settle("Acme Corp")
	// The purge's deletions, held open until the settle waits on them.
	purge, err := db.pool.Begin(ctx)
	is.NoErr(err)
	defer purge.Rollback(ctx)
	for _, q := range []string{`DELETE FROM record_keys WHERE record_id = $1`, `DELETE FROM positions WHERE record_id = $1`,
		`DELETE FROM records WHERE id = $1`} {
		_, err := purge.Exec(ctx, q, id)
		is.NoErr(err)
	}
	settled := make(chan error, 1)
	go func() {
		_, err := facade(db).Settle(ctx, c, out)
		settled <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for waiting := 0; waiting == 0; {
		is.NoErr(db.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting))
		if time.Now().After(deadline) {
			t.Fatal("the settle never waited for the purge")
		}
		time.Sleep(5 * time.Millisecond)
	}
	is.NoErr(purge.Commit(ctx))
	is.NoErr(<-settled)

	stored, err := facade(db).FindStored(ctx, enrich.Input{Lookup: enrich.LookupDomain, Target: "acme.com"})
	is.NoErr(err)
	is.Equal(stored.Company.Name, "Acme Corp")
	var records int
	is.NoErr(db.pool.QueryRow(ctx, `SELECT count(*) FROM records`).Scan(&records))
	is.Equal(records, 1)
}
