package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/matryer/is"
)

// newBatch is a company batch of the organization, a row a domain, each row's
// values the domain and its number.
func newBatch(orgID string, domains ...string) store.NewBatch {
	nb := store.NewBatch{OrgID: orgID, ObjectType: enrich.ObjectCompany, Name: "crm.csv", Columns: []string{"domain", "n"},
		CreditsEstimate: int64(len(domains))}
	for i, d := range domains {
		req, _ := json.Marshal(map[string]string{"domain": d})
		nb.Rows = append(nb.Rows, store.NewBatchRow{Values: []string{d, fmt.Sprint(i + 1)}, Request: req})
	}
	return nb
}

// batchRowTask is the task of one row of a batch, as the server makes it.
func batchRowTask(orgID, batchID string, row int, domain string) store.NewTask {
	nt := NewTask(orgID, domain)
	nt.IdempotencyKey, nt.Endpoint, nt.BodyHash = store.RowIdempotencyKey(batchID, row), "POST /v1/batches", "row-"+domain
	nt.Batch = &store.BatchRowRef{BatchID: batchID, Row: row}
	return nt
}

// testBatchRowsGetTheirTasks: a batch is kept as created, its rows are pending until
// their tasks are made (linked in the task's transaction) or they are failed, the
// counts follow the tasks, and the results come in row order, a page at a time.
func testBatchRowsGetTheirTasks(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 10, nil)
	is.NoErr(err)

	b, replayed, err := db.CreateBatch(ctx, store.BySystem, newBatch(org, "a.com", "b.com", "c.com"))
	is.NoErr(err)
	is.True(!replayed)
	is.Equal(b.Rows, 3)
	is.Equal(b.Status, store.BatchRunning)
	is.Equal(b.Counts, store.BatchCounts{Pending: 3})
	is.Equal(b.CreatedAt, clk.Now())
	is.Equal(b.IdempotencyKey, nil)
	got, err := db.GetBatch(ctx, org, b.ID)
	is.NoErr(err)
	is.Equal(got, b)
	bal, err := db.CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(bal.Charged, int64(0)) // a batch charges nothing until its rows' tasks are made

	pending, err := db.PendingBatchRows(ctx, 10, 2)
	is.NoErr(err)
	is.Equal(len(pending), 2) // two a batch
	is.Equal(pending[0], store.PendingBatchRow{BatchID: b.ID, OrgID: org, ObjectType: enrich.ObjectCompany, Row: 1, Request: json.RawMessage(`{"domain":"a.com"}`)})
	is.Equal(pending[1].Row, 2)

	first, err := db.CreateTask(ctx, store.BySystem, batchRowTask(org, b.ID, 1, "a.com"))
	is.NoErr(err)
	again, err := db.CreateTask(ctx, store.BySystem, batchRowTask(org, b.ID, 1, "a.com"))
	is.NoErr(err)
	is.True(again.Replayed)
	is.Equal(again.Task.ID, first.Task.ID)
	is.NoErr(db.FailBatchRow(ctx, b.ID, 2, &enrich.TaskError{Code: "insufficient_credits", Message: "not enough credits"}))
	is.NoErr(db.FailBatchRow(ctx, b.ID, 1, &enrich.TaskError{Code: "x", Message: "a row with its task keeps it"}))
	pending, err = db.PendingBatchRows(ctx, 10, 10)
	is.NoErr(err)
	is.Equal(len(pending), 1)
	is.Equal(pending[0].Row, 3)

	claim, err := db.ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	ok, err := db.Settle(ctx, claim, store.Outcome{Result: &enrich.Result{Company: &enrich.Company{Name: "A", Domain: enrich.Ptr("a.com")}}, Fetched: true})
	is.NoErr(err)
	is.True(ok)
	_, err = db.CreateTask(ctx, store.BySystem, batchRowTask(org, b.ID, 3, "c.com"))
	is.NoErr(err)
	b, err = db.GetBatch(ctx, org, b.ID)
	is.NoErr(err)
	is.Equal(b.Counts, store.BatchCounts{Succeeded: 1, Failed: 1, Queued: 1})
	is.Equal(b.CreditsSpent, int64(2))
	is.Equal(b.Status, store.BatchRunning)
	pending, err = db.PendingBatchRows(ctx, 10, 10)
	is.NoErr(err)
	is.Equal(len(pending), 0)

	res, err := db.BatchResults(ctx, org, b.ID, 0, 2)
	is.NoErr(err)
	is.Equal(len(res), 2)
	is.Equal(res[0].Row, 1)
	is.Equal(res[0].Values, []string{"a.com", "1"})
	is.Equal(res[0].Task.ID, first.Task.ID)
	is.Equal(res[0].Task.Status, store.StatusSucceeded)
	is.True(len(res[0].Task.Data) > 0)
	is.Equal(res[1].Task, nil)
	is.Equal(res[1].Error.Code, "insufficient_credits")
	res, err = db.BatchResults(ctx, org, b.ID, 2, 2)
	is.NoErr(err)
	is.Equal(len(res), 1)
	is.Equal(res[0].Row, 3)
	is.Equal(res[0].Task.Status, store.StatusQueued)

	// Newest first, in pages.
	clk.Add(time.Millisecond)
	b2, _, err := db.CreateBatch(ctx, store.BySystem, newBatch(org, "d.com"))
	is.NoErr(err)
	list, total, err := db.ListBatches(ctx, org, 0, 1)
	is.NoErr(err)
	is.Equal(total, int64(2))
	is.Equal(len(list), 1)
	is.Equal(list[0].ID, b2.ID)
	list, _, err = db.ListBatches(ctx, org, 1, 1)
	is.NoErr(err)
	is.Equal(list[0], b)

	// Another organization's batch is not found, and its list is empty.
	other := NewOrg(t, db, "other")
	_, err = db.GetBatch(ctx, other, b.ID)
	is.Equal(enrich.KindOf(err), enrich.KindNotFound)
	_, err = db.BatchResults(ctx, other, b.ID, 0, 10)
	is.Equal(enrich.KindOf(err), enrich.KindNotFound)
	list, total, err = db.ListBatches(ctx, other, 0, 10)
	is.NoErr(err)
	is.Equal(total, int64(0))
	is.Equal(len(list), 0)
}

// testBatchIdempotencyKeyAndCredits: a batch's key gives the same batch back, and is
// refused with another upload; a balance below the estimate writes nothing.
func testBatchIdempotencyKeyAndCredits(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	org := NewOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 2, nil)
	is.NoErr(err)

	nb := newBatch(org, "a.com", "b.com", "c.com")
	_, _, err = db.CreateBatch(ctx, store.BySystem, nb)
	var e *enrich.Error
	is.True(errors.As(err, &e))
	is.Equal(e.Code, "insufficient_credits")
	is.Equal(*e.CreditsRemaining, int64(2))
	_, total, err := db.ListBatches(ctx, org, 0, 10)
	is.NoErr(err)
	is.Equal(total, int64(0))

	nb = newBatch(org, "a.com", "b.com")
	nb.IdempotencyKey, nb.BodyHash = "upload-1", "hash-1"
	b, replayed, err := db.CreateBatch(ctx, store.BySystem, nb)
	is.NoErr(err)
	is.True(!replayed)
	is.Equal(*b.IdempotencyKey, "upload-1")
	_, err = db.CreateTask(ctx, store.BySystem, batchRowTask(org, b.ID, 1, "a.com"))
	is.NoErr(err)
	_, err = db.CreateTask(ctx, store.BySystem, batchRowTask(org, b.ID, 2, "b.com"))
	is.NoErr(err)

	// The balance is spent now; the replay is the batch all the same.
	again, replayed, err := db.CreateBatch(ctx, store.BySystem, nb)
	is.NoErr(err)
	is.True(replayed)
	is.Equal(again.ID, b.ID)
	is.Equal(again.Counts, store.BatchCounts{Queued: 2})
	nb.BodyHash = "hash-2"
	_, _, err = db.CreateBatch(ctx, store.BySystem, nb)
	is.Equal(errCode(err), "idempotency_key_reused")
	_, total, err = db.ListBatches(ctx, org, 0, 10)
	is.NoErr(err)
	is.Equal(total, int64(1))
}

// testOneBatchKeyFromTwoHandles: the same upload sent twice at once with one key
// makes one batch.
func testOneBatchKeyFromTwoHandles(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	a, b := env.DB, env.Open()
	org := NewOrg(t, a, "acme")
	_, err := a.GrantCredits(ctx, "acme", 100, nil)
	is.NoErr(err)
	for round := range 10 {
		nb := newBatch(org, "a.com", "b.com")
		nb.IdempotencyKey, nb.BodyHash = fmt.Sprintf("key-%d", round), "hash"
		var ba, bb *store.Batch
		var ra, rb bool
		var errA, errB error
		together(
			func() { ba, ra, errA = a.CreateBatch(ctx, store.BySystem, nb) },
			func() { bb, rb, errB = b.CreateBatch(ctx, store.BySystem, nb) },
		)
		is.NoErr(errA)
		is.NoErr(errB)
		is.Equal(ba.ID, bb.ID)
		is.True(ra != rb)
	}
	_, total, err := a.ListBatches(ctx, org, 0, 100)
	is.NoErr(err)
	is.Equal(total, int64(10))
}

// testOneBatchRowFromTwoHandles: two replicas feeding one batch make each row's task
// at the same moment; every row has one task, charged once, and the row is linked to it.
func testOneBatchRowFromTwoHandles(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	a, b := env.DB, env.Open()
	org := NewOrg(t, a, "acme")
	_, err := a.GrantCredits(ctx, "acme", 100, nil)
	is.NoErr(err)
	domains := []string{"a.com", "b.com", "c.com", "d.com", "e.com", "f.com", "g.com", "h.com"}
	batch, _, err := a.CreateBatch(ctx, store.BySystem, newBatch(org, domains...))
	is.NoErr(err)
	for i, d := range domains {
		var ea, eb *store.Enqueued
		var errA, errB error
		together(
			func() { ea, errA = a.CreateTask(ctx, store.BySystem, batchRowTask(org, batch.ID, i+1, d)) },
			func() { eb, errB = b.CreateTask(ctx, store.BySystem, batchRowTask(org, batch.ID, i+1, d)) },
		)
		is.NoErr(errA)
		is.NoErr(errB)
		is.Equal(ea.Task.ID, eb.Task.ID)
		is.True(ea.Replayed != eb.Replayed)
	}
	bal, err := a.CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(bal.Charged, int64(len(domains)))
	got, err := a.GetBatch(ctx, org, batch.ID)
	is.NoErr(err)
	is.Equal(got.Counts, store.BatchCounts{Queued: int64(len(domains))})
	is.Equal(got.CreditsSpent, int64(len(domains)))
	pending, err := a.PendingBatchRows(ctx, 10, 100)
	is.NoErr(err)
	is.Equal(len(pending), 0)
}

// testRetentionDeletesOldBatches: a batch uploaded before the cutoff goes with its
// rows, a newer one stays.
func testRetentionDeletesOldBatches(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	org := NewOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 10, nil)
	is.NoErr(err)
	old, _, err := db.CreateBatch(ctx, store.BySystem, newBatch(org, "a.com", "b.com"))
	is.NoErr(err)
	clk.Add(48 * time.Hour)
	kept, _, err := db.CreateBatch(ctx, store.BySystem, newBatch(org, "c.com"))
	is.NoErr(err)
	p, err := db.PurgeSettled(ctx, clk.Now().Add(-24*time.Hour), 500)
	is.NoErr(err)
	is.Equal(p.Batches, 1)
	_, err = db.GetBatch(ctx, org, old.ID)
	is.Equal(enrich.KindOf(err), enrich.KindNotFound)
	_, err = db.GetBatch(ctx, org, kept.ID)
	is.NoErr(err)
	var rows int
	is.NoErr(env.Raw().QueryRow(`SELECT count(*) FROM batch_rows`).Scan(&rows))
	is.Equal(rows, 1) // the old batch's rows went with it
	pending, err := db.PendingBatchRows(ctx, 10, 10)
	is.NoErr(err)
	is.Equal(len(pending), 1)
}

// personRowTask is the task of a person row of a batch (its email's lookup), or of
// its company's when company.
func personRowTask(orgID, batchID string, row int, email string, company bool) store.NewTask {
	nt := batchRowTask(orgID, batchID, row, email)
	raw, _ := json.Marshal(map[string]string{"email": email})
	nt.Input, nt.RawInput, nt.BodyHash = enrich.Input{Lookup: enrich.LookupEmail, Target: email}, raw, "row-"+email
	if company {
		domain := email[strings.IndexByte(email, '@')+1:]
		nt = batchRowTask(orgID, batchID, row, domain)
		nt.IdempotencyKey = store.CompanyRowIdempotencyKey(batchID, row)
		nt.Batch.Company = true
	}
	return nt
}

// testMixedBatchRows: a mixed batch keeps each row's kind, a person row's company
// beside it and the rows skipped at the upload; the feeder reads a row's lookups in
// row order, each linked to its own task or failed alone; the counts, results and
// failures follow each lookup.
func testMixedBatchRows(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	org := NewOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 20, nil)
	is.NoErr(err)

	req := func(k, v string) json.RawMessage { raw, _ := json.Marshal(map[string]string{k: v}); return raw }
	nb := store.NewBatch{OrgID: org, ObjectType: store.ObjectMixed, Name: "contacts.csv", Columns: []string{"email", "domain"},
		CreditsEstimate: 9, Rows: []store.NewBatchRow{
			{Values: []string{"ann@acme.com", "acme.com"}, Kind: enrich.ObjectPerson, Request: req("email", "ann@acme.com"), CompanyRequest: req("domain", "acme.com"), Line: 2},
			{Values: []string{"", "globex.com"}, Kind: enrich.ObjectCompany, Request: req("domain", "globex.com"), Line: 3},
			{Values: []string{"bad", ""}, Skipped: "email \"bad\" is not an email address", Line: 4},
			{Values: []string{"bob@initech.com", ""}, Kind: enrich.ObjectPerson, Request: req("email", "bob@initech.com"), Line: 6},
			{Values: []string{"cy@hooli.com", "hooli.com"}, Kind: enrich.ObjectPerson, Request: req("email", "cy@hooli.com"), CompanyRequest: req("domain", "hooli.com"), Line: 7},
		}}
	b, _, err := db.CreateBatch(ctx, store.BySystem, nb)
	is.NoErr(err)
	is.Equal(b.ObjectType, store.ObjectMixed)
	is.Equal(b.Rows, 5)
	is.Equal(b.Counts, store.BatchCounts{Pending: 6, Skipped: 1})
	is.Equal(b.SkippedRows, []enrich.RowError{{Row: 3, Line: 4, Message: `email "bad" is not an email address`}})
	is.Equal(b.Total(), int64(7))
	got, err := db.GetBatch(ctx, org, b.ID)
	is.NoErr(err)
	is.Equal(got, b)

	pending, err := db.PendingBatchRows(ctx, 10, 10)
	is.NoErr(err)
	type part struct {
		row     int
		kind    string
		company bool
	}
	var parts []part
	for _, p := range pending {
		is.Equal(p.BatchID, b.ID)
		parts = append(parts, part{p.Row, p.ObjectType, p.Company})
	}
	is.Equal(parts, []part{{1, "person", false}, {1, "company", true}, {2, "company", false}, {4, "person", false}, {5, "person", false}, {5, "company", true}})
	is.Equal(string(pending[1].Request), `{"domain":"acme.com"}`)
	short, err := db.PendingBatchRows(ctx, 10, 3) // a row's own and its company count apart
	is.NoErr(err)
	is.Equal(len(short), 3)
	is.Equal(short[2].Row, 2)

	// Row 1: its person and its company, each its own task, each linked once.
	ann, err := db.CreateTask(ctx, store.BySystem, personRowTask(org, b.ID, 1, "ann@acme.com", false))
	is.NoErr(err)
	acme, err := db.CreateTask(ctx, store.BySystem, personRowTask(org, b.ID, 1, "ann@acme.com", true))
	is.NoErr(err)
	is.True(ann.Task.ID != acme.Task.ID)
	again, err := db.CreateTask(ctx, store.BySystem, personRowTask(org, b.ID, 1, "ann@acme.com", true))
	is.NoErr(err)
	is.True(again.Replayed)
	is.Equal(again.Task.ID, acme.Task.ID)
	// Row 5's company gets no task (the credits ran out, say); its person does.
	is.NoErr(db.FailBatchCompany(ctx, b.ID, 5, &enrich.TaskError{Code: "insufficient_credits", Message: "not enough credits"}))
	is.NoErr(db.FailBatchCompany(ctx, b.ID, 2, &enrich.TaskError{Code: "x", Message: "a row without a company has none to fail"}))
	cy, err := db.CreateTask(ctx, store.BySystem, personRowTask(org, b.ID, 5, "cy@hooli.com", false))
	is.NoErr(err)
	pending, err = db.PendingBatchRows(ctx, 10, 10)
	is.NoErr(err)
	parts = nil
	for _, p := range pending {
		parts = append(parts, part{p.Row, p.ObjectType, p.Company})
	}
	is.Equal(parts, []part{{2, "company", false}, {4, "person", false}})

	b, err = db.GetBatch(ctx, org, b.ID)
	is.NoErr(err)
	is.Equal(b.Counts, store.BatchCounts{Pending: 2, Queued: 3, Failed: 1, Skipped: 1})
	is.Equal(b.CreditsSpent, int64(3+1+3))

	res, err := db.BatchResults(ctx, org, b.ID, 0, 10)
	is.NoErr(err)
	is.Equal(len(res), 5)
	is.Equal(res[0].Kind, enrich.ObjectPerson)
	is.Equal(res[0].Line, 2)
	is.Equal(res[0].Task.ID, ann.Task.ID)
	is.Equal(res[0].Company.Task.ID, acme.Task.ID)
	is.Equal(res[1].Kind, enrich.ObjectCompany)
	is.Equal(res[1].Company, nil)
	is.Equal(res[1].Task, nil)
	is.True(res[2].Skipped)
	is.Equal(res[2].Error.Message, `email "bad" is not an email address`)
	is.Equal(res[2].Values, []string{"bad", ""})
	is.Equal(res[4].Task.ID, cy.Task.ID)
	is.Equal(res[4].Company.Error.Code, "insufficient_credits")

	fails, err := db.BatchFailures(ctx, org, b.ID, 10)
	is.NoErr(err)
	is.Equal(fails, []store.BatchFailure{
		{Row: 3, Line: 4, Skipped: true, Code: "invalid_input", Message: `email "bad" is not an email address`},
		{Row: 5, Line: 7, Kind: enrich.ObjectCompany, Code: "insufficient_credits", Message: "not enough credits"},
	})
	// A task that fails is listed with its task.
	claim, err := db.ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	_, err = db.Settle(ctx, claim, store.Outcome{Err: &enrich.TaskError{Code: "not_found", Message: "no one"}})
	is.NoErr(err)
	fails, err = db.BatchFailures(ctx, org, b.ID, 10)
	is.NoErr(err)
	is.Equal(len(fails), 3)
	found := false
	for _, f := range fails {
		if f.TaskID == claim.TaskID {
			found = true
			is.Equal(f.Code, "not_found")
			is.Equal(f.Message, "no one")
		}
	}
	is.True(found)
	fails, err = db.BatchFailures(ctx, org, b.ID, 1)
	is.NoErr(err)
	is.Equal(len(fails), 1)
	_, err = db.BatchFailures(ctx, NewOrg(t, db, "other"), b.ID, 10)
	is.Equal(enrich.KindOf(err), enrich.KindNotFound)

	// A single-kind batch keeps its rows as it did: no kind, no company.
	for _, bad := range []store.NewBatch{
		{OrgID: org, ObjectType: store.ObjectMixed, Rows: []store.NewBatchRow{{Values: []string{"a"}, Request: req("domain", "a.com")}}},
		{OrgID: org, ObjectType: enrich.ObjectCompany, Rows: []store.NewBatchRow{{Values: []string{"a"}, Request: req("domain", "a.com"), Kind: enrich.ObjectCompany}}},
		{OrgID: org, ObjectType: store.ObjectMixed, Rows: []store.NewBatchRow{{Values: []string{"a"}, Request: req("domain", "a.com"), Kind: enrich.ObjectCompany, CompanyRequest: req("domain", "a.com")}}},
		{OrgID: org, ObjectType: enrich.ObjectCompany, Rows: []store.NewBatchRow{{Values: []string{"a"}, Skipped: "why", Request: req("domain", "a.com")}}},
	} {
		_, _, err := db.CreateBatch(ctx, store.BySystem, bad)
		is.True(err != nil)
	}
}

// testSubmitTasksKeepsTheOrderAndUndoesARefusalAlone: the batch feeder's rows are made
// in one transaction, in their order, so that the earlier rows get the credits left;
// a row refused (a bad request, credits run out) has its error and leaves nothing
// behind, not even its Idempotency-Key, and the others are made; made again, each
// made row replays its task, charging nothing.
func testSubmitTasksKeepsTheOrderAndUndoesARefusalAlone(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	org := NewOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 4, nil)
	is.NoErr(err)
	domains := []string{"a.com", "b.com", "c.com", "d.com"}
	b, _, err := db.CreateBatch(ctx, store.BySystem, newBatch(org, domains...))
	is.NoErr(err)
	for _, d := range []string{"x.com", "y.com"} { // two of the four credits spent since the upload
		_, err := db.CreateTask(ctx, store.BySystem, NewTask(org, d))
		is.NoErr(err)
	}
	nope := "nope"
	subs := make([]store.Submission, len(domains))
	for i, d := range domains {
		id := b.ID
		subs[i] = store.Submission{
			By: store.By{Actor: store.Actor{Kind: store.ActorBatch, ID: &id}},
			Request: store.TaskRequest{OrgID: org, Input: enrich.Input{Lookup: enrich.LookupDomain, Target: d},
				Fields: map[string]string{"domain": d}, IdempotencyKey: store.RowIdempotencyKey(b.ID, i+1),
				Route: "create_batch", Endpoint: "POST /v1/batches", Batch: &store.BatchRowRef{BatchID: b.ID, Row: i + 1}},
		}
	}
	subs[1].Request.LoopID = &nope // refused before the transaction
	lim := store.TaskLimits{TTL: time.Hour, MaxBacklog: 100, Freshness: time.Hour}

	outs, errs, err := db.SubmitTasks(ctx, subs, lim)
	is.NoErr(err)
	is.Equal(len(outs), 4)
	is.Equal(len(errs), 4)
	is.NoErr(errs[0])
	is.NoErr(errs[2])
	is.Equal(outs[0].Task.Status, store.StatusQueued)
	is.Equal(outs[2].Task.Status, store.StatusQueued)
	var e *enrich.Error
	is.True(errors.As(errs[1], &e) && e.Kind == enrich.KindInvalid)
	is.True(errors.As(errs[3], &e) && e.Kind == enrich.KindPaymentRequired) // the two credits went to the earlier rows
	is.True(outs[1] == nil && outs[3] == nil)
	bal, err := db.CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(bal.Charged, int64(4))
	queued, err := db.CountTasks(ctx, org, store.StatusQueued)
	is.NoErr(err)
	is.Equal(queued, int64(4))
	pending, err := db.PendingBatchRows(ctx, 10, 10)
	is.NoErr(err)
	is.Equal(len(pending), 2)
	is.Equal([]int{pending[0].Row, pending[1].Row}, []int{2, 4}) // the refused rows wait for their task or their failure

	// Alone in its transaction, a refused row is refused the same way.
	outs, errs, err = db.SubmitTasks(ctx, subs[3:], lim)
	is.NoErr(err)
	is.True(outs[0] == nil && errors.As(errs[0], &e) && e.Kind == enrich.KindPaymentRequired)

	// With credits, the refused row is made now: its key was never bound.
	_, err = db.GrantCredits(ctx, "acme", 5, nil)
	is.NoErr(err)
	outs, errs, err = db.SubmitTasks(ctx, []store.Submission{subs[0], subs[2], subs[3]}, lim)
	is.NoErr(err)
	for _, err := range errs {
		is.NoErr(err)
	}
	is.True(outs[0].Replayed && outs[1].Replayed) // the rows made before replay their tasks
	is.True(!outs[2].Replayed)
	bal, err = db.CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(bal.Charged, int64(5)) // one more: the row made now
	queued, err = db.CountTasks(ctx, org, store.StatusQueued)
	is.NoErr(err)
	is.Equal(queued, int64(5))

	// Once the organization's backlog refuses a row, its later rows are refused too,
	// even one made without the backlog (a personal mailbox's lookup, failed at once
	// and refunded): none is made ahead of the row refused.
	plain := func(in enrich.Input, fields map[string]string) store.Submission {
		return store.Submission{By: store.BySystem, Request: store.TaskRequest{OrgID: org, Input: in, Fields: fields,
			Route: "enrich", Endpoint: "POST /v1/enrich"}}
	}
	company := plain(enrich.Input{Lookup: enrich.LookupDomain, Target: "e.com"}, map[string]string{"domain": "e.com"})
	mailbox := plain(enrich.Input{Lookup: enrich.LookupEmail, Target: "ann@gmail.com"}, map[string]string{"email": "ann@gmail.com"})
	alone, _, err := db.SubmitTasks(ctx, []store.Submission{mailbox}, store.TaskLimits{TTL: time.Hour, MaxBacklog: 5, Freshness: time.Hour})
	is.NoErr(err)
	is.Equal(alone[0].Task.Status, store.StatusFailed) // alone, made past the full backlog
	tight := lim
	tight.MaxBacklog = 5 // as many as are queued
	outs, errs, err = db.SubmitTasks(ctx, []store.Submission{company, mailbox}, tight)
	is.NoErr(err)
	is.True(outs[0] == nil && outs[1] == nil)
	for _, err := range errs {
		is.True(errors.As(err, &e) && e.Kind == enrich.KindTooManyRequests)
	}
}
